#!/usr/bin/env bash
# Starts the e2e cluster in a network namespace of its own (lib.sh): etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, Volcano's scheduler and controller-manager, kwok playing the kubelets of fake GPU nodes, and real
# nodes (nodes.sh: kubelets on containerd, CNI, CoreDNS, kube-proxy) running the step image; prints the kubeconfig.
#
#   deploy/e2e/up.sh                     (after deploy/e2e/build.sh); stop it with deploy/e2e/down.sh
#   deploy/e2e/up.sh --print-kubeconfig  print where the kubeconfig is (starts nothing)
#   deploy/e2e/up.sh --print-env         print the export lines for kubectl and argo (starts nothing)
#
# Every start is a fresh cluster (etcd's data is wiped); the PKI and the kubeconfig are kept across starts.
# Environment: VCPILOT_E2E_RUN (state, default ~/.cache/vcpilot-e2e/run), VCPILOT_E2E_CACHE (binaries),
# VCPILOT_E2E_PORT (API server port, default 16443; the others follow it), VCPILOT_E2E_NODES (2),
# VCPILOT_E2E_GPUS_PER_NODE (4), VCPILOT_E2E_VOLCANO_BIN (Volcano's binaries built elsewhere),
# VCPILOT_E2E_VOLCANO=off (start without Volcano, for when it could not be built; the default queue is made here),
# VCPILOT_E2E_REAL_NODES (2; 0 starts none), VCPILOT_E2E_REAL_GPUS (nvidia.com/gpu each real node advertises, 2),
# VCPILOT_E2E_ARGO (on with real nodes: Argo's CRDs, workflow-controller and the Argo Server on port + 50),
# VCPILOT_E2E_ARGO_SRC (Argo's source, for its CRDs; default ../shared/third_party/argo-workflows-<version>).
# Needs root (network namespaces, mounts, cgroups) for real nodes.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=deploy/e2e/lib.sh
source "$here/lib.sh"

if [[ ${1:-} == --print-kubeconfig ]]; then
  echo "$E2E_RUN/kubeconfig"
  exit 0
fi
if [[ ${1:-} == --print-env ]]; then
  print_env
  exit 0
fi

nodes=${VCPILOT_E2E_NODES:-2}
gpus=${VCPILOT_E2E_GPUS_PER_NODE:-4}
volcano=${VCPILOT_E2E_VOLCANO:-on}
api_port=$E2E_API_PORT
etcd_port=$((api_port + 1))
etcd_peer_port=$((api_port + 2))
kcm_port=$((api_port + 3))
sched_port=$((api_port + 4))
kwok_port=$((api_port + 5))
vc_sched_metrics=$((api_port + 6))
vc_sched_healthz=$((api_port + 7))
vc_cm_metrics=$((api_port + 8))
vc_cm_healthz=$((api_port + 9))
shared=${VCPILOT_E2E_SHARED:-$(cd "$here/../../.." && pwd)/shared}/schemas/volcano-$VOLCANO_VERSION

run=$E2E_RUN
pki=$run/pki
kubeconfig=$run/kubeconfig
bin=$E2E_BIN
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

vc_bin=${VCPILOT_E2E_VOLCANO_BIN:-$bin}
# Argo runs where real nodes do (its pods need a kubelet); its CRDs come from the source build.sh compiled.
argo=${VCPILOT_E2E_ARGO:-$( ((${VCPILOT_E2E_REAL_NODES:-2} > 0)) && echo on || echo off)}
argo_port=$E2E_ARGO_PORT
argo_src=${VCPILOT_E2E_ARGO_SRC:-$(cd "$here/../../.." && pwd)/shared/third_party/argo-workflows-$ARGO_VERSION}
need=("$bin"/{etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kubectl,kwok})
[[ $volcano == off ]] || need+=("$vc_bin"/{vc-scheduler,vc-controller-manager})
[[ $argo == off ]] || need+=("$bin"/{workflow-controller,argo})
for b in "${need[@]}"; do
  [[ -x $b ]] || die "$b is missing: run deploy/e2e/build.sh first (or VCPILOT_E2E_VOLCANO=off to start without Volcano)."
