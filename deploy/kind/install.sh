#!/usr/bin/env bash
# Creates the kind cluster of kind-config.yaml and installs what vcpilot runs on: Volcano, Argo Workflows, the
# scheduler configuration of deploy/volcano/scheduler/, and deploy/ itself, with the step image loaded into it.
#
#   deploy/kind/install.sh            create (or reuse) the cluster and install everything; safe to rerun
#
# Needs docker, kind (>= 0.20, for node labels) and kubectl on PATH, and the step image built locally.
# VCPILOT_KIND_CLUSTER names another cluster (default vcpilot); VCPILOT_FAKE_GPUS sets the GPUs advertised per
# worker (default 4).
# Not run on the project's own machines, which have no Docker engine (README.md here).
set -euo pipefail

VOLCANO_VERSION=v1.15.1
ARGO_VERSION=v4.1.2
VOLCANO_MANIFEST=https://raw.githubusercontent.com/volcano-sh/volcano/${VOLCANO_VERSION}/installer/volcano-development.yaml
ARGO_MANIFEST=https://github.com/argoproj/argo-workflows/releases/download/${ARGO_VERSION}/install.yaml

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster=${VCPILOT_KIND_CLUSTER:-vcpilot}
image=ghcr.io/vcpilot/vcpilot:0.1.0 # the WorkflowTemplate's default `image`, and MLflow's (tests/unit/test_deploy.py)
fake_gpus=${VCPILOT_FAKE_GPUS:-4}
workspace_dir=/tmp/vcpilot-kind-workspace # kind-config.yaml mounts it into both workers
rollout_timeout=5m

die() {
  echo "install.sh: $*" >&2
  exit 1
}
step() { echo "==> $*"; }

for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || die "$tool is not on PATH: install it, then run this again."
done
docker image inspect "$image" >/dev/null 2>&1 ||
  die "the image $image is not in the local Docker engine: build it first, e.g." \
    "docker build -f deploy/image/Dockerfile --build-arg TORCH_VARIANT=cpu -t $image ."
[[ $fake_gpus =~ ^[0-9]+$ ]] || die "VCPILOT_FAKE_GPUS must be a whole number, not '$fake_gpus'."

step "kind cluster $cluster"
mkdir -p "$workspace_dir"
chmod 0777 "$workspace_dir" # a hostPath volume ignores fsGroup: the steps' user must be able to write
if kind get clusters | grep -qx "$cluster"; then
  echo "exists; reusing it"
else
  kind create cluster --name "$cluster" --config "$here/kind-config.yaml" --wait "$rollout_timeout"
fi
kctl() { kubectl --context "kind-$cluster" "$@"; }

# Volcano's and Argo's CRDs are too large for client-side apply (its annotation holds the whole object).
step "Volcano $VOLCANO_VERSION"
kctl apply --server-side --force-conflicts -f "$VOLCANO_MANIFEST"
kctl -n volcano-system wait --for=condition=complete job/volcano-admission-init --timeout="$rollout_timeout"
for deployment in volcano-admission volcano-controllers volcano-scheduler; do
  kctl -n volcano-system rollout status "deployment/$deployment" --timeout="$rollout_timeout"
done

step "Volcano scheduler configuration (deploy/volcano/scheduler/)"
kctl apply -k "$root/deploy/volcano/scheduler"
# vc-scheduler reloads its file when the kubelet updates the mounted ConfigMap, which can take a minute:
# a restart makes the new actions take effect now.
kctl -n volcano-system rollout restart deployment/volcano-scheduler
kctl -n volcano-system rollout status deployment/volcano-scheduler --timeout="$rollout_timeout"

step "Argo Workflows $ARGO_VERSION"
kctl get namespace argo >/dev/null 2>&1 || kctl create namespace argo
kctl apply --server-side --force-conflicts -n argo -f "$ARGO_MANIFEST"
for deployment in workflow-controller argo-server; do
  kctl -n argo rollout status "deployment/$deployment" --timeout="$rollout_timeout"
done

step "fake nvidia.com/gpu: $fake_gpus on each node labelled vcpilot.io/fake-gpu=true"
workers=$(kctl get nodes -l vcpilot.io/fake-gpu=true -o name)
[[ -n $workers ]] || die "no node is labelled vcpilot.io/fake-gpu=true: was the cluster made from kind-config.yaml?"
while read -r node; do
  # The kubelet keeps an extended resource that is patched into the node's status (and copies it to allocatable).
  kctl patch "$node" --subresource=status --type=json \
    -p "[{\"op\": \"add\", \"path\": \"/status/capacity/nvidia.com~1gpu\", \"value\": \"$fake_gpus\"}]"
done <<<"$workers"

step "step image $image"
kind load docker-image "$image" --name "$cluster"

step "deploy/ (namespace vcpilot)"
kctl apply -f "$root/deploy/workspace/namespace.yaml"
# The workspace claim, bound to the volume both workers share; created once, before deploy/ would create it.
if ! kctl -n vcpilot get persistentvolumeclaim vcpilot-workspace >/dev/null 2>&1; then
  kctl create -f "$here/workspace.yaml"
fi
kctl apply -k "$root/deploy"
kctl -n vcpilot rollout status deployment/vcpilot-mlflow --timeout="$rollout_timeout"

step "done"
cat <<EOF
The cluster runs Volcano $VOLCANO_VERSION, Argo Workflows $ARGO_VERSION and vcpilot in namespace vcpilot.
  run once:      argo -n vcpilot submit --from workflowtemplate/llm-autopilot --watch
  MLflow:        kubectl -n vcpilot port-forward svc/vcpilot-mlflow 5000   (then http://localhost:5000)
  Argo UI:       kubectl -n argo port-forward svc/argo-server 2746         (then https://localhost:2746)
  delete:        kind delete cluster --name $cluster
EOF
