#!/usr/bin/env bash
# Faults of a real node of the e2e cluster (deploy/e2e/nodes.sh), for tests and for people trying the agent.
#
#   deploy/e2e/node-fault.sh kill NODE   the node dies as a machine losing power does: its kubelet, its containerd
#                                        and every container on it are SIGKILLed (nothing gets a SIGTERM); the
#                                        API server sees it go NotReady, and its pods are evicted. It stays dead
#                                        until deploy/e2e/down.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/e2e/lib.sh
source "$here/lib.sh"

[[ ${1:-} == kill && $# -eq 2 ]] || die "usage: deploy/e2e/node-fault.sh kill NODE"
node=$2
[[ $node =~ ^real-node-[0-9]+$ ]] || die "$node is not a real node of the e2e cluster (real-node-0, real-node-1, ...)."
pids=$E2E_RUN/pids
[[ -f $pids/kubelet-$node.pid ]] || die "$node has no kubelet running (not started, or already killed)."
for what in kubelet containerd; do
  f=$pids/$what-$node.pid
  [[ -f $f ]] && kill -KILL "$(cat "$f")" 2>/dev/null || true
  rm -f "$f"
done
kill_node_processes "$node"
log "killed $node: its kubelet, containerd and containers"
