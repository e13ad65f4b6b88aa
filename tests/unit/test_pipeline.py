"""The llm-autopilot pipeline: committed YAML is current and valid Argo, the DAG recovers and aborts as designed,
plan renders a valid VCJob that keeps the global batch and records its decision, submit talks to Argo."""

from __future__ import annotations

import importlib
import inspect
import json
import re
import socket
import ssl
import threading
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hera.workflows._runner.util import _runner

from components.errors import EXIT_UNAVAILABLE
from components.volcano.cluster import JobInfo
from components.volcano.models import parse_job, validate_job
from pipelines import steps, steps_training
from pipelines.autopilot import PARAMETERS, build_cron_workflow, build_workflow_template
from pipelines.compile import SubmitError, compile_all, render_all, submit
from pipelines.rules import DetectReport, EvaluationReport, LoadtestReport, decide_gate, decide_release
from pipelines.vcjobs import (
    STEP_LABEL,
    WORKFLOW_LABEL,
    JobContext,
    build_detect_job,
    build_evaluate_job,
    build_loadtest_job,
    job_name,
)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "argo"
WF = "llm-autopilot-x7k2p"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return build_workflow_template().to_dict()


@pytest.fixture(scope="module")
def templates(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in template["spec"]["templates"]}


def tasks_of(templates: dict[str, dict[str, Any]], name: str) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in templates[name]["dag"]["tasks"]}


# ---- the committed YAML ----------------------------------------------------------------------------------


def test_committed_yaml_is_a_fresh_compile(tmp_path: Path) -> None:
    written = compile_all(tmp_path)
    assert sorted(p.name for p in written) == ["llm-autopilot-nightly.yaml", "llm-autopilot.yaml"]
    for path in written:
        committed = DEPLOY / path.name
        assert committed.is_file(), f"{committed} is missing: run `vcpilot compile`"
        assert committed.read_text() == path.read_text(), f"{committed} is stale: run `vcpilot compile`"
    assert render_all() == {p.name: p.read_text() for p in written}, "compiling twice must give the same bytes"


@pytest.mark.parametrize(
    ("file", "kind"),
    [("llm-autopilot.yaml", "WorkflowTemplate"), ("llm-autopilot-nightly.yaml", "CronWorkflow")],
)
def test_documents_validate_against_argos_schema(shared_dir: Path, file: str, kind: str) -> None:
    schema = json.loads((shared_dir / "schemas" / "argo-v4.1.2" / "schema.json").read_text())
    wrapper = {"definitions": schema["definitions"], "$ref": f"#/definitions/io.argoproj.workflow.v1alpha1.{kind}"}
    validator = jsonschema.Draft202012Validator(wrapper)
    document = yaml.safe_load((DEPLOY / file).read_text())
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]
    assert not errors, errors
    assert document["kind"] == kind


def test_cron_runs_the_template_nightly_one_at_a_time() -> None:
    spec = build_cron_workflow().to_dict()["spec"]
    assert spec["schedules"] == ["0 2 * * *"] and spec["timezone"] == "UTC"
    assert spec["concurrencyPolicy"] == "Forbid" and spec["startingDeadlineSeconds"] > 0
    assert spec["successfulJobsHistoryLimit"] > 0 and spec["failedJobsHistoryLimit"] > 0
    assert spec["workflowSpec"] == {"workflowTemplateRef": {"name": "llm-autopilot"}}


# ---- parameters ------------------------------------------------------------------------------------------


def test_every_parameter_is_described_and_mode_is_a_choice(template: dict[str, Any]) -> None:
    parameters = {p["name"]: p for p in template["spec"]["arguments"]["parameters"]}
    assert set(parameters) >= {
        *("base-model", "log-source", "dataset-dir", "workspace", "gpus-wanted", "gpus-min", "gpus-per-pod"),
        *("global-batch", "micro-batch", "queue", "fallback-queue", "priority-class", "slo-ttft-ms", "slo-tpot-ms"),
        *("eval-margin", "max-recovery-attempts", "mlflow-tracking-uri", "mlflow-experiment", "registered-model"),
        *("mode", "image", "train-max-steps", "checkpoint-every"),
    }
    assert all(p.get("description") and "value" in p for p in parameters.values())
    assert parameters["mode"]["enum"] == ["auto", "force", "dry-run"] and parameters["mode"]["value"] == "auto"
    assert parameters["image"]["value"] == "ghcr.io/vcpilot/vcpilot:0.1.0"


