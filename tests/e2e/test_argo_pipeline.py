"""The llm-autopilot WorkflowTemplate on the real Argo Workflows v4.1.2 controller, with its steps as real pods.

Submitted the ways people submit it — the UI's REST calls, `argo submit`, `vcpilot submit`, a CronWorkflow — into
vcpilot installed as `kubectl apply -k deploy/` installs it (deploy/e2e/install.py, the `deployment` fixture).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from deployment_kit import Deployment, GangWatcher, broken_model, dump, leaf_nodes, outputs, submit_from_template

from components.tracking.runs import WORKFLOW_TAG
from pipelines.parameters import PARAMETERS

pytestmark = [pytest.mark.e2e, pytest.mark.real_pods]

TEMPLATE = "llm-autopilot"


def submit(deployment: Deployment, **params: str) -> str:
    """What the UI's Submit button calls: POST /api/v1/workflows/{ns}/submit; the new workflow's name."""
    answer = deployment.rest(
        "POST",
        f"/api/v1/workflows/{deployment.namespace}/submit",
        {
            "resourceKind": "WorkflowTemplate",
            "resourceName": TEMPLATE,
            "submitOptions": {"parameters": [f"{k}={v}" for k, v in params.items()]},
        },
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["metadata"]["name"])


def test_the_submit_form_gets_every_parameter_with_its_enum_and_description(deployment: Deployment) -> None:
    answer = deployment.rest("GET", f"/api/v1/workflow-templates/{deployment.namespace}/{TEMPLATE}")
    assert answer.status_code == 200, answer.text
    served = {p["name"]: p for p in answer.json()["spec"]["arguments"]["parameters"]}
    assert list(served) == [p.name for p in PARAMETERS]
    for declared in PARAMETERS:
        form = served[declared.name or ""]
        assert form.get("description") == declared.description, declared.name
        assert form.get("enum") == declared.enum, declared.name
        if declared.enum:
            assert form["value"] in declared.enum, f"{declared.name}'s default is one of its choices"


def test_a_value_outside_an_enum_is_accepted_by_argo_and_refused_by_the_first_step(deployment: Deployment) -> None:
    # Real Argo v4.1.2 holds a submission from a template to no enum (the UI's dropdown is the only guard): the
    # server answers 200 and the controller runs it. The template's first step refuses it before anything runs.
    name = submit(deployment, mode="bogus")
    wf = deployment.wait(name, timeout=180)
    nodes = leaf_nodes(wf)
    assert wf["status"]["phase"] == "Failed", dump(wf)
    assert set(nodes) == {"check-parameters"}, "nothing but the check ran"
    assert "parameter mode is 'bogus'; choose one of auto, force, dry-run" in nodes["check-parameters"]["message"]
    assert deployment.volcano_leftovers(name) == []
    assert not (deployment.workspace / "runs" / name / "detect").exists(), "detect-logs never ran"


def test_force_from_the_ui_runs_every_heavy_step_as_a_gang_of_real_pods_and_releases_like_the_local_runner(
    deployment: Deployment, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    from pipelines.autopilot_run import run_autopilot

    # The same inputs as the local run below: the champion is the first one, which `vcpilot demo seed` registered.
    registry = MlflowClient(deployment.mlflow_uri)
    registry.set_registered_model_alias("shop-assistant", "champion", "1")
    name = submit(deployment, mode="force")
    with GangWatcher(deployment, name) as gangs:
        wf = deployment.wait(name, timeout=900)
    assert wf["status"]["phase"] == "Succeeded", dump(wf)
    nodes = leaf_nodes(wf)

    # Each heavy step ran as a Volcano gang: a PodGroup of all its pods, every one scheduled by Volcano onto a
    # real node, and run.
    ran = gangs.jobs()
    assert {job.rsplit("-", 1)[-1] if not job.endswith("-1") else "train" for job in ran} >= {
        "detect", "train", "loadtest", "evaluate"
    }  # fmt: skip
    for job, pods in ran.items():
        assert gangs.groups.get(job) == len(pods), f"{job}: PodGroup minMember {gangs.groups.get(job)}, {pods}"
        assert all(p["scheduler"] == "volcano" and p["node"].startswith("real-node-") and p.get("ran") for p in pods)
    loadtest = next(pods for job, pods in ran.items() if job.endswith("-loadtest"))
    assert len(loadtest) == 2, "server and client in one gang"

    # The release moved the champion alias to this run's model, in the in-cluster MLflow.
    assert outputs(nodes["release"])["released"] == "true", outputs(nodes["release"])
    champion = registry.get_model_version_by_alias("shop-assistant", "champion")
    assert champion.tags.get(WORKFLOW_TAG) == name, champion.tags
    # A succeeded run keeps its Completed VCJobs for review (they go with the workflow, their owner).

    # The local runner, given the same inputs, decides the same and names the same model.
    local = run_autopilot("drift", {"mode": "force"}, home=tmp_path, name=name)
    assert local.phase == "Succeeded"
    mine = {k: n for k, n in leaf_nodes({"metadata": {"name": name}, "status": local.status}).items()}
    assert {k: n["phase"] for k, n in mine.items()} == {k: n["phase"] for k, n in nodes.items()}
    decision = ("action", "gpus", "micro-batch", "grad-accum")
    real_plan, local_plan = outputs(nodes["finetune.plan"]), outputs(mine["finetune.plan"])
    assert {k: real_plan[k] for k in decision} == {k: local_plan[k] for k in decision}
    assert _in_workspace(real_plan["model-uri"], "/workspace") == _in_workspace(
        local_plan["model-uri"], str(tmp_path / "workspace")
    )
    assert outputs(nodes["gate"]) == outputs(mine["gate"])
    assert outputs(mine["release"])["released"] == "true"


def _in_workspace(path: str, workspace: str) -> str:
    return str(Path(path).relative_to(workspace))


def test_a_bug_every_rank_hits_fails_the_workflow_with_the_agents_reason_and_leaves_no_volcano_job(
    deployment: Deployment,
) -> None:
    name = deployment.argo(
        "submit", "--from", f"workflowtemplate/{TEMPLATE}", "-p", "mode=force",
        "-p", f"base-model={broken_model(deployment.workspace)}", "-o", "name",
    ).stdout.strip()  # fmt: skip
    wf = deployment.wait(name, timeout=900)
    assert wf["status"]["phase"] == "Failed", dump(wf)
    nodes = leaf_nodes(wf)
    diagnoses = [outputs(n) for k, n in sorted(nodes.items()) if k.endswith("diagnose")]
    assert [d["action"] for d in diagnoses] == ["retry", "abort"], diagnoses
    give_up = next(n for k, n in nodes.items() if k.endswith("give-up"))
    # Real Argo leaves a failed DAG workflow's own message empty; the reason is on the failing node, as the
    # container's termination message: what `argo get` and the UI show beside it.
    assert diagnoses[-1]["reason"] in give_up["message"], give_up["message"]
    shown = deployment.argo("get", name).stdout
    assert "giving up:" in shown
    assert deployment.volcano_leftovers(name) == []


def _wait_training(deployment: Deployment, name: str, timeout: float = 300) -> None:
    """Until the first training attempt's pods run and it has written a checkpoint."""
    checkpoints = deployment.workspace / "runs" / name / "checkpoints"
    deadline = time.monotonic() + timeout
    while not any(checkpoints.glob("step-*/metadata.json")):
        wf = deployment.workflow(name)
        assert wf.get("status", {}).get("phase") not in {"Succeeded", "Failed", "Error"}, dump(wf)
        assert time.monotonic() < deadline, f"{name} wrote no checkpoint in {timeout}s"
        time.sleep(0.5)


