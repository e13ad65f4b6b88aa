"""`vcpilot doctor`: check what a real deployment of vcpilot needs, and say what to fix (docs/deploy.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from components.errors import explain
from pipelines.argo_address import SERVER_HELP

__all__ = ["doctor_command"]


def doctor_command(
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            envvar="VCPILOT_KUBECONFIG",
            help="Kubeconfig of the cluster (default: $KUBECONFIG, ~/.kube/config, or in-cluster).",
        ),
    ] = None,
    namespace: Annotated[
        str | None, typer.Option(help="Namespace deploy/ was installed in (default: deploy/kustomization.yaml's).")
    ] = None,
    argo_server: Annotated[str | None, typer.Option(help=SERVER_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of {check, ok, detail, fix}.")] = False,
) -> None:
    """Check the cluster, Volcano, RBAC, Argo, MLflow and the step image; exit 1 when anything needs fixing."""
    # Imported here: the kubernetes client is slow to load, and every other command would pay for it.
    from components.errors import InputError
    from components.names import check_namespace
    from components.ports import check_http_url
    from pipelines import deployment, doctor
    from pipelines.argo_address import argo_server_url
    from pipelines.doctor_report import exit_code, render_json, render_text

    try:
        ns = namespace or deployment.namespace()
    except deployment.DeployError as err:
        raise deployment.DeployError(f"{explain(err)[0].rstrip('.')}; pass --namespace") from None
    check_namespace(ns, "--namespace")  # a typo is one sentence, not every check failing on a namespace not found
    if argo_server:  # 'bogus:999999' was looked up in DNS, and reported as a server that does not answer
        try:
            check_http_url(argo_server_url(argo_server, {}))
        except ValueError as err:
            raise InputError(f"--argo-server {err}") from None
    checks = doctor.run_checks(kubeconfig, ns, argo_server)
    typer.echo(render_json(checks) if as_json else render_text(checks))
    raise typer.Exit(exit_code(checks))