# ---- the DAG ---------------------------------------------------------------------------------------------


def test_main_is_the_chain_with_an_exit_handler(template: dict[str, Any], templates: dict[str, Any]) -> None:
    spec = template["spec"]
    assert spec["entrypoint"] == "main" and spec["onExit"] in templates
    tasks = tasks_of(templates, "main")
    assert {name: task.get("depends") for name, task in tasks.items()} == {
        "check-parameters": None,
        "detect-logs": "check-parameters.Succeeded",
        "gate": "detect-logs.Succeeded",
        "finetune": "gate.Succeeded",
        "loadtest": "finetune.Succeeded",
        "evaluate": "loadtest.Succeeded",
        "release": "evaluate.Succeeded",
    }
    assert tasks["finetune"]["template"] == "train-with-recovery"
    assert tasks["finetune"]["when"] == "'{{tasks.gate.outputs.parameters.trigger}}' == 'true'"
    finalize = tasks_of(templates, spec["onExit"])["finalize"]
    assert {"name": "workflow-status", "value": "{{workflow.status}}"} in finalize["arguments"]["parameters"]


def test_training_recovers_by_recursion_and_an_abort_ends_in_a_failing_leaf(templates: dict[str, Any]) -> None:
    tasks = tasks_of(templates, "train-with-recovery")
    assert {name: task.get("depends") for name, task in tasks.items()} == {
        "plan": None,
        "train": "plan.Succeeded",
        # Beside train: deletes a gang still pending at the plan's deadline; diagnose reads its verdict.
        "start-deadline": "plan.Succeeded",
        "diagnose": "train.Failed && start-deadline.Succeeded",
        "recurse": "diagnose.Succeeded",
        "give-up": "diagnose.Succeeded",
    }
    action = "'{{tasks.diagnose.outputs.parameters.action}}'"
    # retry and replan recurse; only abort gives up.
    assert tasks["recurse"]["when"] == f"{action} != 'abort'" and tasks["give-up"]["when"] == f"{action} == 'abort'"
    assert tasks["recurse"]["template"] == "train-with-recovery"
    recurse_args = {p["name"]: p["value"] for p in tasks["recurse"]["arguments"]["parameters"]}
    assert recurse_args["attempt"] == "{{tasks.diagnose.outputs.parameters.next-attempt}}"
    # Every attempt plans from the GPUs the run wants (a retry downscaled off a dead node may scale back up).
    assert "gpus" not in recurse_args
    plan_args = {p["name"]: p["value"] for p in tasks["plan"]["arguments"]["parameters"]}
    assert plan_args["gpus"] == "{{workflow.parameters.gpus-wanted}}"
    # The failed train node has no outputs: diagnose gets the job's name from plan.
    diagnose_args = {p["name"]: p["value"] for p in tasks["diagnose"]["arguments"]["parameters"]}
    assert diagnose_args["job-name"] == "{{tasks.plan.outputs.parameters.job-name}}"
    assert diagnose_args["gpus"] == "{{tasks.plan.outputs.parameters.gpus}}"
    assert diagnose_args["start-outcome"] == "{{tasks.start-deadline.outputs.parameters.outcome}}"
    assert recurse_args["replans"] == "{{tasks.diagnose.outputs.parameters.replans}}"
    (model_uri,) = templates["train-with-recovery"]["outputs"]["parameters"]
    expression = model_uri["valueFrom"]["expression"]
    assert "tasks.train.status == 'Succeeded'" in expression and "tasks.recurse.outputs" in expression