def _ends_cleanly(deployment: Deployment, name: str, how: str) -> None:
    """`argo stop` or `argo terminate` the running workflow `name`: it ends Failed or Error, leaves no Volcano job
    behind, and its MLflow parent run ends KILLED or FAILED."""
    from mlflow.tracking import MlflowClient

    deployment.argo(how, name)
    wf = deployment.wait(name, timeout=300)
    assert wf["status"]["phase"] in {"Failed", "Error"}, dump(wf)
    deadline = time.monotonic() + 120
    while deployment.volcano_leftovers(name) and time.monotonic() < deadline:
        time.sleep(1)
    assert deployment.volcano_leftovers(name) == []
    client = MlflowClient(deployment.mlflow_uri)
    experiment = client.get_experiment_by_name("llm-autopilot")
    assert experiment is not None
    deadline = time.monotonic() + 60
    while True:
        parents = client.search_runs([experiment.experiment_id], f"tags.`{WORKFLOW_TAG}` = '{name}'")
        if parents and parents[0].info.status != "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert parents and parents[0].info.status in {"KILLED", "FAILED"}, [p.info for p in parents]


def test_terminating_a_workflow_mid_training_leaves_no_volcano_job_and_ends_its_mlflow_run(
    deployment: Deployment,
) -> None:
    # `argo stop` is the one-minute schedule's test below: its run is stopped mid-training the same way.
    name = deployment.argo(
        "submit", "--from", f"workflowtemplate/{TEMPLATE}", "-p", "mode=force", "-p", "train-max-steps=3000",
        "-o", "name",
    ).stdout.strip()  # fmt: skip
    _wait_training(deployment, name)
    _ends_cleanly(deployment, name, "terminate")


