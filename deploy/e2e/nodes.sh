# Real nodes of the e2e cluster, sourced by up.sh once the control plane runs: CoreDNS and kube-proxy for the
# cluster, then for each node a containerd of its own (root, state, socket, CNI config) and a kubelet built from the
# same Kubernetes module, each with its own root directory, cgroup root and address in the cluster's network
# namespace. Every node advertises nvidia.com/gpu so that Volcano gangs real pods by GPU count while they compute on
# CPU; the nodes carry the label type=real and, when kwok's fake nodes run beside them, the taint
# vcpilot.io/real-node:NoSchedule, so that only pods that ask for them (tolerate and select type=real) land there and
# the fake nodes keep the contract suite to themselves. Without fake nodes (VCPILOT_E2E_NODES=0: `make cluster`, the
# Argo tests) they are untainted, as a real cluster's GPU nodes are to the workflow's pods.
# shellcheck shell=bash
# Uses from up.sh: start, wait_for, all_alive, kubectl, log, die, $run, $pki, $bin, $kubeconfig, $api_port.

real_nodes=${VCPILOT_E2E_REAL_NODES:-2}
device_plugin_socket=/var/lib/kubelet/device-plugins/kubelet.sock # kubelet's pluginapi.KubeletSocket, fixed
real_gpus=${VCPILOT_E2E_REAL_GPUS:-2}
REAL_TAINT=vcpilot.io/real-node
# docker-archives (directories or tars) to import into every node's containerd, and the sandbox image's name: by
# default what image.sh built ("ARCHIVE REFERENCE" lines, the pause image first).
if [[ -z ${VCPILOT_E2E_IMAGES:-} ]] && ((real_nodes > 0)); then
  built=$("$E2E_DIR/image.sh" --print)
  images=$(awk '{print $1}' <<<"$built")
  sandbox_image=${VCPILOT_E2E_SANDBOX_IMAGE:-$(awk 'NR == 1 {print $2}' <<<"$built")}
  for archive in $images; do
    [[ -e $archive ]] || die "$archive is missing: run deploy/e2e/image.sh first (or VCPILOT_E2E_REAL_NODES=0)."
  done
else
  images=${VCPILOT_E2E_IMAGES:-}
  sandbox_image=${VCPILOT_E2E_SANDBOX_IMAGE:-}
fi
coredns_port_base=$((api_port + 20))

node_cert() { # name: a client certificate in group system:nodes, which the Node authorizer admits
  local name=$1 ext
  [[ -s $pki/$name.crt ]] && return 0
  ext=$(mktemp)
  printf '%s\n' 'extendedKeyUsage=clientAuth' 'keyUsage=critical,digitalSignature,keyEncipherment' >"$ext"
  openssl req -newkey rsa:2048 -nodes -subj "/O=system:nodes/CN=system:node:$name" \
    -keyout "$pki/$name.key" -out "$pki/$name.csr" 2>/dev/null
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 3650 \
    -extfile "$ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$ext" "$pki/$name.csr"
}

client_kubeconfig() { # file name: a kubeconfig for the client certificate pki/<name>.crt
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: vcpilot-e2e
  cluster: {server: "https://$E2E_CP_IP:$api_port", certificate-authority: "$pki/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$pki/$2.crt", client-key: "$pki/$2.key"}
contexts:
- name: vcpilot-e2e
  context: {cluster: vcpilot-e2e, user: $2}
current-context: vcpilot-e2e
EOF
}

# ---- cluster DNS and Services -------------------------------------------------------------------------------------
start_cluster_network() {
  local dir=$run/net
  mkdir -p "$dir"
  # Pods reach a Service's cluster IP through kube-proxy's rules in this namespace; bridged traffic must cross them.
  in_netns sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null ||
    log "net.bridge.bridge-nf-call-iptables cannot be set: Service traffic between pods on one bridge relies on masquerade"
  cat >"$dir/Corefile" <<EOF
.:53 {
    bind $E2E_CP_IP
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $kubeconfig vcpilot-e2e
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
    health 127.0.0.1:$coredns_port_base
}
EOF
  log "starting CoreDNS on $E2E_CP_IP:53 and kube-proxy"
  start coredns "$bin/coredns" -conf "$dir/Corefile"
  cat >"$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$kubeconfig"}
