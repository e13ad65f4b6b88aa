"""The light steps of the llm-autopilot workflow: Hera runner scripts with typed pydantic inputs and outputs.

Each script template runs `python -m hera.workflows.runner -e pipelines.steps:<function>` in the step image;
Hera maps the template's input parameters onto the function's `Input` model and writes the fields of the
returned `Output` model to `$hera__outputs_directory/parameters/<name>`. Step bodies stay small: they read
the workspace and the cluster, and leave decisions to `pipelines.rules` and manifests to `pipelines.vcjobs`.
The finetune recursion's steps, where the agent decides, are in `pipelines.steps_training`.

Hera 7.1 has no experimental features left — script annotations and pydantic IO are stable — so nothing is set
on `global_config` (its `experimental_features` setter only emits a DeprecationWarning). The settings every
script template shares live in one place, `RUNNER`.
"""

# No `from __future__ import annotations` here: Hera reads the step functions' annotations at runtime
# (inspect.signature without eval_str), so they must be real types, not strings.
import contextlib
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, NoReturn, ParamSpec, TypeVar

from hera.workflows import Parameter, Resources, script
from hera.workflows.io import Input, Output
from hera.workflows.models import VolumeMount
from pydantic import ValidationError

from components.errors import EXIT_FAILED, EXIT_INPUT, InputError, VcpilotError, explain
from components.files import write_json
from components.tracking.adapter import DEFAULT_EXPERIMENT, TrackingUnavailable
from components.tracking.runs import WorkflowRun, close_workflow_run
from components.volcano.cluster import Cluster, ClusterError
from components.volcano.connect import connect
from components.volcano.models import Job
from components.volcano.validation import describe_validation_error
from pipelines.parameters import check_parameters as check_parameters_of
from pipelines.review import write_review
from pipelines.rules import (
    DetectReport,
    EvaluationReport,
    LoadtestReport,
    ReleaseDecision,
    decide_gate,
    decide_release,
)
from pipelines.run_identity import workflow_run_of
from pipelines.vcjobs import WORKFLOW_LABEL, JobContext, build_detect_job, build_evaluate_job, build_loadtest_job
from pipelines.workspace import RunPaths, read_report

__all__ = [
    "RUNNER",
    "StepFailed",
    "check_parameters",
    "tell_argo",
    "WORKSPACE_VOLUME",
    "Finalized",
    "FinalizeInput",
    "Gate",
    "GateInput",
    "JobPlan",
    "JobStepInput",
    "PlanDetectInput",
    "PlanEvaluateInput",
    "PlanLoadtestInput",
    "Release",
    "ReleaseInput",
    "RunInput",
    "connect_cluster",
    "delete_workflow_jobs",
    "finalize",
    "finalize_mlflow_run",
    "for_people",
    "gate",
    "manifest_json",
    "plan_detect",
    "plan_evaluate",
    "plan_loadtest",
    "release",
]

WORKSPACE_VOLUME = "workspace"

# The one place the script templates' settings live: the step image and the workspace from the workflow's
# parameters (Argo substitutes them per run), and modest requests for what are short Python processes.
RUNNER: dict[str, Any] = {
    "constructor": "runner",
    "image": "{{workflow.parameters.image}}",
    "volume_mounts": [VolumeMount(name=WORKSPACE_VOLUME, mount_path="{{workflow.parameters.workspace}}")],
    "resources": Resources(cpu_request="100m", memory_request="256Mi"),
}

_P = ParamSpec("_P")
_R = TypeVar("_R")


# Kubernetes puts this file in every container and reports what it holds as the container's termination message;
# Argo appends that to the failed node's message ("main: Error (exit code 1): <this>"), which `argo get` and the UI
# show beside the node. (Real Argo leaves a failed DAG workflow's own message empty: the node is where to look.)
TERMINATION_LOG = Path("/dev/termination-log")


def tell_argo(sentence: str) -> None:
    """Leave `sentence` as the step's termination message, where the kubelet made the file (never elsewhere)."""
    if TERMINATION_LOG.is_file():
        with contextlib.suppress(OSError):
            TERMINATION_LOG.write_text(sentence[:4000])  # the kubelet keeps 4096 bytes


class StepFailed(SystemExit):
    """A step ended on an error a person must act on: `str()` is its sentence, `code` its exit code."""

    def __init__(self, sentence: str, code: int) -> None:
        super().__init__(code)
        self.sentence = sentence

    def __str__(self) -> str:
        return self.sentence


