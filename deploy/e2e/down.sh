#!/usr/bin/env bash
# Stops every process that deploy/e2e/up.sh started (by the pid files it wrote), controllers first, etcd last.
#
#   deploy/e2e/down.sh            stop; keep the run directory (logs, PKI, kubeconfig)
#   deploy/e2e/down.sh --purge    stop and delete the run directory
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/e2e/lib.sh
source "$here/lib.sh"

run=$E2E_RUN
order=(vc-scheduler vc-controller-manager kwok kube-scheduler kube-controller-manager kube-apiserver etcd)

# ours PID NAME — true when PID still runs the binary of that name (a pid file can outlive its process and the
# number be reused by something else, which must not be killed).
ours() {
  [[ -r /proc/$1/cmdline ]] && tr '\0' '\n' <"/proc/$1/cmdline" | head -n 1 | grep -q "/$2\$"
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
  rm -f "$f"
}

for name in "${order[@]}"; do stop "$name"; done
# Anything else up.sh may start in a later version has a pid file too.
for f in "$run"/pids/*.pid; do [[ -e $f ]] && stop "$(basename "$f" .pid)"; done

if [[ ${1:-} == --purge ]]; then
  rm -rf "$run"
  log "removed $run"
fi