mode: iptables
clusterCIDR: $E2E_POD_CIDR
hostnameOverride: real-node-0
bindAddress: $E2E_CP_IP
healthzBindAddress: 127.0.0.1:$((coredns_port_base + 1))
metricsBindAddress: 127.0.0.1:$((coredns_port_base + 2))
iptables: {masqueradeAll: true}
conntrack: {maxPerCore: 0}
EOF
  # One kube-proxy serves every node: they share this network namespace and so its iptables.
  start kube-proxy "$bin/kube-proxy" --config "$dir/kube-proxy.yaml"
  wait_for "CoreDNS" 30 in_netns curl -fsS "http://127.0.0.1:$coredns_port_base/health"
}

# ---- one node -----------------------------------------------------------------------------------------------------
start_runtime() { # index: the node's address, cgroups, CNI config, containerd, and its images
  local i=$1 name=real-node-$1 ip dir state sock cgroup ctrl
  ip=$(real_node_ip "$i")
  dir=$run/nodes/$name
  state=$E2E_NODE_STATE/$name
  sock=$state/containerd.sock
  cgroup=/vcpilot-e2e/$name
  rm -rf "$dir/ipam"
  mkdir -p "$dir"/{cni,ipam,kubelet,pod-logs} "$state" "$E2E_IMAGES_STORE/$name"
  in_netns ip addr replace "$ip/24" dev "$E2E_VETH_NS" # (replace: a revived node has it already)
  # The node's cgroup root in every v1 hierarchy: the kubelet puts its pods under it, down.sh kills what is in it.
  for ctrl in /sys/fs/cgroup/*/; do
    [[ $ctrl == */unified/ ]] || mkdir -p "$ctrl${cgroup#/}"
  done

  cat >"$dir/cni/10-vcpilot.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "vcpilot-e2e",
  "plugins": [
    {"type": "bridge", "bridge": "$E2E_BRIDGE", "isGateway": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$dir/ipam",
              "ranges": [[{"subnet": "$E2E_POD_CIDR", "gateway": "$E2E_POD_GATEWAY",
                           "rangeStart": "10.245.$((1 + i)).2", "rangeEnd": "10.245.$((1 + i)).254"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  # Images live under the cache (root), so that a second start imports nothing; state is per start.
  cat >"$dir/containerd.toml" <<EOF
version = 2
root = "$E2E_IMAGES_STORE/$name"
state = "$state/state"
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$sandbox_image"
  # The sandbox lacks CAP_SYS_RESOURCE: runc cannot give the pause container a negative oom_score_adj.
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$dir/cni"
EOF
  start "containerd-$name" "$CONTAINERD" --config "$dir/containerd.toml"
  wait_for "containerd of $name" 30 ctr --address "$sock" version
  # What a killed earlier start left in the kept image store is removed before the kubelet sees it.
  local c
  for c in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr --address "$sock" -n k8s.io tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
  done
  for c in $(ctr --address "$sock" -n k8s.io containers ls -q 2>/dev/null); do
    ctr --address "$sock" -n k8s.io tasks delete -f "$c" >/dev/null 2>&1 || true
    ctr --address "$sock" -n k8s.io containers rm "$c" >/dev/null 2>&1 || true
  done
  # One node imports at a time: each import holds the layers' blobs beside the snapshots it unpacks (13 GB each
  # for a new step image), and two side by side filled the disk of a machine shared with other work (no space left
  # on device in ctr's ingest). The runtimes still start side by side.
  {
    flock 9
    import_images "$name" "$sock"
  } 9>"$E2E_IMAGES_STORE/.import.lock"
}

start_kubelet() { # index
  local i=$1 name=real-node-$1 ip dir sock cgroup
  ip=$(real_node_ip "$i")
  dir=$run/nodes/$name
  sock=$E2E_NODE_STATE/$name/containerd.sock
  cgroup=/vcpilot-e2e/$name
  node_cert "$name"
  client_kubeconfig "$dir/kubeconfig" "$name"
  local taints="[]"
  ((nodes == 0)) || taints="[{key: $REAL_TAINT, effect: NoSchedule}]"
  cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine mounts the cgroup v1 controllers (cgroup2 has none), which kubelet 1.35 refuses unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: $cgroup
containerRuntimeEndpoint: unix://$sock
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $((coredns_port_base + 10 + i))
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$pki/ca.crt"}
authorization: {mode: AlwaysAllow}
clusterDNS: [$E2E_CP_IP]
clusterDomain: cluster.local
resolvConf: ""
# Each kubelet garbage-collects the pod log directories of pods it does not know: in the shared default
# /var/log/pods, each would delete the other's logs while their pods run.
podLogsDir: $dir/pod-logs
registerWithTaints: $taints
# Disk is shared with the rest of the machine: never evict or collect images for it.
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
failSwapOn: false
serializeImagePulls: false
shutdownGracePeriod: 0s
EOF
  log "starting the kubelet of $name on $ip"
  start "kubelet-$name" "$bin/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubeconfig" \
    --root-dir "$dir/kubelet" --hostname-override "$name" --node-ip "$ip" \
    --node-labels "type=real,vcpilot.io/node-kind=real"
}

import_images() { # node socket: import every image the node does not hold yet
  local name=$1 sock=$2 archive ref="" digest
  prune_images "$name" "$sock"
  for archive in $images; do
    ref=$(image_ref "$archive")
    if ctr --address "$sock" -n k8s.io images ls -q | grep -qxF "$ref"; then
      continue
    fi
    log "$name: importing $ref"
    if [[ -d $archive ]]; then
      tar -C "$archive" -cf - . | ctr --address "$sock" -n k8s.io images import - >/dev/null
    else
      ctr --address "$sock" -n k8s.io images import "$archive" >/dev/null
    fi || die "$name: containerd could not import $archive."
    # Once unpacked, a layer's blob is a second copy of gigabytes: containers start from the snapshot alone.
    for digest in $(archive_file "$archive" "$(archive_file "$archive" manifest.json | jq -r '.[0].Config')" |
      jq -r '.rootfs.diff_ids[]'); do
      ctr --address "$sock" -n k8s.io content rm "$digest" >/dev/null
    done
  done
  # Argo's upstream examples (tests/e2e/test_argo_examples.py) run python:alpine3.23 for its `python`; the step
  # image (the last archive) has one on PATH, and a second name costs nothing, where a second image of 6.6 GB would.
  if [[ -n $ref ]]; then
    ctr --address "$sock" -n k8s.io images tag --force "$ref" docker.io/library/python:alpine3.23 >/dev/null ||
      die "$name: containerd could not tag $ref as python:alpine3.23."
  fi
}

prune_images() { # node socket: drop vcpilot's images this build no longer makes, before importing new ones
  # An old step image (a new base after constraints.txt changed) is 6.6 GB per node: kept, the node's disk
  # holds both while the new one unpacks. The python:alpine3.23 alias is remade after the import.
  local name=$1 sock=$2 archive held wanted=()
  for archive in $images; do wanted+=("$(image_ref "$archive")"); done
  # No images given (node-fault.sh revives a node with what its store holds): nothing is replaced, keep them all.
  ((${#wanted[@]})) || return 0
  for held in $(ctr --address "$sock" -n k8s.io images ls -q); do
    [[ $held == vcpilot.local/* || $held == docker.io/library/python:alpine3.23 ]] || continue
    printf '%s\n' "${wanted[@]}" | grep -qxF "$held" && continue
    log "$name: removing $held, which this build no longer makes"
    ctr --address "$sock" -n k8s.io images rm --sync "$held" >/dev/null || die "$name: containerd could not remove $held."
  done
}

archive_file() { # archive name: a file of a docker-archive, a directory or a tar
  if [[ -d $1 ]]; then cat "$1/$2"; else tar -xOf "$1" "$2"; fi
}

# The reference a docker-archive holds (its manifest.json's first RepoTag), with docker.io's implicit prefix.
image_ref() {
  local tag
  tag=$(archive_file "$1" manifest.json | jq -r '.[0].RepoTags[0] // empty')
  [[ -n $tag ]] || die "$1 is not a docker-archive image (no RepoTags in manifest.json)."
  [[ $tag == */* ]] || tag=library/$tag
  [[ ${tag%%/*} == *.* || ${tag%%/*} == *:* || ${tag%%/*} == localhost ]] || tag=docker.io/$tag
  echo "$tag"
}

real_nodes_ready() {
  [[ $(kubectl get nodes -l type=real \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True) -eq $real_nodes ]]
}

node_tools() { # finds containerd, runc and the CNI plugins, or says what to install
  CONTAINERD=$(command -v containerd) || die "containerd is needed for real nodes: apt-get install -y containerd runc containernetworking-plugins."
  command -v runc >/dev/null || die "runc is needed for real nodes: apt-get install -y runc."
  CNI_BIN_DIR=${VCPILOT_E2E_CNI_BIN:-/usr/lib/cni}
  [[ -x $CNI_BIN_DIR/bridge && -x $CNI_BIN_DIR/host-local && -x $CNI_BIN_DIR/loopback ]] ||
    die "the CNI plugins are not in $CNI_BIN_DIR: apt-get install -y containernetworking-plugins."
}

# advertise_gpus INDEX — an extended resource is advertised by patching the node's status (as a device plugin
# would report it).
advertise_gpus() {
  kubectl patch node "real-node-$1" --subresource status --type json \
    -p "[{\"op\":\"add\",\"path\":\"/status/capacity/nvidia.com~1gpu\",\"value\":\"$real_gpus\"}]" >/dev/null
}

start_real_nodes() {
  ((real_nodes > 0)) || return 0
  node_tools
  [[ -n $sandbox_image ]] || die "VCPILOT_E2E_SANDBOX_IMAGE is unset: real nodes need a pause image (deploy/e2e/image.sh)."
  ((EUID == 0)) || die "real nodes need root (network namespaces, mounts, cgroups): run as root or VCPILOT_E2E_REAL_NODES=0."
  start_cluster_network
  local i
  # The runtimes start and import side by side (an import of the step image hashes gigabytes), the kubelets after.
  local started=()
  for ((i = 0; i < real_nodes; i++)); do
    start_runtime "$i" &
    started+=($!)
  done
  for i in "${started[@]}"; do wait "$i" || die "a real node's runtime did not start (above)."; done
  # Every kubelet of a machine serves device plugins at one path, not under its --root-dir: on start it clears that
  # directory, then listens there, so two kubelets starting at once can both clear and one then fails to listen
  # (EADDRINUSE; CI saw it). One at a time: the next starts once this one listens (and clears that socket itself).
  for ((i = 0; i < real_nodes; i++)); do
    rm -f "$device_plugin_socket"
    start_kubelet "$i"
    wait_for "the kubelet of real-node-$i listening for device plugins" 60 test -S "$device_plugin_socket"
  done
  wait_for "$real_nodes real nodes Ready" 120 real_nodes_ready
  for ((i = 0; i < real_nodes; i++)); do advertise_gpus "$i"; done
  wait_for "nvidia.com/gpu on the real nodes" 30 real_gpus_advertised
}

real_gpus_advertised() {
  [[ $(kubectl get nodes -l type=real -o jsonpath='{range .items[*]}{.status.allocatable.nvidia\.com/gpu}{"\n"}{end}' |
    grep -c "^$real_gpus\$") -eq $real_nodes ]]
}
