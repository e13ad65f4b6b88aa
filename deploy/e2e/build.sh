#!/usr/bin/env bash
# Builds the e2e cluster (etcd, Kubernetes with kubelet and kube-proxy, Volcano, kwok, CoreDNS, Argo Workflows) from
# Go modules and ../shared/third_party, once, into a cache outside the repo.
#
#   deploy/e2e/build.sh            build what is missing; print the bin directory on the last line
#   deploy/e2e/build.sh --bin-dir  print the bin directory only (builds nothing)
#
# VCPILOT_E2E_CACHE moves the cache (default ~/.cache/vcpilot-e2e); VCPILOT_E2E_VOLCANO_BIN names a directory
# with vc-scheduler and vc-controller-manager built elsewhere, and then Volcano is not built here;
# VCPILOT_E2E_VOLCANO_SRC names a Volcano source checkout at VOLCANO_VERSION to build them from (into the cache).
# Otherwise Volcano is built from the module proxy with volcano.sh/apis taken from VCPILOT_E2E_VOLCANO_APIS
# (default ../shared/third_party/volcano-apis-v1.15.1 beside the checkout; the proxy refuses that module).
#
# The cache directory is named after a hash of versions.env and every build file, so a change to either builds
# afresh and an unchanged tree reuses the binaries. Needs only Go and the Go module proxy.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/e2e/lib.sh
source "$here/lib.sh"

if [[ ${1:-} == --bin-dir ]]; then
  echo "$E2E_BIN"
  exit 0
fi

export CGO_ENABLED=0
export GOFLAGS="-trimpath -buildvcs=false -mod=mod"
go_jobs=${VCPILOT_E2E_GO_JOBS:-2}

command -v go >/dev/null || die "Go is not installed: install Go ${GO_MIN} or newer, then run this again."

# The go.mod files pin the versions themselves; refuse to build when they disagree with versions.env.
check_pin() { # module-dir module version
  grep -Eq "^[[:space:]]*(require )?$2 $3( |$)" "$here/modules/$1/go.mod" ||
    die "deploy/e2e/modules/$1/go.mod does not require $2 $3 as versions.env says: make them agree."
}
check_pin kubernetes k8s.io/kubernetes "$KUBERNETES_VERSION"
check_pin volcano volcano.sh/volcano "$VOLCANO_VERSION"
check_pin volcano volcano.sh/apis "$VOLCANO_APIS_VERSION"
check_pin kwok sigs.k8s.io/kwok "$KWOK_VERSION"
check_pin etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
check_pin coredns github.com/coredns/coredns "$COREDNS_VERSION"

mkdir -p "$E2E_BIN" "$E2E_BUILD/logs"
# One build at a time per cache (.ci/run starts one in the background while make test runs): a second build.sh waits
# here, then finds the binaries built.
exec 9>"$E2E_BUILD/.lock"
flock -n 9 || {
  log "waiting for another build.sh to finish"
  flock 9
}
failed=()

# build NAME MODULE-DIR LDFLAGS PACKAGE... — builds into a scratch copy of the module (so the repo is never
# written to), then moves the binaries into bin/ only when all of them linked.
build() {
  local name=$1 module=$2 ldflags=$3
  shift 3
  local want=() pkg
  for pkg in "$@"; do want+=("$E2E_BIN/$(binary_name "$pkg")"); done
  if all_exist "${want[@]}"; then
    log "$name: cached"
    return 0
  fi
  local src="$E2E_BUILD/src/$module" out="$E2E_BUILD/out/$module" logf="$E2E_BUILD/logs/$module.log"
  rm -rf "$src" "$out"
  mkdir -p "$src" "$out"
  cp "$here/modules/$module"/* "$src/"
  if [[ -n ${VOLCANO_APIS_DIR:-} ]]; then
    (cd "$src" && go mod edit -replace "volcano.sh/apis=$VOLCANO_APIS_DIR")
  fi
  log "$name: building (log: $logf)"
  local start=$SECONDS
  if (cd "$src" && go build -p "$go_jobs" -ldflags "-s -w $ldflags" -o "$out/" "$@") >"$logf" 2>&1; then
    for pkg in "$@"; do
      # `go build -o dir/ .` names the binary after the module path, whose last element is the module's directory.
      local built=${pkg##*/}
      [[ $pkg == . ]] && built=$module
      mv "$out/$built" "$E2E_BIN/$(binary_name "$pkg")"
    done
    log "$name: built in $((SECONDS - start)) s"
  else
    log "$name: FAILED after $((SECONDS - start)) s; last lines of $logf:"
    tail -n 5 "$logf" | sed 's/^/    /' >&2
    failed+=("$name")
  fi
}

