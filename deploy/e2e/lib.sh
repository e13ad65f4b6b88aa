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
E2E_API_PORT=${VCPILOT_E2E_PORT:-16443}
E2E_ARGO_PORT=$((E2E_API_PORT + 50)) # the Argo Server (https, a self-signed certificate)
E2E_MLFLOW_IP=10.96.0.50              # the ClusterIP install.py gives deploy/'s MLflow Service, reached from here

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

# print_env — the shell lines that point kubectl, argo and vcpilot at the cluster (`make cluster` ends with them):
# the binaries build.sh made, the admin kubeconfig, the Argo Server, and the namespace deploy/ installs into.
print_env() {
  local namespace
  namespace=$(awk '$1 == "namespace:" {print $2; exit}' "$E2E_DIR/../kustomization.yaml")
  echo "export KUBECONFIG=$E2E_RUN/kubeconfig"
  echo "export PATH=$E2E_BIN:\$PATH"
  # The server runs in server auth mode (up.sh): the CLI must send no token, which an empty ARGO_TOKEN says (unset,
  # it looks for one in the kubeconfig, which holds a client certificate instead, and gives up).
  echo "export ARGO_SERVER=$E2E_CP_IP:$E2E_ARGO_PORT ARGO_SECURE=true ARGO_INSECURE_SKIP_VERIFY=true ARGO_TOKEN="
  echo "export VCPILOT_NAMESPACE=$namespace"
  echo "export MLFLOW_TRACKING_URI=http://$E2E_MLFLOW_IP:5000"
}

# ---- processes -------------------------------------------------------------------------------------------------
# start NAME ARGS... — runs in its own session (a Ctrl-C in the caller's terminal reaches down.sh, not them).
# NAME.exe beside NAME.pid names the program the pid runs (`env VAR=… prog` runs prog; `argo-server` runs argo), so
# down.sh stops exactly that process and never one that reused the pid.
start() {
  local name=$1 program arg
  shift
  program=$1
  if [[ $program == env ]]; then
    for arg in "${@:2}"; do [[ $arg == *=* ]] || { program=$arg; break; }; done
  fi
  setsid nsenter --net="/run/netns/$E2E_NETNS" "$@" >"$E2E_RUN/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$E2E_RUN/pids/$name.pid"
  basename "$program" >"$E2E_RUN/pids/$name.exe"
}

alive() { kill -0 "$(cat "$E2E_RUN/pids/$1.pid")" 2>/dev/null; }

# all_alive — fails, showing the end of its log, as soon as a started process has exited (a port in use, a bad
# flag), so that a start never waits out a timeout for something that is already dead.
all_alive() {
  local f name
  for f in "$E2E_RUN"/pids/*.pid; do
    name=$(basename "$f" .pid)
    if ! alive "$name"; then
      log "$name exited; the end of $E2E_RUN/logs/$name.log:"
      tail -n 5 "$E2E_RUN/logs/$name.log" | sed 's/^/    /' >&2
      return 1
    fi
  done
}

# wait_for WHAT SECONDS COMMAND... — polls until COMMAND succeeds.
wait_for() {
  local what=$1 limit=$2 deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    all_alive || return 1
    if ((SECONDS >= deadline)); then
      log "gave up after ${limit}s waiting for $what"
      return 1
    fi
    sleep 0.5
  done
  log "$what: ok ($((SECONDS - ${start_time:-0})) s)"
}