def test_give_up_exits_non_zero_through_the_hera_runner(tmp_path: Path, monkeypatch) -> None:
    # `_runner` is what `python -m hera.workflows.runner` calls in the pod; its exit code becomes the node's phase.
    monkeypatch.setenv("hera__outputs_directory", str(tmp_path))
    result = _runner(
        "pipelines.steps_training:give_up", [{"name": "reason", "value": "abort: every pod exited with code 1"}]
    )
    assert result.exit_code == 1
    assert result.result == "giving up: abort: every pod exited with code 1"


def test_gate_writes_its_outputs_where_the_template_reads_them(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("hera__outputs_directory", str(tmp_path / "out"))
    report = tmp_path / "report.json"
    report.write_text('{"drift": false}')
    _runner("pipelines.steps:gate", [{"name": "mode", "value": "dry-run"}, {"name": "report", "value": str(report)}])
    assert (tmp_path / "out" / "parameters" / "trigger").read_text() == "false"
    assert (tmp_path / "out" / "parameters" / "reason").read_text().startswith("dry-run: the logs show no drift")


def test_resource_templates_create_vcjobs_without_retry_strategy(templates: dict[str, Any]) -> None:
    resources = [t for t in templates.values() if "resource" in t]
    assert [t["name"] for t in resources] == ["vcjob"]
    for t in resources:
        assert "retryStrategy" not in t
        assert t["resource"] == {
            "action": "create",
            "manifest": "{{inputs.parameters.manifest}}",
            "setOwnerReference": True,
            "successCondition": "status.state.phase == Completed",
            "failureCondition": "status.state.phase in (Failed,Aborted,Terminated)",
        }
    for heavy in ("detect-logs", "loadtest", "evaluate"):
        assert {n: t.get("depends") for n, t in tasks_of(templates, heavy).items()} == {
            "plan": None,
            "run": "plan.Succeeded",
        }


def test_every_task_follows_argos_rules(templates: dict[str, Any]) -> None:
    """What the schema misses but Argo's controller refuses, checked on every DAG task."""
    for dag_name, dag_template in templates.items():
        if "dag" not in dag_template:
            continue
        tasks = tasks_of(templates, dag_name)
        for name, task in tasks.items():
            where = f"{dag_name}.{name}"
            assert not ("continueOn" in task and "depends" in task), f"{where}: continueOn with depends"
            assert "dependencies" not in task, f"{where}: use depends"
            callee = templates[task["template"]]
            declared = {p["name"]: p for p in callee.get("inputs", {}).get("parameters", [])}
            given = {p["name"] for p in task.get("arguments", {}).get("parameters", [])}
            assert given <= set(declared), f"{where} passes {given - set(declared)}, which {callee['name']} lacks"
            missing = {n for n, p in declared.items() if "default" not in p and "value" not in p} - given
            assert not missing, f"{where} leaves {missing} of {callee['name']} unset"
            ancestors = _ancestors(name, tasks)
            for referenced in re.findall(r"tasks\.([\w-]+)\.", json.dumps(task)):
                assert referenced in ancestors, f"{where} reads tasks.{referenced}, which is not an ancestor"
            if "when" in task:  # govaluate: every operand quoted
                assert re.fullmatch(r"'\{\{[^}]+\}\}' [!=]= '[\w-]+'", task["when"]), f"{where}: when {task['when']}"


def _ancestors(name: str, tasks: dict[str, dict[str, Any]]) -> set[str]:
    parents = set(re.findall(r"([\w-]+)\.\w+", tasks[name].get("depends", "")))
    return parents.union(*(_ancestors(parent, tasks) for parent in parents))


def test_script_templates_run_their_step_through_the_hera_runner(templates: dict[str, Any]) -> None:
    scripts = {name: t for name, t in templates.items() if "script" in t}
    assert set(scripts) == {
        *(
            "check-parameters",
            "gate",
            "release",
            "finalize",
            "plan-detect",
            "plan-training",
            "diagnose",
            "start-deadline",
            "give-up",
        ),
        *("plan-loadtest", "plan-evaluate"),
    }
    for name, t in scripts.items():
        args = t["script"]["args"]
        assert args[:3] == ["-m", "hera.workflows.runner", "-e"] and t["script"]["source"] == "{{inputs.parameters}}"
        module, function = args[3].split(":")
        step = getattr(importlib.import_module(module), function)
        (inputs,) = inspect.signature(step).parameters.values()
        names = [p.name for p in inputs.annotation._get_parameters()]
        assert names == [p["name"] for p in t["inputs"]["parameters"]], name
        assert t["script"]["image"] == "{{workflow.parameters.image}}"


# ---- plan: the training VCJob ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def job_schema(shared_dir: Path) -> jsonschema.protocols.Validator:
    crd = yaml.safe_load((shared_dir / "schemas" / "volcano-v1.15.1" / "batch.volcano.sh_jobs.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


def crd_errors(schema: jsonschema.protocols.Validator, manifest: dict[str, Any]) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in schema.iter_errors(manifest)]


def plan_input(workspace: Path, **changes: Any) -> steps_training.TrainingPlanInput:
    values: dict[str, Any] = {
        "workflow_name": WF,
        "workspace": str(workspace),
        "workspace_pvc": "vcpilot-workspace",
        "image": "ghcr.io/vcpilot/vcpilot:0.1.0",
        "attempt": 1,
        "gpus": 4,
        "gpus_per_pod": 2,
        "global_batch": 32,
        "micro_batch": 4,
        "base_model": "Qwen/Qwen2.5-0.5B-Instruct",
        "train_max_steps": 200,
        "checkpoint_every": 50,
    }
    return steps_training.TrainingPlanInput(**{**values, **changes})


@pytest.mark.parametrize("gpus", [4, 2])
def test_plan_renders_a_valid_vcjob_that_keeps_the_global_batch(job_schema, tmp_path: Path, monkeypatch, gpus) -> None:
    # In a pod whose API server cannot be reached: the agent takes the size asked for.
    monkeypatch.delenv("VCPILOT_HOME", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "9")
    plan = steps_training.plan_training(plan_input(tmp_path, gpus=gpus, attempt=2, avoid_nodes=["node-1"]))
    manifest = json.loads(plan.manifest)
    assert "{{" not in plan.manifest
    assert crd_errors(job_schema, manifest) == []
    job = parse_job(manifest)
    validate_job(job)
    assert plan.job_name == job.metadata.name == f"{WF}-train-2"
    assert plan.action == "proceed" and plan.gpus == gpus
    assert plan.gpus * plan.micro_batch * plan.grad_accum == 32
    env = {e.name: e.value for e in job.spec.tasks[0].template.spec.containers[0].env or []}
    assert env["VCPILOT_GLOBAL_BATCH"] == "32" and env["VCPILOT_GRAD_ACCUM"] == str(plan.grad_accum)
    assert job.spec.min_available == gpus // 2 and job.spec.scheduler_name == "volcano" and job.spec.max_retry
    assert job.metadata.labels and job.metadata.labels[WORKFLOW_LABEL] == WF
    assert job.to_dict()["spec"]["volumes"] == [{"mountPath": str(tmp_path), "volumeClaimName": "vcpilot-workspace"}]
    assert plan.model_uri == f"{tmp_path}/runs/{WF}/train-2/model"
    assert "node-1" in plan.manifest
    # The decision is recorded where diagnose and people find it, and says why the cluster was not consulted.
    record = json.loads((tmp_path / "runs" / WF / "decisions" / "plan-2.json").read_text())
    assert record["action"]["kind"] == "proceed" and "could not be observed" in record["action"]["rationale"]
    assert "could not be observed" in plan.reason


def test_plan_refuses_a_batch_the_gpus_cannot_split_in_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as caught:
        steps_training.plan_training(plan_input(tmp_path, global_batch=30))
    message = str(caught.value)
    assert message.startswith("plan-training: global-batch 30 is not a multiple of gpus × micro-batch = 4 × 4")
    assert "\n" not in message


def test_loadtest_is_one_gang_of_server_and_client_and_every_manifest_passes_the_crd(job_schema) -> None:
    context = JobContext(workflow=WF, workspace="/workspace", image="img:1", queue="serving")
    loadtest = build_loadtest_job(context, model_uri="/m", slo_ttft_ms=500, slo_tpot_ms=50)
    assert [t.name for t in loadtest.spec.tasks] == ["server", "client"]
    assert loadtest.spec.min_available == 2 and loadtest.spec.queue == "serving"
    args = loadtest.spec.tasks[1].template.spec.containers[0].args or []
    assert "--slo-ttft-ms" in args and args[args.index("--requests") + 1] == "20"
    longer = build_loadtest_job(context, model_uri="/m", slo_ttft_ms=500, slo_tpot_ms=50, requests=400)
    longer_args = longer.spec.tasks[1].template.spec.containers[0].args or []
    assert longer_args[longer_args.index("--requests") + 1] == "400", "the loadtest-requests parameter reaches it"
    evaluate = build_evaluate_job(context, model_uri="/m", base_model="b", registered_model="r", eval_set="/e.jsonl")
    detect = build_detect_job(context, log_source="/logs")
    for step, job in (("loadtest", loadtest), ("evaluate", evaluate), ("detect", detect)):
        assert crd_errors(job_schema, job.to_dict()) == []
        validate_job(job)
        assert job.metadata.name == f"{WF}-{step}"
        assert job.metadata.labels == {WORKFLOW_LABEL: WF, STEP_LABEL: step}
        assert job.spec.scheduler_name == "volcano" and job.spec.max_retry == 3 and job.spec.min_available


def test_long_workflow_names_give_stable_job_names_that_leave_room_for_pods() -> None:
    long = "llm-autopilot-nightly-with-a-very-long-suffix-1712345678"
    name = job_name(long, "train-12")
    assert len(name) <= 45 and name.endswith("-train-12") and name == job_name(long, "train-12")
    assert job_name(WF, "detect") == f"{WF}-detect"


# ---- gate, diagnose, release -----------------------------------------------------------------------------


def test_gate_force_trains_dry_run_reports_and_auto_follows_the_drift() -> None:
    drift = DetectReport(drift=True, reason="template 17 doubled")
    assert decide_gate("force", None).trigger is True
    dry = decide_gate("dry-run", drift)
    assert dry.trigger is False and "would fine-tune" in dry.reason and "template 17 doubled" in dry.reason
    assert decide_gate("auto", drift).trigger is True
    assert decide_gate("auto", DetectReport(drift=False)).trigger is False


def test_gate_step_reads_the_report_and_says_when_it_is_missing(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"drift": True, "reason": "new error template"}))
    gate = steps.gate(steps.GateInput(mode="auto", report=str(report)))
    assert gate.trigger is True and gate.result.startswith("trigger=true")
    with pytest.raises(SystemExit, match=r"^gate: the detect report .* does not exist"):
        steps.gate(steps.GateInput(mode="auto", report=str(tmp_path / "none.json")))


