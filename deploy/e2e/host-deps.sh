#!/usr/bin/env bash
# Installs the Debian packages the real nodes and the image build need, when they are missing: containerd and runc
# (the runtime), the CNI plugins, iptables and conntrack (kube-proxy), debootstrap (the step image's base), a static
# busybox (the image Argo's upstream examples run), Chromium and its chromedriver (the review screenshots,
# tests/integration/test_review_screenshots.py).
#
#   deploy/e2e/host-deps.sh           install what is missing (as root, with apt-get)
#   deploy/e2e/host-deps.sh --check   only say what is missing; exit 1 if anything is
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/e2e/lib.sh
source "$here/lib.sh"

# command package
wanted=(
  "containerd containerd" "runc runc" "/usr/lib/cni/bridge containernetworking-plugins"
  "iptables iptables" "conntrack conntrack" "debootstrap debootstrap" "nsenter util-linux" "curl curl" "jq jq"
  "flock util-linux" "gcc gcc" "/usr/bin/busybox busybox-static"
  "/usr/bin/chromium chromium" "/usr/bin/chromedriver chromium-driver"
)
missing=()
for pair in "${wanted[@]}"; do
  read -r cmd pkg <<<"$pair"
  if [[ $cmd == /* ]]; then [[ -x $cmd ]] && continue; else command -v "$cmd" >/dev/null && continue; fi
  missing+=("$pkg")
done
((${#missing[@]})) || exit 0
if [[ ${1:-} == --check ]]; then
  log "missing packages: ${missing[*]} (deploy/e2e/host-deps.sh installs them)"
  exit 1
fi
((EUID == 0)) || die "the e2e cluster needs ${missing[*]}: run 'apt-get install -y ${missing[*]}' as root."
command -v apt-get >/dev/null || die "no apt-get here: install ${missing[*]} with this system's package manager."
log "installing ${missing[*]}"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null ||
  { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; } ||
  die "apt-get could not install ${missing[*]}."
