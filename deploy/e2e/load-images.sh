#!/usr/bin/env bash
# Imports what deploy/e2e/image.sh built into the real nodes of the running cluster, without restarting it: after a
# code change, `deploy/e2e/image.sh && deploy/e2e/load-images.sh`, then name the new step image (its last line).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/e2e/lib.sh
source "$here/lib.sh"
run=$E2E_RUN
api_port=$E2E_API_PORT
nodes=0 # (read by nodes.sh only when it starts nodes)
# shellcheck source=deploy/e2e/nodes.sh
source "$here/nodes.sh"

found=0
for sock in "$E2E_NODE_STATE"/*/containerd.sock; do
  [[ -S $sock ]] || continue
  import_images "$(basename "$(dirname "$sock")")" "$sock"
  found=1
done
((found)) || die "no real node is running (no containerd socket under $E2E_NODE_STATE): start one with deploy/e2e/up.sh."
"$here/image.sh" --print | awk 'END {print $2}'