def test_release_needs_the_slos_and_a_margin_over_the_champion() -> None:
    fast = LoadtestReport(ttft_p95_ms=300, tpot_p95_ms=30)
    better = EvaluationReport(candidate_score=0.82, champion_score=0.80)

    def decide(loadtest: LoadtestReport, evaluation: EvaluationReport, margin: float = 0.01) -> Any:
        return decide_release(loadtest, evaluation, slo_ttft_ms=500, slo_tpot_ms=50, margin=margin)

    assert decide(fast, better).released is True
    assert decide(fast, better, margin=0.05).released is False
    slow = decide(LoadtestReport(ttft_p95_ms=900, tpot_p95_ms=30), better)
    assert slow.released is False and "TTFT 900 ms is over its SLO of 500 ms" in slow.reason
    assert decide(fast, EvaluationReport(candidate_score=0.1)).released is True


def test_finalize_writes_the_summary_and_leaves_jobs_of_a_successful_run(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("VCPILOT_HOME", str(tmp_path / "cluster"))
    inputs = steps.FinalizeInput(workflow_name=WF, workspace=str(tmp_path), workflow_status="Succeeded")
    assert steps.finalize(inputs).deleted_jobs == []
    summary = json.loads((tmp_path / "runs" / WF / "summary.json").read_text())
    assert summary["status"] == "Succeeded"


def test_cleanup_deletes_exactly_the_workflows_jobs() -> None:
    class Jobs:
        def __init__(self) -> None:
            self.jobs = {"a": {WORKFLOW_LABEL: WF}, "b": {WORKFLOW_LABEL: WF}, "c": {WORKFLOW_LABEL: "other"}}
            self.namespaces: list[str | None] = []

        def list_jobs(self, labels: dict[str, str], namespace: str | None = None) -> list[JobInfo]:
            self.namespaces.append(namespace)
            chosen = [n for n, have in self.jobs.items() if labels.items() <= have.items()]
            return [JobInfo(name=n, uid=n, queue="q", phase="Failed", min_available=1) for n in chosen]

        def delete(self, name: str, namespace: str, *, missing_ok: bool) -> None:
            del self.jobs[name]

    cluster = Jobs()
    assert steps.delete_workflow_jobs(cluster, WF, "ml") == ["a", "b"]  # type: ignore[arg-type]
    assert list(cluster.jobs) == ["c"]
    assert cluster.namespaces == ["ml"]  # never cluster-wide: the workflow's service account may not


# ---- submit ----------------------------------------------------------------------------------------------


class ArgoServer(HTTPServer):
    """Answers the create-workflow call like the Argo Server does, and remembers what it was sent."""

    def __init__(self, status: int = 200, answer: dict[str, Any] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status = status
        self.answer = answer or {"metadata": {"name": "llm-autopilot-abcde", "namespace": "argo"}, "spec": {}}
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


class _Handler(BaseHTTPRequestHandler):
    server: ArgoServer

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, dict(self.headers), body))
        payload = json.dumps(self.server.answer).encode()
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def argo() -> Iterator[ArgoServer]:
    server = ArgoServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_submit_creates_a_run_of_the_template_and_returns_its_link(argo: ArgoServer) -> None:
    name, link = submit(argo.url + "/", "argo", "s3cret", {"mode": "force", "gpus-wanted": "8"}, {})
    assert (name, link) == ("llm-autopilot-abcde", f"{argo.url}/workflows/argo/llm-autopilot-abcde")
    ((path, headers, body),) = argo.requests
    assert path == "/api/v1/workflows/argo"
    assert headers["Authorization"] == "Bearer s3cret"
    workflow = body["workflow"]
    assert workflow["metadata"] == {
        "generateName": "llm-autopilot-",
        "namespace": "argo",
        "labels": {"vcpilot.io/trigger": "cli"},  # the MLflow run says how it started
    }
    assert workflow["spec"]["workflowTemplateRef"] == {"name": "llm-autopilot"}
    assert workflow["spec"]["arguments"]["parameters"] == [
        {"name": "mode", "value": "force"},
        {"name": "gpus-wanted", "value": "8"},
    ]


