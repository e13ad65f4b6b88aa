#!/usr/bin/env bash
# Stops every process that deploy/e2e/up.sh started (by the pid files it wrote), kubelets and controllers first, etcd
# last; then what the real nodes leave behind: their containers, mounts, cgroups, pod network namespaces, and the
# cluster's network namespace with its veth pair. Safe to run twice, and after a start that failed half-way.
#
#   deploy/e2e/down.sh            stop; keep the run directory (logs, PKI, kubeconfig)
#   deploy/e2e/down.sh --purge    stop and delete the run directory
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/e2e/lib.sh
source "$here/lib.sh"

run=$E2E_RUN
order=(vc-scheduler vc-controller-manager kwok kube-scheduler kube-controller-manager)

# ours PID NAME — true when PID still runs the program NAME was started with (NAME.exe, which lib.sh's start writes;
# else the binary of that name): a pid file can outlive its process and the number be reused by something else,
# which must not be killed. (Without NAME.exe, `argo-server`, which runs `argo`, was never stopped.)
ours() {
  local program=${2%%-real-node-*}
  [[ -f $run/pids/$2.exe ]] && program=$(cat "$run/pids/$2.exe")
  [[ -r /proc/$1/cmdline ]] && tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | head -n 1 | grep -q "/$program\$"
}

stop() { # name
  local f=$run/pids/$1.pid pid
  [[ -f $f ]] || return 0
  pid=$(cat "$f")
  if ours "$pid" "$1"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      ours "$pid" "$1" || break
      sleep 0.2
    done
    if ours "$pid" "$1"; then
      log "$1 ($pid) ignored SIGTERM for 10 s: killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    log "stopped $1 ($pid)"
  fi
  rm -f "$f" "$run/pids/$1.exe"
}

clean_node_leftovers() {
  local m ns dir
  # Mounts (container root filesystems, pod volumes, netns bind mounts) under the nodes' directories, deepest first.
  for dir in "$E2E_NODE_STATE" "$run/nodes" "$E2E_IMAGES_STORE"; do
    awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
      umount -l "$m" 2>/dev/null || true
    done
  done
  rm -rf "$E2E_NODE_STATE"
  # The pods' network namespaces that containerd made during this start (up.sh listed those that were there before).
  if [[ -f $run/netns-before ]]; then
    for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ {print $1}'); do
      grep -qxF "$ns" "$run/netns-before" || ip netns delete "$ns" 2>/dev/null || true
    done
    rm -f "$run/netns-before"
  fi
  # The nodes' cgroups, leaves first (a cgroup is removed with rmdir once it holds no process).
  for dir in /sys/fs/cgroup/*/vcpilot-e2e; do
    [[ -d $dir ]] && { find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || true; }
  done
  if ip netns list 2>/dev/null | grep -qw "$E2E_NETNS"; then
    ip netns delete "$E2E_NETNS"
    log "removed the network namespace $E2E_NETNS"
  fi
  ip link delete "$E2E_VETH_HOST" 2>/dev/null || true
}

# Real nodes first: their kubelets, then the pods' processes, then the runtimes.
for f in "$run"/pids/kubelet-*.pid; do [[ -e $f ]] && stop "$(basename "$f" .pid)"; done
kill_node_processes
for f in "$run"/pids/containerd-*.pid; do [[ -e $f ]] && stop "$(basename "$f" .pid)"; done
kill_node_processes # (shims that exited with their runtime leave nothing; a shim started during the stop is caught here)
for name in "${order[@]}" coredns kube-proxy kube-apiserver etcd; do stop "$name"; done
# Anything else up.sh may start in a later version has a pid file too.
for f in "$run"/pids/*.pid; do [[ -e $f ]] && stop "$(basename "$f" .pid)"; done
clean_node_leftovers

if [[ ${1:-} == --purge ]]; then
  rm -rf "$run"
  log "removed $run"
fi