def for_people(step: Callable[_P, _R]) -> Callable[_P, _R]:
    """Make a step that fails on bad input or an unreachable cluster end with one sentence, not a traceback.

    The sentence and the exit code are those of `components.errors.explain`, as for every command and pod; the
    sentence goes to stderr and to Argo (`tell_argo`), prefixed with the step's name.
    """

    def fail(name: str, sentence: str, code: int) -> NoReturn:
        sentence = f"{name}: {sentence}"
        tell_argo(sentence)
        print(sentence, file=sys.stderr, flush=True)
        raise StepFailed(sentence, code)

    @functools.wraps(step)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        name = step.__name__.replace("_", "-")
        try:
            return step(*args, **kwargs)
        except VcpilotError as err:
            fail(name, *explain(err))
        except ValidationError as err:  # a parameter Hera could not map onto the step's input
            fail(name, describe_validation_error(err), EXIT_INPUT)
        except ValueError as err:  # the manifest checks (components.volcano.validation) speak ValueError, as pydantic
            fail(name, str(err), EXIT_INPUT)
        except OSError as err:
            fail(name, str(err), EXIT_FAILED)

    return run


# ---- inputs every step shares -------------------------------------------------------------------------


class RunInput(Input):
    """Which run a step belongs to, where its workspace is, and what its MLflow parent run is tagged with."""

    workflow_name: Annotated[str, Parameter(name="workflow-name")]
    workflow_uid: Annotated[str, Parameter(name="workflow-uid")] = ""
    workflow_labels: Annotated[str, Parameter(name="workflow-labels")] = "{}"
    template_version: Annotated[str, Parameter(name="template-version")] = ""
    argo_ui_url: Annotated[str, Parameter(name="argo-ui-url")] = ""
    namespace: str = "default"
    workspace: str
    image: str = ""

    def workflow_run(self) -> WorkflowRun:
        """The run as its MLflow parent run records it: name, uid, namespace, link, trigger, version, image."""
        return workflow_run_of(
            name=self.workflow_name,
            uid=self.workflow_uid,
            namespace=self.namespace,
            labels_json=self.workflow_labels,
            argo_ui_url=self.argo_ui_url,
            template_version=self.template_version,
            image=self.image,
        )


class JobStepInput(RunInput):
    """What a step that plans a VCJob needs to know about the cluster and MLflow."""

    workspace_pvc: Annotated[str, Parameter(name="workspace-pvc")] = ""
    image: str
    queue: str = "default"
    priority_class: Annotated[str, Parameter(name="priority-class")] = ""
    mlflow_tracking_uri: Annotated[str, Parameter(name="mlflow-tracking-uri")] = ""
    mlflow_experiment: Annotated[str, Parameter(name="mlflow-experiment")] = ""
    cpu_per_gpu: Annotated[str, Parameter(name="cpu-per-gpu")] = "4"
    memory_per_gpu: Annotated[str, Parameter(name="memory-per-gpu")] = "16Gi"
    job_service_account: Annotated[str, Parameter(name="job-service-account")] = ""

    def context(self, queue: str | None = None) -> JobContext:
        """The part of every VCJob this run shares."""
        return JobContext.for_run(
            self.workflow_run(),
            workspace=self.workspace,
            workspace_pvc=self.workspace_pvc,
            queue=queue or self.queue,
            priority_class=self.priority_class,
            mlflow_tracking_uri=self.mlflow_tracking_uri,
            mlflow_experiment=self.mlflow_experiment,
            cpu_per_gpu=self.cpu_per_gpu,
            memory_per_gpu=self.memory_per_gpu,
            job_service_account=self.job_service_account,
        )


class JobPlan(Output):
    """A rendered VCJob: the manifest for the resource template, its name, and the report it will write."""

    manifest: str
    job_name: Annotated[str, Parameter(name="job-name")]
    report: str = ""


def connect_cluster() -> Cluster | None:
    """The cluster the steps observe (see `components.volcano.connect`); None, said on stdout, when unreachable."""
    try:
        return connect()
    except ClusterError as err:
        print(f"cannot reach the cluster, deciding without looking at it: {err}")
        return None


# ---- detect → gate ------------------------------------------------------------------------------------