done
command -v openssl >/dev/null || die "openssl is needed to make the cluster's certificates: apt-get install -y openssl."

start_time=$SECONDS
if compgen -G "$run/pids/*.pid" >/dev/null; then
  log "stopping what a previous start left running"
  "$here/down.sh"
fi
if ip netns list | grep -qw "$E2E_NETNS"; then
  log "stopping what a previous start left running"
  "$here/down.sh"
fi
mkdir -p "$pki" "$run/logs" "$run/pids" "$run/manifests"
rm -rf "$run/etcd"

# Whatever stops the start half-way (a failed step, a component that exits) stops what was started.
on_exit() {
  local rc=$?
  if ((rc)); then
    log "start failed; the logs are in $run/logs/"
    "$here/down.sh" || true
  fi
  exit "$rc"
}
trap on_exit EXIT

# ---- the network namespace, joined to the host by a veth pair ---------------------------------------------------
ip netns list | awk '$1 ~ /^cni-/ {print $1}' >"$run/netns-before"
ip netns add "$E2E_NETNS"
ip link add "$E2E_VETH_HOST" type veth peer name "$E2E_VETH_NS"
ip link set "$E2E_VETH_NS" netns "$E2E_NETNS"
ip addr add "$E2E_HOST_IP/24" dev "$E2E_VETH_HOST"
ip link set "$E2E_VETH_HOST" up
in_netns ip link set lo up
in_netns ip addr add "$E2E_CP_IP/24" dev "$E2E_VETH_NS"
in_netns ip link set "$E2E_VETH_NS" up
# The host reaches pods and Services through the namespace (tests read the in-cluster MLflow this way).
ip route add "$E2E_POD_CIDR" via "$E2E_CP_IP"
ip route add "$E2E_SERVICE_CIDR" via "$E2E_CP_IP"
in_netns sysctl -qw net.ipv4.ip_forward=1

# ---- certificates: a CA, the API server's serving cert, an admin client cert, the service-account key pair -------
make_pki() {
  local ext
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=vcpilot-e2e-ca \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  sign() { # name subject extensions
    openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$pki/$1.key" -out "$pki/$1.csr" 2>/dev/null
    ext=$(mktemp)
    printf '%s\n' "$3" >"$ext"
    openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 3650 \
      -extfile "$ext" -out "$pki/$1.crt" 2>/dev/null
    rm -f "$ext" "$pki/$1.csr"
  }
  sign apiserver /CN=kube-apiserver "$(printf '%s\n' \
    "subjectAltName=IP:127.0.0.1,IP:$E2E_CP_IP,"'IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local' \
    'extendedKeyUsage=serverAuth' 'keyUsage=critical,digitalSignature,keyEncipherment')"
  # system:masters: the admin may do anything, impersonation included (RBAC is tested by impersonating others).
  sign admin "/O=system:masters/CN=vcpilot-e2e-admin" "$(printf '%s\n' \
    'extendedKeyUsage=clientAuth' 'keyUsage=critical,digitalSignature,keyEncipherment')"
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
}
# (A PKI from before the network namespace has no certificate for its address: it is made anew.)
openssl x509 -in "$pki/apiserver.crt" -noout -text 2>/dev/null | grep -q "IP Address:$E2E_CP_IP" || rm -f "$pki/sa.pub"
[[ -s $pki/sa.pub && -s $pki/admin.crt ]] || {
  log "making certificates in $pki"
  make_pki
}

cat >"$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: vcpilot-e2e
  cluster:
    server: https://$E2E_CP_IP:$api_port
    certificate-authority: $pki/ca.crt
users:
- name: vcpilot-e2e-admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: vcpilot-e2e
  context: {cluster: vcpilot-e2e, user: vcpilot-e2e-admin}
