#!/bin/sh
# Installs vcpilot into /opt/vcpilot inside the step image; the Dockerfile and deploy/e2e/image.sh both run it, so
# the image a user builds with Docker and the one e2e builds without Docker hold the same Python environment.
#
#   install.sh base    DIR        venv, dependencies (DIR holds constraints.txt and pyproject.toml), user vcpilot
#   install.sh project DIR [ARG]  the project from the source tree DIR, no dependencies; ARGs go to pip (--root)
#
# base and project are apart so that a code change reinstalls the project only (a Docker layer, an image.sh layer).
# TORCH_VARIANT=cpu installs torch from TORCH_CPU_INDEX first; the default (cuda) takes PyPI's torch, which
# brings its CUDA libraries as nvidia-* wheels. WHEELHOUSE (a directory) keeps every downloaded wheel for the next
# build: pip's own HTTP cache keeps nothing when the index's responses carry no cache headers, as behind some
# proxies, and 4 GB of CUDA wheels are worth keeping.
set -eu

VENV=/opt/vcpilot
# pip and setuptools are not in constraints.txt (pip freeze leaves them out); these are the versions it was made with.
PIP_VERSION=26.3
SETUPTOOLS_VERSION=84.2.1

die() {
  echo "install.sh: $*" >&2
  exit 1
}

# get PIP-INSTALL-ARGS: pip install, through $WHEELHOUSE when there is one (pip download skips the files it
# already holds; the install then reads nothing but them).
get() {
  if [ -n "${WHEELHOUSE:-}" ]; then
    "$VENV/bin/pip" download -q -d "$WHEELHOUSE" "$@"
    "$VENV/bin/pip" install -q --find-links "$WHEELHOUSE" --no-index "$@"
  else
    "$VENV/bin/pip" install -q "$@"
  fi
}

base() {
  dir=$1
  if [ ! -f "$dir/constraints.txt" ] || [ ! -f "$dir/pyproject.toml" ]; then
    die "$dir must hold constraints.txt and pyproject.toml."
  fi
  python3 -m venv "$VENV"
  get "pip==$PIP_VERSION" "setuptools==$SETUPTOOLS_VERSION"
  # The project's own dependencies, read from pyproject.toml: the same set `pip install -c constraints.txt .`
  # installs, without the code, so this layer survives code changes.
  "$VENV/bin/python" - "$dir/pyproject.toml" >/tmp/requirements.txt <<'EOF'
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["dependencies"]))
EOF
  case ${TORCH_VARIANT:-cuda} in
  cuda) ;;
  cpu)
    # (pip download knows nothing of what is installed: with a wheelhouse, the next step would fetch CUDA's torch.)
    [ -z "${WHEELHOUSE:-}" ] || die "WHEELHOUSE is for the cuda variant; unset it for TORCH_VARIANT=cpu."
    torch=$(grep -i '^torch==' "$dir/constraints.txt") || die "constraints.txt pins no torch version."
    get --index-url "${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}" "$torch"
    ;;
  *) die "TORCH_VARIANT is '$TORCH_VARIANT'; use cuda (PyPI's torch, the default) or cpu." ;;
  esac
  get -c "$dir/constraints.txt" -r /tmp/requirements.txt
  # drain3 pins cachetools==4.2.1, which MLflow's google-auth cannot share; it runs fine on current cachetools
  # (the Makefile's venv target does the same).
  get --no-deps -c "$dir/constraints.txt" drain3
  rm -f /tmp/requirements.txt
  # Of the wheels, what only a compiler or a test run would read: static libraries (180 MB, mostly Triton's CUPTI)
  # and the packages' own test suites (160 MB: pandas, scipy, sympy …). The shared libraries all stay: `import
  # torch` loads cuBLAS, cuDNN … even on a machine without a GPU. The .pyc stay too: without them every pod
  # compiles torch and transformers again, and the imports take 6 s instead of 3.
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  find "$site" -type f -name '*.a' -delete
  find "$site" -mindepth 2 -type d -name tests -prune -exec rm -rf {} +

  # The VCJobs run as uid 1000 (any uid works, but this one has a name and a writable HOME).
  useradd --uid 1000 --user-group --create-home --home-dir /home/vcpilot --shell /bin/sh vcpilot
  install -d -o 1000 -g 1000 /workspace
}

project() {
  dir=$1
  shift
  [ -f "$dir/pyproject.toml" ] || die "$dir is not the project's source tree (no pyproject.toml)."
  # The dependencies are in the base already, so nothing is fetched: no index, no build isolation (setuptools is
  # in the venv). The wheel is built in $dir, which must therefore be a scratch copy or a throwaway mount.
  "$VENV/bin/pip" install -q --no-deps --no-index --no-build-isolation -c "$dir/constraints.txt" "$@" "$dir"
}

case ${1:-} in
base | project)
  step=$1
  shift
  [ $# -ge 1 ] || die "usage: install.sh $step DIR"
  "$step" "$@"
  ;;
*) die "usage: install.sh base DIR | install.sh project DIR [PIP-ARG...]" ;;
esac