def _cron_children(deployment: Deployment, cron: str) -> list[dict[str, Any]]:
    return deployment.workflows(f"workflows.argoproj.io/cron-workflow={cron}")


def test_the_nightly_cron_workflow_submitted_by_hand_runs_once(deployment: Deployment) -> None:
    name = deployment.argo(
        "submit", "--from", "cronwf/llm-autopilot-nightly", "-p", "mode=dry-run", "-o", "name"
    ).stdout.strip()
    wf = deployment.wait(name, timeout=300)
    assert wf["status"]["phase"] == "Succeeded", dump(wf)
    assert set(leaf_nodes(wf)) == {"check-parameters", "detect-logs.plan", "detect-logs.run", "gate"}
    assert outputs(leaf_nodes(wf)["gate"])["trigger"] == "false"


def test_vcpilot_submit_reads_the_argo_clis_environment_and_the_run_succeeds(deployment: Deployment) -> None:
    # The argo CLI's own variables, as `up.sh --print-env` exports them: ARGO_SERVER is host:port, ARGO_SECURE and
    # ARGO_INSECURE_SKIP_VERIFY say https with the server's self-signed certificate, an empty ARGO_TOKEN no token.
    # `vcpilot submit` took only a URL, and refused the ARGO_SERVER every argo user has set.
    assert "://" not in deployment.argo_env["ARGO_SERVER"]
    env = {**os.environ, **deployment.argo_env, "ARGO_NAMESPACE": deployment.namespace}
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "submit", "-p", "mode=dry-run", "--json"],
        cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["url"] == f"https://{deployment.argo_server}/workflows/{deployment.namespace}/{answer['name']}"
    wf = deployment.wait(answer["name"], timeout=300)
    assert wf["status"]["phase"] == "Succeeded", dump(wf)
    assert wf["metadata"]["labels"]["vcpilot.io/trigger"] == "cli"
    assert outputs(leaf_nodes(wf)["gate"])["trigger"] == "false"