# Upstream's binaries are named after their cmd directory; Volcano's two would both be "scheduler"-ish, so they
# get the names of Volcano's images.
binary_name() {
  case $1 in
    volcano.sh/volcano/cmd/scheduler) echo vc-scheduler ;;
    volcano.sh/volcano/cmd/controller-manager) echo vc-controller-manager ;;
    .) echo etcd ;;
    *) basename "$1" ;;
  esac
}

all_exist() {
  local f
  for f in "$@"; do [[ -x $f ]] || return 1; done
}

total_start=$SECONDS
log "cache: $E2E_HOME"

# Without the version variables the API server's /version is empty, and Volcano refuses to start.
k8s_minor=${KUBERNETES_VERSION#v1.}
k8s_minor=${k8s_minor%%.*}
k8s_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
  k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build etcd etcd "" .
build kubernetes kubernetes "$k8s_ldflags" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
build coredns coredns "" github.com/coredns/coredns
build kwok kwok "" \
  sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl
volcano_ldflags="-X volcano.sh/volcano/pkg/version.Version=$VOLCANO_VERSION $k8s_ldflags"
if [[ -n ${VCPILOT_E2E_VOLCANO_SRC:-} ]] && ! all_exist "$E2E_BIN"/vc-{scheduler,controller-manager}; then
  # A Volcano source tree (git clone -b $VOLCANO_VERSION): its go.mod finds volcano.sh/apis in its staging copy.
  [[ -f $VCPILOT_E2E_VOLCANO_SRC/go.mod ]] && grep -q '^module volcano.sh/volcano$' "$VCPILOT_E2E_VOLCANO_SRC/go.mod" ||
    die "VCPILOT_E2E_VOLCANO_SRC=$VCPILOT_E2E_VOLCANO_SRC is not a Volcano source tree (no go.mod of volcano.sh/volcano)."
  start=$SECONDS
  for cmd in scheduler controller-manager; do
    (cd "$VCPILOT_E2E_VOLCANO_SRC" && go build -p "$go_jobs" -ldflags "-s -w $volcano_ldflags" \
      -o "$E2E_BIN/vc-$cmd" "./cmd/$cmd") || die "volcano: building cmd/$cmd in $VCPILOT_E2E_VOLCANO_SRC failed."
  done
  log "volcano: built from $VCPILOT_E2E_VOLCANO_SRC in $((SECONDS - start)) s"
fi
if all_exist "$E2E_BIN"/vc-{scheduler,controller-manager}; then
  log "volcano: cached"
elif [[ -n ${VCPILOT_E2E_VOLCANO_BIN:-} ]]; then
  all_exist "$VCPILOT_E2E_VOLCANO_BIN"/vc-{scheduler,controller-manager} ||
    die "VCPILOT_E2E_VOLCANO_BIN=$VCPILOT_E2E_VOLCANO_BIN has no vc-scheduler and vc-controller-manager."
  log "volcano: using the binaries in $VCPILOT_E2E_VOLCANO_BIN"
else
  apis=${VCPILOT_E2E_VOLCANO_APIS:-$here/../../../shared/third_party/volcano-apis-$VOLCANO_APIS_VERSION}
  [[ -f $apis/go.mod ]] && grep -q '^module volcano.sh/apis$' "$apis/go.mod" ||
    die "volcano: no volcano.sh/apis module at $apis (the Go module proxy refuses it): put ../shared beside the" \
      "checkout, or set VCPILOT_E2E_VOLCANO_APIS, VCPILOT_E2E_VOLCANO_SRC or VCPILOT_E2E_VOLCANO_BIN (docs/e2e.md)."
  # The build may write (go.sum, vendor metadata): it reads a copy in the cache, never ../shared itself.
  rm -rf "$E2E_BUILD/volcano-apis"
  mkdir -p "$E2E_BUILD"
  cp -r "$apis" "$E2E_BUILD/volcano-apis"
  chmod -R u+w "$E2E_BUILD/volcano-apis"
  VOLCANO_APIS_DIR=$E2E_BUILD/volcano-apis build volcano volcano "$volcano_ldflags" \
    volcano.sh/volcano/cmd/scheduler volcano.sh/volcano/cmd/controller-manager
fi

# Argo Workflows from its source at ARGO_VERSION (the module proxy serves only older releases): a copy of
# ../shared/third_party/argo-workflows-<version> (or VCPILOT_E2E_ARGO_SRC), with a placeholder page where the UI's
# build would be — the UI cannot be built here (its argo-ui dependency comes from a git URL), and the server
# embeds ui/dist/app.
argo_bins=("$E2E_BIN"/{workflow-controller,argoexec,argo})
if all_exist "${argo_bins[@]}"; then
  log "argo: cached"
else
  argo_src=${VCPILOT_E2E_ARGO_SRC:-$here/../../../shared/third_party/argo-workflows-$ARGO_VERSION}
  [[ -f $argo_src/go.mod ]] && grep -q '^module github.com/argoproj/argo-workflows/v4$' "$argo_src/go.mod" ||
    die "argo: no Argo Workflows source at $argo_src: put ../shared beside the checkout or set VCPILOT_E2E_ARGO_SRC."
  src=$E2E_BUILD/src/argo
  logf=$E2E_BUILD/logs/argo.log
  rm -rf "$src"
  mkdir -p "$(dirname "$src")"
  cp -r "$argo_src" "$src"
  chmod -R u+w "$src"
  # Git symlinks arrive in shared/ as small files holding the target's path (workflow/executor/osspecific/
  # signal_linux.go -> signal_darwin.go): make them links again, or Go reads a path as source.
  find "$src" -type f -size -256c -print0 | while IFS= read -r -d '' f; do
    target=$(tr -d '\0' <"$f")
    if [[ $(wc -l <"$f") -eq 0 && $target =~ ^[A-Za-z0-9_./-]+$ && -e $(dirname "$f")/$target ]]; then
      ln -sf "$target" "$f"
    fi
  done
  mkdir -p "$src/ui/dist/app"
  printf '%s\n' '<!doctype html><title>Argo Workflows</title><p>The UI is not built in the vcpilot e2e cluster;' \
    'use the argo CLI or the REST API.</p>' >"$src/ui/dist/app/index.html"
  argo_ldflags="-X github.com/argoproj/argo-workflows/v4.version=$ARGO_VERSION"
  argo_ldflags+=" -X github.com/argoproj/argo-workflows/v4.gitTag=$ARGO_VERSION"
  argo_ldflags+=" -X github.com/argoproj/argo-workflows/v4.gitTreeState=clean"
  argo_ldflags+=" -X github.com/argoproj/argo-workflows/v4.buildDate=1970-01-01T00:00:00Z"
  log "argo: building (log: $logf)"
  start=$SECONDS
  mkdir -p "$E2E_BUILD/out/argo"
  if (cd "$src" && go build -p "$go_jobs" -ldflags "-s -w $argo_ldflags" -o "$E2E_BUILD/out/argo/" \
    ./cmd/workflow-controller ./cmd/argoexec ./cmd/argo) >"$logf" 2>&1; then
    mv "$E2E_BUILD"/out/argo/* "$E2E_BIN/"
    log "argo: built in $((SECONDS - start)) s"
  else
    log "argo: FAILED after $((SECONDS - start)) s; last lines of $logf:"
    tail -n 5 "$logf" | sed 's/^/    /' >&2
    failed+=(argo)
  fi
fi

log "done in $((SECONDS - total_start)) s"
if ((${#failed[@]})); then
  die "could not build: ${failed[*]} (see $E2E_BUILD/logs/); the rest is in $E2E_BIN."
fi
# Builds of other recipes (another hash) are about 1 GB each and never used again: keep only this one.
for old in "$E2E_CACHE"/*/; do
  old=${old%/}
  if [[ $(basename "$old") =~ ^[0-9a-f]{16}$ && $old != "$E2E_HOME" ]]; then
    log "removing the build of another recipe: $old"
    rm -rf "$old"
  fi
done
echo "$E2E_BIN"