def test_submit_reads_argo_server_as_the_argo_cli_does_host_port_with_argo_secure(argo: ArgoServer) -> None:
    address = f"127.0.0.1:{argo.server_port}"  # ARGO_SERVER as every argo user sets it: no scheme
    name, link = submit(address, "argo", "", {}, {"ARGO_SECURE": "false"})
    assert link == f"http://{address}/workflows/argo/{name}" and len(argo.requests) == 1
    with pytest.raises(SubmitError) as caught:  # https by default, as the argo CLI: this server has no TLS
        submit(address, "argo", "", {}, {})
    assert str(caught.value) == (
        f"the Argo Server at https://{address} did not answer in TLS; if it serves plain http (argo server "
        "--secure=false), set ARGO_SECURE=false or give an http:// address"
    )
    assert len(argo.requests) == 1


def test_submit_to_a_self_signed_argo_server_needs_argo_insecure_skip_verify(tmp_path: Path) -> None:
    # The Argo Server's default: https with a certificate it made itself.
    server = ArgoServer()
    server.socket = _self_signed(tmp_path).wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_port}"
    try:
        with pytest.raises(SubmitError) as caught:
            submit(address, "argo", "", {}, {})
        assert str(caught.value).startswith(f"the Argo Server at https://{address} has a certificate this machine does")
        assert str(caught.value).endswith(
            "set ARGO_INSECURE_SKIP_VERIFY=true for the self-signed one it makes by default"
        )
        assert server.requests == []
        with warnings.catch_warnings(record=True) as seen:  # asked for: no warning of each request on stderr
            warnings.simplefilter("always")
            name, link = submit(address, "argo", "", {}, {"ARGO_INSECURE_SKIP_VERIFY": "true"})
        assert [str(w.message) for w in seen] == []
        assert link == f"https://{address}/workflows/argo/{name}" and len(server.requests) == 1
    finally:
        server.shutdown()
        server.server_close()


