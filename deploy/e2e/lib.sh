# Paths and helpers shared by build.sh, up.sh and down.sh, so that all three agree on where things live.
# shellcheck shell=bash disable=SC2034  # (the variables are for the scripts that source this file)

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/e2e/versions.env
source "$E2E_DIR/versions.env"
GO_MIN=1.26

log() { printf '%s e2e: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  printf 'e2e: %s\n' "$*" >&2
  exit 1
}

# The binaries depend on the pinned versions and the build recipe only, so those alone name the cache directory.
build_hash() {
  (
    cd "$E2E_DIR" || exit 1
    find versions.env build.sh modules -type f | LC_ALL=C sort | while read -r f; do
      printf '%s\n' "$f"
      cat "$f"
    done
  ) | sha256sum | cut -c1-16
}

E2E_CACHE=${VCPILOT_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vcpilot-e2e}
E2E_HOME=$E2E_CACHE/$(build_hash)
E2E_BIN=$E2E_HOME/bin
E2E_BUILD=$E2E_HOME/build
E2E_RUN=${VCPILOT_E2E_RUN:-$E2E_CACHE/run}
