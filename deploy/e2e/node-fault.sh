#!/usr/bin/env bash
# Faults of a real node of the e2e cluster (deploy/e2e/nodes.sh), for tests and for people trying the agent.
#
#   deploy/e2e/node-fault.sh kill NODE    the node dies as a machine losing power does: its kubelet, its containerd
#                                         and every container on it are SIGKILLed (nothing gets a SIGTERM); the
#                                         API server sees it go NotReady, and its pods are evicted.
#   deploy/e2e/node-fault.sh revive NODE  the machine comes back: a fresh containerd and kubelet on the same root
#                                         directory, address and name; the node turns Ready and advertises its
#                                         GPUs again (the planner scales a later attempt back up onto it).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/e2e/lib.sh
source "$here/lib.sh"

[[ ${1:-} =~ ^(kill|revive)$ && $# -eq 2 ]] || die "usage: deploy/e2e/node-fault.sh kill|revive NODE"
what=$1 node=$2
[[ $node =~ ^real-node-([0-9]+)$ ]] || die "$node is not a real node of the e2e cluster (real-node-0, real-node-1, ...)."
index=${BASH_REMATCH[1]}
pids=$E2E_RUN/pids

if [[ $what == kill ]]; then
  [[ -f $pids/kubelet-$node.pid ]] || die "$node has no kubelet running (not started, or already killed)."
  for process in kubelet containerd; do
    f=$pids/$process-$node.pid
    [[ -f $f ]] && kill -KILL "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
  kill_node_processes "$node"
  log "killed $node: its kubelet, containerd and containers"
  exit 0
fi

[[ ! -f $pids/kubelet-$node.pid ]] || die "$node is running; kill it first."
# A containerd that an interrupted revive left behind goes first (its socket would be in use).
[[ ! -f $pids/containerd-$node.pid ]] || { kill -KILL "$(cat "$pids/containerd-$node.pid")" 2>/dev/null || true; }
rm -f "$pids/containerd-$node.pid"
[[ -d $E2E_RUN/nodes/$node ]] || die "$node was never started in this cluster (deploy/e2e/up.sh starts the real nodes)."
# What nodes.sh uses from up.sh.
run=$E2E_RUN pki=$E2E_RUN/pki bin=$E2E_BIN kubeconfig=$E2E_RUN/kubeconfig api_port=$E2E_API_PORT
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }
nodes=$(kubectl get nodes -l type=kwok --no-headers 2>/dev/null | wc -l) # with fake nodes beside, the taint again
# Its images are still in the node's store: import nothing (the code may have moved on since), same sandbox.
export VCPILOT_E2E_IMAGES=" "
VCPILOT_E2E_SANDBOX_IMAGE=$("$here/image.sh" --print | awk 'NR == 1 {print $2}')
export VCPILOT_E2E_SANDBOX_IMAGE
# shellcheck source=deploy/e2e/nodes.sh
source "$here/nodes.sh"
node_tools
start_runtime "$index"
start_kubelet "$index"
node_ready() {
  [[ $(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
}
wait_for "$node Ready" 120 node_ready
advertise_gpus "$index"
log "revived $node"