def _self_signed(tmp_path: Path) -> ssl.SSLContext:
    """A server TLS context with a certificate for 127.0.0.1 that no authority signed."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "argo-server")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    pem = tmp_path / "server.pem"
    pem.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pem)
    return context


def test_submit_explains_a_refused_token_and_a_missing_template(argo: ArgoServer) -> None:
    argo.status, argo.answer = 401, {"code": 16, "message": "token not valid"}
    with pytest.raises(SubmitError, match="refused the token for namespace argo"):
        submit(argo.url, "argo", "bad", {}, {})
    argo.status, argo.answer = 404, {"code": 5, "message": 'workflowtemplates "llm-autopilot" not found'}
    with pytest.raises(SubmitError, match=r"has no WorkflowTemplate llm-autopilot in namespace argo; install it"):
        submit(argo.url, "argo", "", {}, {})


def test_submit_to_an_unreachable_server_is_one_sentence() -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(SubmitError) as caught:
        submit(f"http://127.0.0.1:{port}", "argo", "t", {}, {})
    message = str(caught.value)
    assert message.startswith(f"cannot reach the Argo Server at http://127.0.0.1:{port}") and "\n" not in message
    assert caught.value.exit_code == EXIT_UNAVAILABLE  # 3, as every service a command cannot reach (was 1)


def test_submit_checks_parameters_before_sending(argo: ArgoServer) -> None:
    with pytest.raises(SubmitError, match="'mdoe' is not a parameter of llm-autopilot; did you mean mode?"):
        submit(argo.url, "argo", "t", {"mdoe": "force"}, {})
    with pytest.raises(SubmitError, match="parameter mode is 'often' but must be one of auto, force, dry-run"):
        submit(argo.url, "argo", "t", {"mode": "often"}, {})
    with pytest.raises(SubmitError, match="'https://argo example' has a host, 'argo example', that is not a host name"):
        submit("argo example", "argo", "t", {}, {})
    with pytest.raises(SubmitError, match="ARGO_SECURE=maybe is neither true nor false"):
        submit("argo:2746", "argo", "t", {}, {"ARGO_SECURE": "maybe"})
    with pytest.raises(SubmitError, match="has a port that is not a number from 1 to 65535"):
        submit("http://127.0.0.1:99999", "argo", "t", {}, {})  # was "cannot reach … (InvalidURL)", exit 3
    assert argo.requests == []
    assert {p.name for p in PARAMETERS} >= {"mode"}


def test_compiled_yaml_passes_vcpilot_lint(shared_dir):
    from pipelines.lint import lint_files

    deploy = Path(__file__).resolve().parents[2] / "deploy" / "argo"
    schema = shared_dir / "schemas" / "argo-v4.1.2" / "schema.json"
    assert lint_files(sorted(deploy.glob("*.yaml")), schema_path=schema) == []