def test_a_one_minute_schedule_fires_once_forbid_holds_and_argo_stop_ends_the_run_cleanly(
    deployment: Deployment,
) -> None:
    nightly = deployment.custom().get_namespaced_custom_object(
        "argoproj.io", "v1alpha1", deployment.namespace, "cronworkflows", "llm-autopilot-nightly"
    )
    cron = "llm-autopilot-every-minute"
    body = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": cron},
        "spec": {
            **nightly["spec"],
            "schedules": ["* * * * *"],
            "workflowSpec": {
                **nightly["spec"]["workflowSpec"],
                # Long enough to span the next minute's tick, which Forbid must skip.
                "arguments": {
                    "parameters": [{"name": "mode", "value": "force"}, {"name": "train-max-steps", "value": "3000"}]
                },
            },
        },
    }
    assert body["spec"]["concurrencyPolicy"] == "Forbid"
    deployment.custom().create_namespaced_custom_object(
        "argoproj.io", "v1alpha1", deployment.namespace, "cronworkflows", body
    )
    try:
        deadline = time.monotonic() + 90
        while not _cron_children(deployment, cron):
            assert time.monotonic() < deadline, "the one-minute schedule never fired"
            time.sleep(1)
        (first,) = _cron_children(deployment, cron)
        _wait_training(deployment, first["metadata"]["name"])
        time.sleep(75)  # at least one more tick passes while the first still runs
        children = _cron_children(deployment, cron)
        assert [c["metadata"]["name"] for c in children] == [first["metadata"]["name"]], "Forbid let a second run start"
        assert deployment.workflow(first["metadata"]["name"])["status"]["phase"] == "Running"
        # Suspended, not deleted: its children go with it (ownerReferences), and no tick may start another.
        deployment.custom().patch_namespaced_custom_object(
            "argoproj.io", "v1alpha1", deployment.namespace, "cronworkflows", cron, {"spec": {"suspend": True}}
        )
        _ends_cleanly(deployment, first["metadata"]["name"], "stop")
    finally:
        deployment.custom().delete_namespaced_custom_object(
            "argoproj.io", "v1alpha1", deployment.namespace, "cronworkflows", cron
        )
        for child in _cron_children(deployment, cron):
            deployment.argo("stop", child["metadata"]["name"], check=False)


def test_a_node_dying_mid_training_is_recovered_through_diagnose_and_recurse(
    deployment: Deployment, kill_node: Any
) -> None:
    # Four GPUs: a rank on each node. Argo's own pods and MLflow stay on the first node (a real cluster keeps them
    # off its GPU nodes too), so the node that dies takes training ranks only.
    services = "real-node-0"
    name = submit_from_template(
        deployment,
        {"mode": "force", "gpus-wanted": "4", "global-batch": "16", "cpu-per-gpu": "400m", "train-max-steps": "400"},
        nodeSelector={"kubernetes.io/hostname": services},
    )
    _wait_training(deployment, name)
    from kubernetes import client

    pods = (
        client.CoreV1Api(deployment.admin)
        .list_namespaced_pod(deployment.namespace, label_selector=f"volcano.sh/job-name={name}-train-1")
        .items
    )
    dead = next(p.spec.node_name for p in pods if p.spec.node_name != services)
    kill_node(dead)
    wf = deployment.wait(name, timeout=900)
    assert wf["status"]["phase"] == "Succeeded", dump(wf)
    nodes = leaf_nodes(wf)
    (diagnosis,) = [outputs(n) for k, n in nodes.items() if k.endswith("diagnose")]
    assert diagnosis["action"] == "retry" and dead in diagnosis["avoid-nodes"], diagnosis
    assert diagnosis["resume-checkpoint"], "the retry resumes from the latest checkpoint"
    retried = outputs(nodes["finetune.recurse.plan"])
    assert retried["gpus"] == "2" and retried["grad-accum"] == "2", "downscaled onto the live node, batch kept"
    assert nodes["finetune.recurse.train"]["phase"] == "Succeeded"