class PlanDetectInput(JobStepInput):
    """The detect step's VCJob parameters."""

    log_source: Annotated[str, Parameter(name="log-source")]
    baseline_window: Annotated[str, Parameter(name="baseline-window")] = ""
    current_window: Annotated[str, Parameter(name="current-window")] = ""


@script(**RUNNER)
@for_people
def plan_detect(inputs: PlanDetectInput) -> JobPlan:
    """Render the detect-logs VCJob."""
    context = inputs.context()
    job = build_detect_job(
        context,
        log_source=inputs.log_source,
        baseline_window=inputs.baseline_window,
        current_window=inputs.current_window,
    )
    return _job_plan(job, context.paths, context.paths.detect_report)


class CheckInput(Input):
    """Every parameter of the run, as Argo's `{{workflow.parameters.json}}` lists them."""

    parameters: str


@script(**RUNNER)
@for_people
def check_parameters(inputs: CheckInput) -> Output:
    """Fail the run, before anything else runs, on a parameter value its declaration does not allow."""
    try:
        listed = json.loads(inputs.parameters)
        values = {str(p["name"]): str(p.get("value", "")) for p in listed}
    except (ValueError, TypeError, KeyError):
        raise InputError(
            "the workflow's parameters are not the JSON list Argo gives as workflow.parameters.json"
        ) from None
    check_parameters_of(values)
    return Output(result=f"{len(values)} parameters checked")


class GateInput(Input):
    """The detect report and the run mode."""

    mode: Literal["auto", "force", "dry-run"] = "auto"
    report: str


class Gate(Output):
    """Whether to fine-tune, and why."""

    trigger: bool
    reason: str


@script(**RUNNER)
@for_people
def gate(inputs: GateInput) -> Gate:
    """Decide from the detect report whether this run fine-tunes."""
    report = None if inputs.mode == "force" else read_report(inputs.report, DetectReport, "detect")
    decision = decide_gate(inputs.mode, report)
    return Gate(**decision.model_dump(), result=f"trigger={str(decision.trigger).lower()}: {decision.reason}")


# ---- loadtest → evaluate → release ---------------------------------------------------------------------


class PlanLoadtestInput(JobStepInput):
    """The candidate to serve and the SLOs the client measures against."""

    model_uri: Annotated[str, Parameter(name="model-uri")]
    slo_ttft_ms: Annotated[float, Parameter(name="slo-ttft-ms")]
    slo_tpot_ms: Annotated[float, Parameter(name="slo-tpot-ms")]
    loadtest_requests: Annotated[int, Parameter(name="loadtest-requests")]


@script(**RUNNER)
@for_people
def plan_loadtest(inputs: PlanLoadtestInput) -> JobPlan:
    """Render the loadtest VCJob: one gang of a server and a client."""
    context = inputs.context()
    job = build_loadtest_job(
        context,
        model_uri=inputs.model_uri,
        slo_ttft_ms=inputs.slo_ttft_ms,
        slo_tpot_ms=inputs.slo_tpot_ms,
        requests=inputs.loadtest_requests,
    )
    return _job_plan(job, context.paths, context.paths.loadtest_report)


class PlanEvaluateInput(JobStepInput):
    """The candidate and what it is compared with."""

    model_uri: Annotated[str, Parameter(name="model-uri")]
    base_model: Annotated[str, Parameter(name="base-model")]
    registered_model: Annotated[str, Parameter(name="registered-model")]
    dataset_dir: Annotated[str, Parameter(name="dataset-dir")]


@script(**RUNNER)
@for_people
def plan_evaluate(inputs: PlanEvaluateInput) -> JobPlan:
    """Render the evaluate VCJob: candidate and champion on `<dataset-dir>/eval.jsonl`."""
    context = inputs.context()
    job = build_evaluate_job(
        context,
        model_uri=inputs.model_uri,
        base_model=inputs.base_model,
        registered_model=inputs.registered_model,
        eval_set=str(PurePosixPath(inputs.dataset_dir) / "eval.jsonl"),
    )
    return _job_plan(job, context.paths, context.paths.evaluate_report)


