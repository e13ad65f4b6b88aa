"""Which cluster a command or a step talks to: a kubeconfig's Volcano, the one a pod runs in, or LocalCluster.

One rule for every entry point (the pipeline's steps, `vcpilot plan`, `vcpilot mcp`), so the same command
observes the same cluster wherever it runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from components.volcano.cluster import Cluster, ClusterError

__all__ = ["connect"]


def connect(
    kubeconfig: str | Path | None = None,
    context: str | None = None,
    *,
    home: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Cluster:
    """The cluster to use, in this order.

    1. `kubeconfig` given: the Kubernetes cluster it names (KubeCluster);
    2. `home` given or `VCPILOT_HOME` set: the LocalCluster there (what the local runner sets for its steps);
    3. running in a pod (`KUBERNETES_SERVICE_HOST` set): the cluster around it, with the pod's service account;
    4. otherwise the LocalCluster in `./.vcpilot`.

    A kubeconfig that cannot be used raises ClusterError in one sentence.
    """
    env = os.environ if environ is None else environ
    if kubeconfig:
        return _kube(kubeconfig=str(kubeconfig), context=context)
    if home is None and not env.get("VCPILOT_HOME") and env.get("KUBERNETES_SERVICE_HOST"):
        return _kube(in_cluster=True)
    from components.volcano.cluster_local import LocalCluster

    return LocalCluster(home)


def _kube(*, kubeconfig: str | None = None, context: str | None = None, in_cluster: bool | None = None) -> Cluster:
    from components.volcano.cluster_k8s import KubeCluster  # imported here: the kubernetes client is slow to load

    try:
        return KubeCluster(kubeconfig=kubeconfig, context=context, in_cluster=in_cluster)
    except ClusterError:
        raise
    except Exception as err:  # the client's config loaders raise assorted types for an unusable kubeconfig
        where = kubeconfig or "the pod's service account"
        raise ClusterError(f"cannot use {where} to reach Kubernetes: {str(err).rstrip('.')}.") from None
