#!/usr/bin/env bash
# Builds the images the e2e node's containerd runs, without Docker or a registry: the step image (the content of
# deploy/image/Dockerfile), the pods' sandbox (pause) image, Argo's executor image (argoexec) and the stand-in for
# the images Argo's examples name, as docker-archive directories (what `docker save` writes, unpacked; a tar of
# one is what `ctr -n k8s.io images import -` reads). Each output line is "ARCHIVE-DIR REFERENCE"; the pause image
# comes first, the step image last.
#
#   deploy/e2e/image.sh [all]   build what is missing (pause, executor, examples, step); ~3 min cold, under a
#                               second warm
#   deploy/e2e/image.sh pause   the pause image only (a second)
#   deploy/e2e/image.sh executor Argo's executor image (argoexec from build.sh; a second)
#   deploy/e2e/image.sh examples the stand-in for busybox and alpine:3.23 that Argo's examples run (a second)
#   deploy/e2e/image.sh step    the step image only
#   deploy/e2e/image.sh --print print every line, build nothing (a missing tar is not an error here)
#   deploy/e2e/image.sh verify  build the step image if needed, then run its imports and
#                               `python -m components.finetune --help` in it as uid 1000
#
# The step image has two layers: a base (debootstrap's Debian + /opt/vcpilot with the dependencies), keyed by
# constraints.txt, pyproject.toml, deploy/image/install.sh and the Debian release, and the project on top, keyed by
# the code (git's tracked and untracked files of pipelines/, components/, agent/) — so a code change repacks only
# the small top layer. Everything lives under $E2E_CACHE/images; older builds are pruned when a new one succeeds.
# Needs root (debootstrap, mount, chroot), debootstrap, gcc with a static libc, tar, jq, flock.
# Environment: VCPILOT_E2E_CACHE (see lib.sh), VCPILOT_IMAGE_DEBIAN (bookworm), VCPILOT_IMAGE_MIRROR
# (http://deb.debian.org/debian, what this machine's apt uses), VCPILOT_IMAGE_SECURITY_MIRROR
# (http://deb.debian.org/debian-security), and pip's own PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS
# (local directories), PIP_CERT, PIP_DEFAULT_TIMEOUT and the http(s)_proxy variables, handed to pip in the chroot.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/e2e/lib.sh
source "$here/lib.sh"