class ReleaseInput(RunInput):
    """The candidate, the two reports about it, and the bars it must clear."""

    model_uri: Annotated[str, Parameter(name="model-uri")]
    loadtest_report: Annotated[str, Parameter(name="loadtest-report")]
    evaluate_report: Annotated[str, Parameter(name="evaluate-report")]
    slo_ttft_ms: Annotated[float, Parameter(name="slo-ttft-ms")]
    slo_tpot_ms: Annotated[float, Parameter(name="slo-tpot-ms")]
    eval_margin: Annotated[float, Parameter(name="eval-margin")]
    registered_model: Annotated[str, Parameter(name="registered-model")]
    base_model: Annotated[str, Parameter(name="base-model")] = ""
    mlflow_tracking_uri: Annotated[str, Parameter(name="mlflow-tracking-uri")] = ""
    mlflow_experiment: Annotated[str, Parameter(name="mlflow-experiment")] = ""


class Release(Output):
    """Whether the candidate becomes the champion, and why."""

    released: bool
    reason: str


@script(**RUNNER)
@for_people
def release(inputs: ReleaseInput) -> Release:
    """Decide from the load test and the evaluation whether the candidate is released, and record it."""
    decision = decide_release(
        read_report(inputs.loadtest_report, LoadtestReport, "loadtest"),
        read_report(inputs.evaluate_report, EvaluationReport, "evaluate"),
        slo_ttft_ms=inputs.slo_ttft_ms,
        slo_tpot_ms=inputs.slo_tpot_ms,
        margin=inputs.eval_margin,
    )
    paths = RunPaths(workspace=inputs.workspace, workflow=inputs.workflow_name)
    record: dict[str, Any] = {
        "model_uri": inputs.model_uri,
        "registered_model": inputs.registered_model,
        **decision.model_dump(),
    }
    registered = register_candidate(inputs, paths, decision)
    record["version"] = registered
    reason = decision.reason
    if decision.released:
        reason = f"{reason}; registered as {inputs.registered_model} version {registered['version']} (champion)"
    elif "version" in registered:
        reason = f"{reason}; registered as {inputs.registered_model} version {registered['version']}, without an alias"
    write_json(paths.release_record, record)
    return Release(released=decision.released, reason=reason, result=reason)


def register_candidate(inputs: ReleaseInput, paths: RunPaths, decision: ReleaseDecision) -> dict[str, Any]:
    """Register the candidate with its lineage, scores and verdict; move `champion` (and `previous`) if released.

    A candidate that is not released is registered too, without an alias, so the registry says why it lost. If
    the registry is unavailable then, the step still succeeds: nothing was to change, and the record says so.
    """
    # Imports MLflow: only when a release step runs.
    from components.release.register import register_model
    from components.release.registry import RegistryError
    from components.release.verdict import Bars, Verdict, read_scores

    verdict = Verdict(
        promoted=decision.released,
        reason=decision.reason,
        scores=read_scores(Path(inputs.evaluate_report), Path(inputs.loadtest_report)),
        bars=Bars(slo_ttft_ms=inputs.slo_ttft_ms, slo_tpot_ms=inputs.slo_tpot_ms, margin=inputs.eval_margin),
    )
    dataset = Path(paths.detect_report).parent / "train.jsonl"
    try:
        registered = register_model(
            Path(inputs.model_uri),
            inputs.registered_model,
            dataset=dataset if dataset.is_file() else None,
            base_model=inputs.base_model,
            verdict=verdict,
            workflow=inputs.workflow_name,
            experiment=inputs.mlflow_experiment,
            tracking_uri=inputs.mlflow_tracking_uri,
        )
    except RegistryError as err:
        if decision.released:
            raise
        return {"registered": False, "error": str(err)}
    return registered.model_dump(mode="json")


# ---- exit handler --------------------------------------------------------------------------------------


class FinalizeInput(RunInput):
    """How the workflow ended."""

    workflow_status: Annotated[str, Parameter(name="workflow-status")]
    mlflow_tracking_uri: Annotated[str, Parameter(name="mlflow-tracking-uri")] = ""
    mlflow_experiment: Annotated[str, Parameter(name="mlflow-experiment")] = ""


class Finalized(Output):
    """The VCJobs the exit handler deleted."""

    deleted_jobs: Annotated[list[str], Parameter(name="deleted-jobs")]


def delete_workflow_jobs(cluster: Cluster, workflow: str, namespace: str) -> list[str]:
    """Delete every VCJob of `namespace` labelled with this workflow; returns their names.

    Within the workflow's namespace: its service account may not list jobs cluster-wide (deploy/rbac/).
    """
    deleted = []
    for job in cluster.list_jobs(labels={WORKFLOW_LABEL: workflow}, namespace=namespace):
        cluster.delete(job.name, job.namespace, missing_ok=True)
        deleted.append(job.name)
    return deleted