def test_a_parameter_file_reads_as_argo_submit_reads_it(deployment: Deployment, tmp_path: Path) -> None:
    # `argo submit -f FILE` (workflow/util.ReadParametersFile): a string as it is, any other value Go's JSON of it.
    # The server's dry run answers with the arguments it would run; `vcpilot run-workflow -f` must read the same.
    from pipelines.local.cli import workflow_params

    names = ["text", "small", "spelt", "flag", "object", "nothing", "long"]
    workflow = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "parameter-file-"},
        "spec": {
            "entrypoint": "main",
            "arguments": {"parameters": [{"name": name, "value": "unset"} for name in names]},
            "templates": [{"name": "main", "container": {"image": "busybox", "command": ["true"]}}],
        },
    }
    (tmp_path / "wf.yaml").write_text(json.dumps(workflow))
    (tmp_path / "params.yaml").write_text(
        "text: 'say \"hi\" <&>'\nsmall: 1e-7\nspelt: 2.50\nflag: y\nobject: {b: 1, a: [x, 0.5]}\nnothing: null\n"
        "long: 12345678901234567\n"
    )
    done = deployment.argo(
        "submit", str(tmp_path / "wf.yaml"), "-f", str(tmp_path / "params.yaml"), "--dry-run", "-o", "json"
    )
    served = {p["name"]: p["value"] for p in json.loads(done.stdout)["spec"]["arguments"]["parameters"]}
    assert served == workflow_params(None, tmp_path / "params.yaml")
    assert served["small"] == "1e-7" and served["object"] == '{"a":["x",0.5],"b":1}'


def test_an_entrypoint_given_at_submit_takes_its_inputs_from_p_as_on_argo(
    deployment: Deployment, shared_dir: Path
) -> None:
    # `argo submit --entrypoint T -p NAME=VALUE`: a name the arguments lack is added to them (overrideParameters),
    # and they supply T's inputs. The server validates a dry run as a submission; without the value it refuses.
    from pipelines.local.workflow import WorkflowError, load_workflow

    steps = shared_dir / "argo-examples" / "steps.yaml"
    done = deployment.argo(
        "submit", str(steps), "--entrypoint", "print-message", "-p", "message=hi", "--dry-run", "-o", "json"
    )
    served = json.loads(done.stdout)["spec"]
    ours = load_workflow(steps, {"message": "hi"}, entrypoint="print-message").spec
    assert served["entrypoint"] == ours["entrypoint"] == "print-message"
    assert served["arguments"]["parameters"] == ours["arguments"]["parameters"] == [{"name": "message", "value": "hi"}]
    refused = deployment.argo(
        "submit", str(steps), "--entrypoint", "print-message", "--dry-run", "-o", "json", check=False
    )
    assert refused.returncode != 0 and "message" in refused.stderr, refused.stderr
    with pytest.raises(WorkflowError, match="no value for input parameter 'message'"):
        load_workflow(steps, {}, entrypoint="print-message")


def test_a_parameters_number_reads_as_argos_anystring_writes_it(deployment: Deployment, tmp_path: Path) -> None:
    # A value, default or enum item written as a number: `argo submit` reads the file into Argo's types, whose
    # AnyString writes the float64 without an exponent (1e-7 is 0.0000001). The API server's own CRD schema takes
    # only strings there (`kubectl create` of the same file is refused, 422), so this goes through the argo CLI.
    from pipelines.local.workflow import load_workflow, stringify

    text = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: anystring-}
spec:
  entrypoint: main
  arguments:
    parameters:
    - {name: small, value: 1e-7}
    - {name: large, value: 1e21}
    - {name: long, value: 12345678901234567}
    - {name: plain, value: 5e-5, enum: [5e-5, 1, 2.50]}
  templates:
  - name: main
    inputs:
      parameters:
      - {name: small, default: -2.5e-8}
    container: {image: busybox, command: ["true"]}
"""
    (tmp_path / "wf.yaml").write_text(text)
    done = deployment.argo("submit", str(tmp_path / "wf.yaml"), "--dry-run", "-o", "json")
    served = json.loads(done.stdout)["spec"]
    ours = load_workflow(tmp_path / "wf.yaml").spec
    values = [p["value"] for p in served["arguments"]["parameters"]]
    assert values == [p["value"] for p in ours["arguments"]["parameters"]]
    assert values == ["0.0000001", "1000000000000000000000", "12345678901234568", "0.00005"]
    assert served["arguments"]["parameters"][3]["enum"] == [
        stringify(item) for item in ours["arguments"]["parameters"][3]["enum"]
    ]  # what the runner holds a value to
    (default,) = served["templates"][0]["inputs"]["parameters"]
    assert default["default"] == stringify(ours["templates"][0]["inputs"]["parameters"][0]["default"])
