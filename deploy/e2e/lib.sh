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

# ---- the network: every process of the cluster runs in one network namespace of its own -----------------------
# Pods must reach the API server, cluster DNS and each other, and nodes need an address that is not loopback; the
# only addresses tests may use are loopback and those inside namespaces they made. So the control plane, the
# kubelets and their runtimes run in E2E_NETNS (entered with nsenter --net only: they share the host's mounts, which
# the kubelet and containerd must both see), pods get namespaces of their own on a bridge inside it, and a veth pair
# joins it to the host, whose side has E2E_HOST_IP.
E2E_NETNS=${VCPILOT_E2E_NETNS:-vcpilot-e2e}
E2E_NET_PREFIX=10.250.0
E2E_CP_IP=$E2E_NET_PREFIX.1     # the API server, CoreDNS (the pods' cluster DNS)
E2E_HOST_IP=$E2E_NET_PREFIX.254 # the host's end of the veth pair
E2E_POD_CIDR=10.245.0.0/16      # real pods (kwok's fake pods use 10.244.0.0/16)
E2E_POD_GATEWAY=10.245.0.1
E2E_SERVICE_CIDR=10.96.0.0/16
E2E_VETH_HOST=vcpe2e-host
E2E_VETH_NS=vcpe2e-ns
E2E_BRIDGE=vcpe2e-br0
# real node i (0-based): name real-node-i, address $E2E_NET_PREFIX.(11+i), pods 10.245.(1+i).0/24
real_node_ip() { echo "$E2E_NET_PREFIX.$((11 + $1))"; }
in_netns() { nsenter --net="/run/netns/$E2E_NETNS" "$@"; }
# Each real node's containerd keeps its images here across starts (a second start imports nothing).
E2E_IMAGES_STORE=$E2E_CACHE/containerd
E2E_NODE_STATE=/run/vcpilot-e2e

# kill_node_processes [NODE] — SIGKILL every process in a real node's cgroups (its containers and pause processes)
# and every shim of its containerd; all real nodes without an argument. What a machine losing power does to them.
kill_node_processes() {
  local node=${1:-} ctrl pid
  for ctrl in /sys/fs/cgroup/*/vcpilot-e2e/${node}; do
    [[ -d $ctrl ]] || continue
    find "$ctrl" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  done
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $E2E_NODE_STATE/${node}" || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
}