def finalize_mlflow_run(
    summary: dict[str, Any], tracking_uri: str, experiment: str, paths: RunPaths, run: WorkflowRun | None = None
) -> str:
    """Send every spool of the run, then end its parent MLflow run with the reports; a failure is said, not raised.

    The summary in the workspace is written first, and what MLflow does not take stays in the run's spools, so an
    unreachable MLflow loses nothing: a later `close_workflow_run` (or the exit handler run again) sends it.
    """
    if not tracking_uri:
        return "no MLflow tracking URI: the summary in the workspace is the run's record"
    reports = {
        "detect": Path(paths.detect_report),
        "loadtest": Path(paths.loadtest_report),
        "evaluate": Path(paths.evaluate_report),
        "release": Path(paths.release_record),
        "summary": Path(paths.summary),
    }
    folder = Path(paths.run)
    review = folder / "review"
    artifacts = {
        "": [review / "summary.md"],
        "plots": sorted(review.glob("*.png")),
        "decisions": [folder / "decisions"],
        "manifests": [folder / "manifests"],
        "loadtest": [Path(paths.loadtest_report).with_name("records.jsonl")],
    }
    try:
        run_id = close_workflow_run(
            tracking_uri,
            experiment or DEFAULT_EXPERIMENT,
            run or WorkflowRun(name=summary["workflow"]),
            summary["status"],
            reports,
            spool_dir=Path(paths.tracking),
            artifacts=artifacts,
        )
    except TrackingUnavailable as err:  # MLflow down or refusing: the run's record stays in the workspace
        return f"MLflow run not closed ({err.reason})"
    return f"MLflow run {run_id} closed"


@script(**RUNNER)
@for_people
def finalize(inputs: FinalizeInput) -> Finalized:
    """Delete this workflow's VCJobs unless it succeeded, write the run summary, close the MLflow run."""
    deleted: list[str] = []
    cleanup = "nothing to clean up" if inputs.workflow_status == "Succeeded" else ""
    cluster = None if cleanup else connect_cluster()
    if cluster is not None:
        try:
            deleted = delete_workflow_jobs(cluster, inputs.workflow_name, inputs.namespace)
            cleanup = f"deleted {len(deleted)} VCJobs"
        except ClusterError as err:  # the summary matters more than the cleanup: record and go on
            cleanup = f"could not delete the VCJobs: {err}"
    cleanup = cleanup or "no cluster to clean up from here; the VCJobs go when the workflow is deleted"
    summary = {"workflow": inputs.workflow_name, "status": inputs.workflow_status, "cleanup": cleanup}
    paths = RunPaths(workspace=inputs.workspace, workflow=inputs.workflow_name)
    write_json(paths.summary, summary)
    try:
        review = f"review in {write_review(paths, inputs.workflow_status).directory}"
    except (OSError, ValueError) as err:  # the pictures are a view of the reports, which are all in place
        review = f"no review ({type(err).__name__}: {err})"
    tracking = finalize_mlflow_run(
        summary, inputs.mlflow_tracking_uri, inputs.mlflow_experiment, paths, inputs.workflow_run()
    )
    result = f"workflow {inputs.workflow_status}: {cleanup}; {review}; {tracking}"
    return Finalized(deleted_jobs=deleted, result=result)


def keep_manifest(paths: RunPaths, manifest: dict[str, Any]) -> None:
    """Keep a rendered VCJob in `<run>/manifests/<name>.json`: the review shows exactly what was submitted."""
    name = manifest.get("metadata", {}).get("name") or "job"
    write_json(Path(paths.run) / "manifests" / f"{name}.json", manifest)


def _job_plan(job: Job, paths: RunPaths, report: str) -> JobPlan:
    name = job.metadata.name or ""
    keep_manifest(paths, job.to_dict())
    return JobPlan(manifest=manifest_json(job.to_dict()), job_name=name, report=report, result=f"rendered VCJob {name}")


def manifest_json(manifest: dict[str, Any]) -> str:
    """A manifest as compact JSON: what a resource template receives (no `{{` inside, one line)."""
    return json.dumps(manifest, separators=(",", ":"))
