// Builds CoreDNS, the cluster DNS of the real-pods e2e cluster (pods resolve Services and the pod names that
// Volcano's svc plugin gives them, e.g. MASTER_ADDR of the pytorch plugin). It runs as a host process, not a pod.
module vcpilot.local/e2e/coredns

go 1.25.0

require github.com/coredns/coredns v1.14.7