repo=$(cd "$here/../.." && pwd)
image_dir=$repo/deploy/image
images=$E2E_CACHE/images
release=${VCPILOT_IMAGE_DEBIAN:-bookworm}
mirror=${VCPILOT_IMAGE_MIRROR:-http://deb.debian.org/debian}
security_mirror=${VCPILOT_IMAGE_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
venv=/opt/vcpilot
step_repo=vcpilot.local/step
pause_ref=vcpilot.local/pause:1
executor_ref=vcpilot.local/argoexec:$ARGO_VERSION
examples_refs=(docker.io/library/busybox:latest docker.io/library/alpine:3.23)
busybox=/usr/bin/busybox # Debian's busybox-static (deploy/e2e/host-deps.sh)
image_path=$venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# --- keys ------------------------------------------------------------------------------------------------------

sha() { sha256sum | cut -c1-16; }

# The base is keyed by its inputs — of pyproject.toml only what install.sh reads, so a new pytest marker does not
# rebuild 7 GB — and by the text of the functions that build it, so editing the recipe rebuilds it and editing
# anything else (the packing, the project step) does not.
base_hash() {
  {
    printf 'release=%s\n' "$release"
    cat "$repo/constraints.txt" "$image_dir/install.sh"
    python3 - "$repo/pyproject.toml" <<'EOF' || cat "$repo/pyproject.toml" # (a python3 without tomllib)
import json
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
print(json.dumps([project.get("requires-python"), project["dependencies"]]))
EOF
    declare -f build_base chroot_env
  } | sha
}

# The source files that go into the image: what git tracks or would track (untracked, not ignored) in the packages
# setuptools installs, and the files pip reads to build the wheel. Without git (an unpacked tarball), all files.
project_files() {
  (
    cd "$repo"
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
      git ls-files -z --cached --others --exclude-standard -- pipelines components agent |
        while IFS= read -r -d '' f; do [[ -f $f ]] && printf '%s\0' "$f"; done
    else
      find pipelines components agent -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0
    fi
    printf '%s\0' pyproject.toml constraints.txt README.md deploy/image/install.sh
  ) | LC_ALL=C sort -z -u
}

step_hash() {
  {
    base_hash
    cat "$here/image.sh"
    find "$image_dir" -type f -print0 | LC_ALL=C sort -z | xargs -0 cat
    project_files | (cd "$repo" && while IFS= read -r -d '' f; do
      printf '%s\n' "$f"
      cat "$f"
    done)
  } | sha
}

pause_hash() {
  { cat "$image_dir/pause.c"; declare -f build_pause; gcc --version | head -1; } | sha
}

# --- mounts: every one is recorded, and the EXIT trap takes them all down, newest first -----------------------

mounted=()
mount_at() { # mount_at TARGET MOUNT-ARGS...
  local target=$1
  shift
  mount "$@" "$target" || die "could not mount $target (mount $*)."
  mounted+=("$target")
}
unmount_all() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" || true
  done
  mounted=()
}
# A run that was killed (SIGKILL, a reboot of the sandbox) may have left mounts under the cache; take them down
# before anything below them is removed.
unmount_stale() {
  local m
  while read -r m; do
    log "unmounting $m, left by an earlier run"
    umount "$m" 2>/dev/null || umount -l "$m" || true
  done < <(awk -v p="$images/" 'index($5, p) == 1 {print $5}' /proc/self/mountinfo | sort -r)
}
# rm -rf on a directory that still has a mount below it would reach into what is mounted there (the base's rootfs,
# the pip cache, /dev): refuse instead.
safe_rm() {
  local d
  for d in "$@"; do
    if awk -v p="$d" '$5 == p || index($5, p "/") == 1 {found = 1} END {exit !found}' /proc/self/mountinfo; then
      die "$d still has something mounted below it; unmount it (findmnt | grep $d) and run again."
    fi
    rm -rf "$d"
  done
}
trap unmount_all EXIT
trap 'exit 130' INT TERM

# Runs a command in the chroot $1 with /proc, /dev and the pip cache; $2.. is the command.
chroot_env() {
  local root=$1
  shift
  mount_at "$root/proc" -t proc proc
  mount_at "$root/dev" --bind /dev
  mkdir -p "$images/pip-cache" "$images/wheels" "$root/var/cache/vcpilot-pip" "$root/var/cache/vcpilot-wheels"
  mount_at "$root/var/cache/vcpilot-pip" --bind "$images/pip-cache"
  mount_at "$root/var/cache/vcpilot-wheels" --bind "$images/wheels"
  rm -f "$root/etc/resolv.conf" # (a symlink there would make cp write outside the chroot)
  cp -L /etc/resolv.conf "$root/etc/resolv.conf" || die "could not copy /etc/resolv.conf into $root."
  # pip trusts what this machine trusts (a proxy's CA included), not only Debian's bundle.
  mkdir -p "$root/run/vcpilot-build"
  cp -L "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$root/run/vcpilot-build/ca.crt" ||
    die "could not copy the CA bundle ${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt} into $root (set PIP_CERT)."
  local env=(PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive
    PIP_CACHE_DIR=/var/cache/vcpilot-pip WHEELHOUSE=/var/cache/vcpilot-wheels PIP_CERT=/run/vcpilot-build/ca.crt
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off PIP_DEFAULT_TIMEOUT="${PIP_DEFAULT_TIMEOUT:-120}")
  local v
  for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST http_proxy https_proxy no_proxy HTTP_PROXY \
    HTTPS_PROXY NO_PROXY; do
    [[ -n ${!v:-} ]] && env+=("$v=${!v}")
  done
  # PIP_FIND_LINKS: each local directory is shown to the chroot under /run/vcpilot-build/find-links/N.
  local links=() i=0 d
  for d in ${PIP_FIND_LINKS:-}; do
    if [[ -d $d ]]; then
      mkdir -p "$root/run/vcpilot-build/find-links/$i"
      mount_at "$root/run/vcpilot-build/find-links/$i" --bind -o ro "$d"
      links+=("/run/vcpilot-build/find-links/$i")
      i=$((i + 1))
    elif [[ $d == http*://* ]]; then
      links+=("$d")
    fi
  done
  ((${#links[@]})) && env+=("PIP_FIND_LINKS=${links[*]}")
  local rc=0
  chroot "$root" /usr/bin/env -i "${env[@]}" "$@" || rc=$?
  unmount_all
  rm -rf "$root/run/vcpilot-build"
  : >"$root/etc/resolv.conf" # the runtime provides the pod's own
  chmod 644 "$root/etc/resolv.conf"
  return "$rc"
}

fail() { # fail LOG SENTENCE...: the sentence, then the end of the log that explains it
  local log=$1
  shift
  printf 'e2e: %s\n' "$*" >&2
  [[ -f $log ]] && tail -n 15 "$log" | sed 's/^/    /' >&2
  exit 1
}

# --- the base: Debian + /opt/vcpilot with every dependency ------------------------------------------------------

build_base() {
  local out=$1 work=$1.tmp log=$1.log
  safe_rm "$work"
  mkdir -p "$work" "$images/debs"
  log "base: debootstrap $release from $mirror (log: $log)"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates --cache-dir="$images/debs" \
    --keyring=/usr/share/keyrings/debian-archive-keyring.gpg "$release" "$work/rootfs" "$mirror" >"$log" 2>&1 ||
    fail "$log" "debootstrap could not install Debian $release from $mirror (log: $log);" \
      "check that the mirror is reachable, or set VCPILOT_IMAGE_MIRROR."
  echo localhost >"$work/rootfs/etc/hostname" # (debootstrap copies this machine's; the runtime sets the pod's)
  cat >"$work/rootfs/etc/apt/sources.list" <<EOF
deb $mirror $release main
deb $mirror $release-updates main
deb $security_mirror $release-security main
EOF
  log "base: Debian's security updates"
  chroot_env "$work/rootfs" sh -c 'apt-get update -q && apt-get upgrade -y -q && apt-get clean' >>"$log" 2>&1 ||
    fail "$log" "apt-get could not bring the base up to date from $mirror and $security_mirror (log: $log)."

  log "base: venv and dependencies with pip (log: $log)"
  mkdir -p "$work/rootfs/run/vcpilot-build/src"
  cp "$repo/constraints.txt" "$repo/pyproject.toml" "$image_dir/install.sh" "$work/rootfs/run/vcpilot-build/src/"
  chroot_env "$work/rootfs" sh /run/vcpilot-build/src/install.sh base /run/vcpilot-build/src >>"$log" 2>&1 ||
    fail "$log" "pip could not install the dependencies of constraints.txt into the base (log: $log);" \
      "check that PyPI is reachable (or set PIP_INDEX_URL / PIP_FIND_LINKS)."

  # What no container needs: package lists, caches, logs, device nodes (the runtime mounts /dev), and like
  # debian:slim the documentation but its copyright files.
  local r=${work:?}/rootfs
  safe_rm "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/* "$r"/var/cache/debconf/*-old "$r"/var/cache/vcpilot-pip \
    "$r"/var/cache/vcpilot-wheels \
    "$r"/var/log/* "$r"/root/.cache "$r"/tmp/* "$r"/dev/* "$r"/usr/share/man/* "$r"/usr/share/info/*
  find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete

  log "base: packing the layer"
  pack_layer "$r" "$work/layer.tar"
  du -s --apparent-size --block-size=1 "$r" | cut -f1 >"$work/unpacked-bytes"
  mv "$work" "$out"
}

# pack_layer DIR TAR: one image layer of everything under DIR, owners as numbers, and its digest in TAR.sha256.
pack_layer() {
  local dir=$1 tar=$2
  (cd "$dir" && find . -mindepth 1 -maxdepth 1 -printf '%P\0' | LC_ALL=C sort -z |
    tar --numeric-owner --sort=name --null -T - -cf "$tar")
  sha256sum "$tar" | cut -d' ' -f1 >"$tar.sha256"
}

# --- the project layer: pip installs the code into an empty directory, from the base's read-only venv ----------

build_project() {
  local base=$1 out=$2 work=$2.tmp log=$2.log
  safe_rm "$work"
  mkdir -p "$work/root" "$work/layer"
  log "step: installing the project (log: $log)"
  # The base's rootfs, read-only, so that nothing but the project's files can change; the project lands in /mnt.
  local root=$work/root
  mount_at "$root" --bind "$base/rootfs"
  mount -o remount,bind,ro "$root"
  mount_at "$root/proc" -t proc proc
  mount_at "$root/dev" --bind /dev
  mount_at "$root/tmp" -t tmpfs -o size=1g tmpfs
  mount_at "$root/mnt" --bind "$work/layer"
  mkdir "$root/tmp/src"
  project_files | (cd "$repo" && tar --null -T - -cf -) | tar -C "$root/tmp/src" -xf -
  local rc=0
  (umask 022 && chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    sh /tmp/src/deploy/image/install.sh project /tmp/src --root /mnt) >"$log" 2>&1 || rc=$?
  unmount_all
  ((rc == 0)) || fail "$log" "pip could not install the project into the image (log: $log)."
  [[ -d $work/layer$venv ]] || fail "$log" "pip installed nothing under $venv (log: $log)."
  log "step: packing the layer"
  pack_layer "$work/layer" "$work/layer.tar"
  mv "$work" "$out"
}

# --- docker-archive ---------------------------------------------------------------------------------------------

# write_archive OUT-DIR CONFIG.json TAG... (layers as further args after --): manifest.json, repositories, the
# config named by its digest, and each layer as <diff_id>/layer.tar — what `docker save` writes and ctr imports —
# as a directory, never packed: its layers are hard links (no copy of gigabytes on disk), and a tar of it is
# streamed into `ctr images import -` (deploy/e2e/nodes.sh).
write_archive() {
  local out=$1 config=$2
  shift 2
  local tags=() layers=()
  while [[ $1 != -- ]]; do
    tags+=("$1")
    shift
  done
  shift
  layers=("$@")
  local dir=$out.tmp
  safe_rm "$dir"
  safe_rm "$out"
  mkdir -p "$dir"
  local ids=() names=() l id
  for l in "${layers[@]}"; do
    id=$(cat "$l.sha256")
    mkdir -p "$dir/$id"
    ln "$l" "$dir/$id/layer.tar" # a hard link: the archive's tar reads the layer once, nothing is copied here
    ids+=("$id")
    names+=("$id/layer.tar")
  done
  local diff_ids
  diff_ids=$(printf 'sha256:%s\n' "${ids[@]}" | jq -R . | jq -s .)
  jq --argjson d "$diff_ids" '.rootfs = {type: "layers", diff_ids: $d}' "$config" >"$dir/config.json"
  local cid
  cid=$(sha256sum "$dir/config.json" | cut -d' ' -f1)
  mv "$dir/config.json" "$dir/$cid.json"
  jq -n --arg c "$cid.json" --argjson t "$(printf '%s\n' "${tags[@]}" | jq -R . | jq -s .)" \
    --argjson l "$(printf '%s\n' "${names[@]}" | jq -R . | jq -s .)" \
    '[{Config: $c, RepoTags: $t, Layers: $l}]' >"$dir/manifest.json"
  local top=${ids[${#ids[@]} - 1]}
  printf '%s\n' "${tags[@]}" | jq -R --arg top "$top" 'split(":") | {(.[0]): {(.[1]): $top}}' |
    jq -s 'reduce .[] as $x ({}; . * $x)' >"$dir/repositories"
  mv "$dir" "$out"
}

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }

build_step() {
  local bh=$1 sh=$2
  local base=$images/base-$bh step=$images/step-$sh
  if [[ ! -f $base/layer.tar.sha256 ]]; then
    build_base "$base"
  fi
  if [[ ! -f $step/layer.tar.sha256 ]]; then
    build_project "$base" "$step"
  fi
  log "step: writing the image archive"
  jq -n --arg created "$(now)" --arg path "PATH=$image_path" --arg sh "$sh" --arg bh "$bh" '{
    architecture: "amd64", os: "linux", created: $created,
    config: {
      User: "1000", WorkingDir: "/workspace", Cmd: ["vcpilot", "--help"],
      Env: [$path, "PYTHONUNBUFFERED=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "LANG=C.UTF-8", "HOME=/home/vcpilot"],
      Labels: {"org.opencontainers.image.title": "vcpilot step image", "vcpilot.base": $bh, "vcpilot.code": $sh}
    },
    history: [
      {created: $created, created_by: "deploy/e2e/image.sh: debootstrap, Debian updates, install.sh base"},
      {created: $created, created_by: "deploy/e2e/image.sh: install.sh project"}
    ]}' >"$step/config.in.json"
  write_archive "$step/archive" "$step/config.in.json" "$step_repo:$sh" "$step_repo:latest" -- \
    "$base/layer.tar" "$step/layer.tar"
  rm "$step/config.in.json"
  prune step "$sh"
  prune base "$bh"
}

# --- the pause image --------------------------------------------------------------------------------------------

build_pause() {
  local out=$1 work=$1.tmp
  safe_rm "$work"
  mkdir -p "$work/layer"
  gcc -static -O2 -s -Wall -Wextra -o "$work/layer/pause" "$image_dir/pause.c" ||
    die "gcc could not build deploy/image/pause.c statically: apt-get install -y gcc libc6-dev."
  pack_layer "$work/layer" "$work/layer.tar"
  jq -n --arg created "$(now)" '{architecture: "amd64", os: "linux", created: $created,
    config: {Entrypoint: ["/pause"], User: "65535:65535", Env: ["PATH=/"]},
    history: [{created: $created, created_by: "deploy/e2e/image.sh: gcc -static deploy/image/pause.c"}]}' \
    >"$work/config.in.json"
  write_archive "$work/archive" "$work/config.in.json" "$pause_ref" -- "$work/layer.tar"
  rm -rf "$work/layer" "$work/config.in.json"
  mv "$work" "$out"
}

# --- the Argo executor image: argoexec alone --------------------------------------------------------------------
# Argo's emissary executor copies /bin/argoexec from this image into every step pod (its init container) and runs
# it as the pod's wait sidecar; build.sh links it statically, so it needs nothing else. Upstream runs it as 8737.

build_executor() {
  local out=$1 work=$1.tmp
  [[ -x $E2E_BIN/argoexec ]] || die "$E2E_BIN/argoexec is missing: run deploy/e2e/build.sh first."
  safe_rm "$work"
  mkdir -p "$work/layer/bin" "$work/layer/tmp"
  chmod 1777 "$work/layer/tmp"
  cp "$E2E_BIN/argoexec" "$work/layer/bin/argoexec"
  pack_layer "$work/layer" "$work/layer.tar"
  jq -n --arg created "$(now)" '{architecture: "amd64", os: "linux", created: $created,
    config: {Entrypoint: ["/bin/argoexec"], User: "8737", Env: ["PATH=/bin"]},
    history: [{created: $created, created_by: "deploy/e2e/image.sh: argoexec from deploy/e2e/build.sh"}]}' \
    >"$work/config.in.json"
  write_archive "$work/archive" "$work/config.in.json" "$executor_ref" -- "$work/layer.tar"
  rm -rf "$work/layer" "$work/config.in.json"
  mv "$work" "$out"
}

# --- the examples' image: Debian's static busybox, as busybox and as alpine:3.23 ---------------------------------
# Argo's upstream examples (../shared/argo-examples, tests/e2e/test_argo_examples.py) run `busybox` and
# `alpine:3.23`; all they call there (sh, echo, sleep, od, awk) is busybox, which is also what Alpine's own commands
# are. So one layer stands in for both names: the static binary at /bin/busybox, the applet links
# `busybox --install -s` would make (each at the path busybox gives it), and /tmp. Pods run it as root, as upstream.
# (Their third image, python:alpine3.23, is the step image under a second name: nodes.sh tags it on each node.)

build_examples() {
  local out=$1 work=$1.tmp applet
  [[ -x $busybox ]] || die "$busybox is missing: apt-get install -y busybox-static."
  safe_rm "$work"
  mkdir -p "$work/layer/bin" "$work/layer/tmp"
  chmod 1777 "$work/layer/tmp"
  cp "$busybox" "$work/layer/bin/busybox"
  while read -r applet; do
    [[ $applet == bin/busybox ]] && continue
    mkdir -p "$work/layer/$(dirname "$applet")"
    ln -s /bin/busybox "$work/layer/$applet"
  done < <("$busybox" --list-full)
  # A dynamically linked busybox (Debian's `busybox` package) would find no libc in this layer.
  chroot "$work/layer" /bin/sh -c 'echo ok | od -c | awk "NR == 1 {exit 0}"' ||
    die "$busybox does not run on its own in an empty root: apt-get install -y busybox-static (not busybox)."
  pack_layer "$work/layer" "$work/layer.tar"
  jq -n --arg created "$(now)" --arg v "$("$busybox" 2>&1 | sed -n 1p)" \
    --arg path PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin '{architecture: "amd64", os: "linux",
    created: $created, config: {Cmd: ["sh"], Env: [$path]},
    history: [{created: $created, created_by: ("deploy/e2e/image.sh: Debian busybox-static, " + $v)}]}' \
    >"$work/config.in.json"
  write_archive "$work/archive" "$work/config.in.json" "${examples_refs[@]}" -- "$work/layer.tar"
  rm -rf "$work/layer" "$work/config.in.json"
  mv "$work" "$out"
}

# --- verify: the image's own view, from its layers, as the pods' user -------------------------------------------

verify() {
  local bh=$1 sh=$2 base=$images/base-$1 step=$images/step-$2
  [[ -f $step/archive/manifest.json ]] || build_step "$bh" "$sh"
  local root=$step.verify
  mkdir -p "$root"
  mount_at "$root" -t overlay overlay -o "lowerdir=$step/layer:$base/rootfs"
  mount_at "$root/proc" -t proc proc
  mount_at "$root/dev" --bind /dev
  mount_at "$root/tmp" -t tmpfs tmpfs
  local rc=0
  chroot --userspec=1000:1000 "$root" /usr/bin/env -i "PATH=$image_path" PYTHONUNBUFFERED=1 HOME=/tmp \
    LANG=C.UTF-8 sh -c 'cd /workspace && command -v python &&
      python -c "import torch, transformers, mlflow, components.finetune, components.serving, components.loadtest
print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"available\", torch.cuda.is_available())" &&
      python -m components.finetune --help >/dev/null && echo "python -m components.finetune --help: ok"' || rc=$?
  unmount_all
  rmdir "$root"
  ((rc == 0)) || die "the step image failed its check (above)."
}

# --- main -------------------------------------------------------------------------------------------------------

prune() { # prune PREFIX KEEP: remove the other builds named PREFIX-*
  local d
  for d in "$images/$1"-*; do
    [[ -e $d && $d != "$images/$1-$2"* ]] || continue
    log "removing the older build $(basename "$d")"
    safe_rm "$d"
  done
}

what=${1:-all}
case $what in
all | pause | executor | examples | step | verify | --print) ;;
*) die "usage: deploy/e2e/image.sh [all|pause|executor|examples|step|verify|--print]" ;;
esac

bh=$(base_hash)
sh=$(step_hash)
ph=$(pause_hash)
pause_tar=$images/pause-$ph/archive
# The executor is keyed by the argoexec binary itself (build.sh's cache names the recipe that made it).
eh=$({ sha256sum "$E2E_BIN/argoexec" 2>/dev/null || echo missing; declare -f build_executor; } | sha)
executor_tar=$images/executor-$eh/archive
# The examples' image is keyed by the busybox binary and its recipe.
xh=$({ sha256sum "$busybox" 2>/dev/null || echo missing; declare -f build_examples; } | sha)
examples_tar=$images/examples-$xh/archive
step_tar=$images/step-$sh/archive

if [[ $what == --print ]]; then
  echo "$pause_tar $pause_ref"
  echo "$executor_tar $executor_ref"
  echo "$examples_tar ${examples_refs[0]}"
  echo "$step_tar $step_repo:$sh"
  exit 0
fi

((EUID == 0)) || die "image.sh needs root (debootstrap, mount and chroot); run it as root, as the e2e node does."
for tool in debootstrap gcc jq tar flock; do
  command -v "$tool" >/dev/null || die "$tool is missing: apt-get install -y $tool."
done
mkdir -p "$images"
exec 9>"$images/.lock"
flock -n 9 || {
  log "waiting for another image.sh to finish"
  flock 9
}
unmount_stale

if [[ $what == verify ]]; then
  verify "$bh" "$sh"
  exit 0
fi
if [[ $what == all || $what == pause ]]; then
  if [[ ! -f $pause_tar/manifest.json ]]; then
    build_pause "$images/pause-$ph"
    prune pause "$ph"
  fi
  echo "$pause_tar $pause_ref"
fi
if [[ $what == all || $what == executor ]]; then
  if [[ ! -f $executor_tar/manifest.json ]]; then
    build_executor "$images/executor-$eh"
    prune executor "$eh"
  fi
  echo "$executor_tar $executor_ref"
fi
if [[ $what == all || $what == examples ]]; then
  if [[ ! -f $examples_tar/manifest.json ]]; then
    build_examples "$images/examples-$xh"
    prune examples "$xh"
  fi
  echo "$examples_tar ${examples_refs[0]}"
fi
if [[ $what == all || $what == step ]]; then
  if [[ ! -f $step_tar/manifest.json ]]; then
    start=$SECONDS
    build_step "$bh" "$sh"
    log "step image built in $((SECONDS - start)) s: $(du -sh "$step_tar" | cut -f1) archive," \
      "$(($(cat "$images/base-$bh/unpacked-bytes") / 1000000)) MB unpacked base"
  fi
  echo "$step_tar $step_repo:$sh"
fi