current-context: vcpilot-e2e
EOF

api_get() {
  curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "https://$E2E_CP_IP:$api_port$1"
}

log "starting etcd on 127.0.0.1:$etcd_port (state: $run)"
start etcd "$bin/etcd" --name e2e --data-dir "$run/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-cluster "e2e=http://127.0.0.1:$etcd_peer_port" \
  --unsafe-no-fsync --log-level warn
wait_for etcd 30 in_netns curl -fsS "http://127.0.0.1:$etcd_port/health"

log "starting kube-apiserver on https://$E2E_CP_IP:$api_port"
start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 0.0.0.0 --advertise-address "$E2E_CP_IP" --secure-port "$api_port" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-cluster-ip-range 10.96.0.0/16 \
  --authorization-mode Node,RBAC \
  --kubelet-client-certificate "$pki/admin.crt" --kubelet-client-key "$pki/admin.key" \
  --kubelet-preferred-address-types InternalIP \
  --allow-privileged=true \
  --default-not-ready-toleration-seconds 5 --default-unreachable-toleration-seconds 5 \
  --profiling=false
wait_for "kube-apiserver /readyz" 90 api_get /readyz
version=$(api_get /version | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')
[[ -n $version ]] || die "kube-apiserver reports no version: it was built without the version ldflags."

# ---- Volcano's CRDs: those in shared/ first, the rest from the Volcano module that build.sh downloaded ---------
# (Asked from outside any module, so that no go.sum in the repo is touched.)
volcano_src=$(cd "$E2E_HOME" && GOFLAGS="" go mod download -json "volcano.sh/volcano@$VOLCANO_VERSION" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -d $volcano_src/config/crd ]] || die "Volcano $VOLCANO_VERSION's CRDs are not in the Go module cache: run deploy/e2e/build.sh."
crds=()
for f in "$volcano_src"/config/crd/volcano/bases/*.yaml "$volcano_src"/config/crd/jobflow/bases/*.yaml; do
  if [[ -f $shared/$(basename "$f") ]]; then crds+=("$shared/$(basename "$f")"); else crds+=("$f"); fi
done
log "applying ${#crds[@]} Volcano CRDs"
# Server-side: the Job CRD is too large for the last-applied annotation of a client-side apply.
for f in "${crds[@]}"; do kubectl apply --server-side --force-conflicts -f "$f" >/dev/null; done
kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null

# ---- controllers -------------------------------------------------------------------------------------------------
log "starting kube-controller-manager, kube-scheduler and kwok"
start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$kcm_port" --leader-elect=false \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --controllers '*,-nodeipam' --node-monitor-grace-period 20s --profiling=false
start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$sched_port" --leader-elect=false --profiling=false
start kwok "$bin/kwok" --kubeconfig "$kubeconfig" --config "$here/config/kwok.yaml" \
  --server-address "127.0.0.1:$kwok_port" --cidr 10.244.0.1/16 --node-ip 10.0.0.1

if [[ $volcano != off ]]; then
  log "starting the Volcano controller-manager and scheduler"
  start vc-controller-manager "$vc_bin/vc-controller-manager" --kubeconfig "$kubeconfig" --leader-elect=false \
    --listen-address "127.0.0.1:$vc_cm_metrics" --healthz-address "127.0.0.1:$vc_cm_healthz" --enable-healthz
  start vc-scheduler "$vc_bin/vc-scheduler" --kubeconfig "$kubeconfig" --leader-elect=false \
    --scheduler-conf "$here/../volcano/scheduler/volcano-scheduler.conf" --schedule-period 200ms \
    --listen-address "127.0.0.1:$vc_sched_metrics" --healthz-address "127.0.0.1:$vc_sched_healthz" \
    --enable-healthz --cache-dumper=false
fi

# ---- fake GPU nodes ----------------------------------------------------------------------------------------------
nodes_file=$run/manifests/nodes.yaml
: >"$nodes_file"
for ((i = 0; i < nodes; i++)); do
  cat >>"$nodes_file" <<EOF
apiVersion: v1
kind: Node
metadata:
  name: gpu-node-$i
  labels:
    type: kwok
    kubernetes.io/hostname: gpu-node-$i
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    nvidia.com/gpu.present: "true"
    nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
    nvidia.com/gpu.count: "$gpus"
  annotations:
    kwok.x-k8s.io/node: fake
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110", nvidia.com/gpu: "$gpus"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110", nvidia.com/gpu: "$gpus"}
---
EOF
done
[[ ! -s $nodes_file ]] || kubectl apply -f "$nodes_file" >/dev/null

nodes_ready() {
  [[ $(kubectl get nodes -l type=kwok \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True) -eq $nodes ]]
}
wait_for "$nodes fake GPU nodes Ready" 60 nodes_ready
wait_for "the default service account" 60 kubectl get serviceaccount default -n default
if [[ $volcano != off ]]; then
  wait_for "Volcano's default queue" 90 kubectl get queue default
else
  log "VCPILOT_E2E_VOLCANO=off: no Volcano scheduler or controller; creating the default queue by hand"
  kubectl apply -f - >/dev/null <<EOF
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
spec: {weight: 1, reclaimable: true}
EOF
fi

# ---- real nodes (nodes.sh) ------------------------------------------------------------------------------------------
# shellcheck source=deploy/e2e/nodes.sh
source "$here/nodes.sh"
start_real_nodes

# ---- Argo Workflows (with real nodes): its CRDs, the controller's ConfigMap, the controller and the server ---------
if [[ $argo == on ]]; then
  argo_crds=$argo_src/manifests/base/crds/full
  [[ -d $argo_crds ]] || die "no Argo CRDs at $argo_crds: put ../shared beside the checkout or set VCPILOT_E2E_ARGO_SRC."
  log "applying Argo's CRDs and starting the workflow-controller and the Argo Server on https://$E2E_CP_IP:$argo_port"
  for f in "$argo_crds"/argoproj.io_*.yaml; do kubectl apply --server-side --force-conflicts -f "$f" >/dev/null; done
  kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null
  kubectl create namespace argo >/dev/null
  # The controller waits, silently, until this ConfigMap exists; an empty one means Argo's defaults.
  kubectl create configmap workflow-controller-configmap -n argo >/dev/null
  # Leader election needs a Lease in a namespace of its own choosing; one controller needs none. The executor
  # image is the one image.sh built (no registry to pull from). A workflow is looked at again every
  # DEFAULT_REQUEUE_TIME (10 s by default: about 10 s per level of a DAG here); Argo's own e2e suite uses 1 s.
  start workflow-controller env LEADER_ELECTION_DISABLE=true DEFAULT_REQUEUE_TIME=1s \
    "$bin/workflow-controller" --kubeconfig "$kubeconfig" \
    --namespace argo --executor-image "vcpilot.local/argoexec:$ARGO_VERSION" --executor-image-pull-policy Never \
    --loglevel warn
  # Server auth mode: the server acts with its own (admin) credentials, and only this machine reaches the address
  # (the namespace's veth); a real installation uses client or SSO mode (docs/deploy.md).
  start argo-server "$bin/argo" server --kubeconfig "$kubeconfig" --namespace argo --auth-mode server \
    --port "$argo_port" --loglevel warn
  argo_ready() { curl -fsSk "https://$E2E_CP_IP:$argo_port/api/v1/version"; }
  wait_for "the Argo Server" 60 argo_ready
fi

sleep 1 # a process that fails on its first API call (a bad flag, a missing CRD) has exited by now
all_alive
trap - EXIT
log "cluster up in $((SECONDS - start_time)) s: Kubernetes $version, $nodes fake nodes x $gpus nvidia.com/gpu," \
  "$real_nodes real nodes x $real_gpus"
echo "export KUBECONFIG=$kubeconfig"
