"""Volumes as a pod would see them: claims and emptyDirs are directories under VCPILOT_HOME, never the host's /mnt."""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from pipelines.local.runner import run_workflow
from pipelines.local.workflow import WorkflowError

pytestmark = pytest.mark.integration

# Argo's examples/volumes-pvc.yaml, its images as they are (the runner ignores them).
VOLUMES_PVC = """
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: volumes-pvc-}
spec:
  entrypoint: main
  volumeClaimTemplates:
  - metadata: {name: workdir}
    spec: {accessModes: ["ReadWriteOnce"], resources: {requests: {storage: 1Gi}}}
  templates:
  - name: main
    steps:
    - - {name: generate, template: write}
    - - {name: print, template: read}
  - name: write
    container:
      image: busybox
      command: [sh, -c]
      args: ["echo hello world | tee /mnt/vol/hello_world.txt"]
      volumeMounts: [{name: workdir, mountPath: /mnt/vol}]
  - name: read
    container:
      image: alpine:3.23
      command: [sh, -c]
      args: ["cat /mnt/vol/hello_world.txt"]
      volumeMounts: [{name: workdir, mountPath: /mnt/vol}]
"""


def workflow(templates: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "vol-"},
        "spec": {"entrypoint": "main", "templates": templates, **spec},
    }


def steps(*names: str) -> dict[str, Any]:
    """A steps template `main` running the templates `names` one after the other."""
    return {"name": "main", "steps": [[{"name": name, "template": name}] for name in names]}


def sh(name: str, script: str, mounts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    container = {"image": "alpine", "command": ["sh", "-c", script], "volumeMounts": mounts}
    return {"name": name, "container": container, **extra}


def claim_template(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"]}}


def test_the_upstream_volumes_pvc_example_shares_its_claim_between_steps(run, home: Path) -> None:
    ran = run(VOLUMES_PVC)
    assert ran.phase == "Succeeded"
    print_dir = ran.result.node_dir(ran.nodes["[1].print"]["id"])
    assert (print_dir / "main.log").read_text() == "hello world\n"
    assert (home / "runs" / ran.name / "volumes" / "workdir" / "hello_world.txt").read_text() == "hello world\n"


def test_nothing_is_written_outside_vcpilot_home(run, home: Path) -> None:
    outside = Path(f"/mnt/vcpilot-test-{uuid.uuid4().hex[:8]}")
    try:
        mounts = [{"name": "work", "mountPath": str(outside)}]
        wf = workflow([sh("main", f"mkdir -p {outside}/a && echo x > {outside}/a/f", mounts)])
        wf["spec"]["volumeClaimTemplates"] = [claim_template("work")]
        ran = run(wf)
        assert ran.phase == "Succeeded"
        assert not outside.exists()
        assert (home / "runs" / ran.name / "volumes" / "work" / "a" / "f").read_text() == "x\n"
    finally:
        shutil.rmtree(outside, ignore_errors=True)  # what the runner wrote there before volumes moved


def test_an_empty_dir_is_each_pods_own(run) -> None:
    mounts = [{"name": "scratch", "mountPath": "/mnt/scratch"}]
    first = sh("first", "echo one > /mnt/scratch/f", mounts)
    second = sh("second", "test ! -e /mnt/scratch/f && echo two > /mnt/scratch/f && cat /mnt/scratch/f", mounts)
    ran = run(workflow([steps("first", "second"), first, second], volumes=[{"name": "scratch", "emptyDir": {}}]))
    assert ran.phase == "Succeeded"
    assert ran.out("[1].second") == "two"
    first_dir = ran.result.node_dir(ran.nodes["[0].first"]["id"])
    assert (first_dir / ".volumes" / "scratch" / "f").read_text() == "one\n"


def test_the_containers_of_a_container_set_share_an_empty_dir(run) -> None:
    def container(name: str, script: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "image": "alpine", "command": ["sh", "-c", script], **extra}

    pod = {
        "name": "main",
        "volumes": [{"name": "work", "emptyDir": {}}],
        "containerSet": {
            "volumeMounts": [{"name": "work", "mountPath": "/mnt/work"}],
            "containers": [
                container("a", "echo from a > /mnt/work/a.txt"),
                container("main", "cat /mnt/work/a.txt", dependencies=["a"]),
            ],
        },
    }
    ran = run(workflow([pod]))
    assert ran.phase == "Succeeded"
    assert ran.out("") == "from a"
    assert (ran.result.node_dir(ran.nodes[""]["id"]) / ".volumes" / "work" / "a.txt").is_file()


def test_an_existing_claim_outlives_the_run(run, home: Path) -> None:
    mounts = [{"name": "data", "mountPath": "/mnt/data"}]
    claim = [{"name": "data", "persistentVolumeClaim": {"claimName": "my-existing-volume"}}]
    wf = workflow([sh("main", "echo run >> /mnt/data/log && wc -l < /mnt/data/log", mounts)], volumes=claim)
    assert run(wf).out("") == "1"
    assert run(wf).out("") == "2"
    assert (home / "claims" / "my-existing-volume" / "log").read_text() == "run\nrun\n"


def test_a_sub_path_is_a_directory_in_the_volume(run, home: Path) -> None:
    write = sh("write", "echo deep > /mnt/sub/f", [{"name": "work", "mountPath": "/mnt/sub", "subPath": "a/b"}])
    read = sh("read", "cat /mnt/whole/a/b/f", [{"name": "work", "mountPath": "/mnt/whole"}])
    ran = run(workflow([steps("write", "read"), write, read], volumeClaimTemplates=[claim_template("work")]))
    assert ran.phase == "Succeeded"
    assert ran.out("[1].read") == "deep"
    assert (home / "runs" / ran.name / "volumes" / "work" / "a" / "b" / "f").is_file()


def test_outputs_read_from_a_claim_are_what_it_held_when_the_step_ended(run) -> None:
    mounts = [{"name": "work", "mountPath": "/mnt/vol"}]
    outputs = {
        "parameters": [{"name": "said", "valueFrom": {"path": "/mnt/vol/out.txt"}}],
        "artifacts": [{"name": "said", "path": "/mnt/vol/out.txt"}],
    }
    make = sh("make", "echo one > /mnt/vol/out.txt", mounts, outputs=outputs)
    change = sh("change", "echo two > /mnt/vol/out.txt", mounts)
    use = {
        "name": "use",
        "inputs": {"artifacts": [{"name": "said", "path": "/tmp/in.txt"}]},
        "container": {"image": "alpine", "command": ["cat", "/tmp/in.txt"]},
    }
    main = {
        "name": "main",
        "steps": [
            [{"name": "make", "template": "make"}],
            [{"name": "change", "template": "change"}],
            [{"name": "use", "template": "use", "arguments": {"artifacts": [
                {"name": "said", "from": "{{steps.make.outputs.artifacts.said}}"},
            ]}}],
        ],
    }  # fmt: skip
    ran = run(workflow([main, make, change, use], volumeClaimTemplates=[claim_template("work")]))
    assert ran.phase == "Succeeded"
    assert ran.param("[0].make", "said") == "one"
    assert ran.out("[2].use") == "one"
    artifact = ran.nodes["[0].make"]["outputs"]["artifacts"][0]
    assert artifact["path"] == "/mnt/vol/out.txt"


def test_a_mount_at_a_templated_path_stays_the_host_path(run, tmp_path: Path) -> None:
    """Our pipeline's workspace: claim and mountPath from parameters, a host directory local runs rely on."""
    host = tmp_path / "workspace"
    host.mkdir()
    mounts = [{"name": "workspace", "mountPath": "{{workflow.parameters.workspace}}"}]
    volume = {"name": "workspace", "persistentVolumeClaim": {"claimName": "{{workflow.parameters.workspace-pvc}}"}}
    wf = workflow([sh("main", "echo kept > {{workflow.parameters.workspace}}/f", mounts)], volumes=[volume])
    wf["spec"]["arguments"] = {
        "parameters": [{"name": "workspace", "value": str(host)}, {"name": "workspace-pvc", "value": "ws"}]
    }
    ran = run(wf)
    assert ran.phase == "Succeeded"
    assert (host / "f").read_text() == "kept\n"


def claim(name: str = "work", **mount: Any) -> dict[str, Any]:
    """A workflow whose one step mounts the claim template `work` at /mnt/w, `mount` added to the mount."""
    wf = workflow([sh("main", "true", [{"name": name, "mountPath": "/mnt/w", **mount}])])
    wf["spec"]["volumeClaimTemplates"] = [claim_template("work")]
    return wf


def existing(claim_name: str) -> dict[str, Any]:
    volume = {"name": "work", "persistentVolumeClaim": {"claimName": claim_name}}
    return workflow([sh("main", "true", [{"name": "work", "mountPath": "/mnt/w"}])], volumes=[volume])


def renamed(name: str) -> dict[str, Any]:
    wf = claim(name)
    wf["spec"]["volumeClaimTemplates"] = [claim_template(name)]
    return wf


def host_artifact() -> dict[str, Any]:
    wf = workflow([sh("main", "true", [{"name": "host", "mountPath": "/mnt/host"}])])
    wf["spec"]["volumes"] = [{"name": "host", "hostPath": {"path": "/mnt/host"}}]
    wf["spec"]["templates"][0]["outputs"] = {"artifacts": [{"name": "a", "path": "/mnt/host/a"}]}
    return wf


@pytest.mark.parametrize(
    ("wf", "says"),
    [
        (
            claim("missing"),
            "template 'main' volumeMounts: volume 'missing' is not in the template's volumes, spec.volumes",
        ),
        (renamed("Work_Dir"), "template 'main' volume 'Work_Dir' is not a volume name"),
        (existing("My_Claim"), "template 'main' volume 'work' persistentVolumeClaim.claimName 'My_Claim' is not a"),
        (claim(subPath="/etc"), "template 'main' volumeMounts subPath '/etc' of volume 'work' leaves the volume"),
        (claim(subPath="a/../.."), "subPath 'a/../..' of volume 'work' leaves the volume"),
        (claim(subPath="{{workflow.name}}"), "take their subPath from a variable"),
        (host_artifact(), "is at '/mnt/host/a'; the local runner keeps artifacts in the step's own directory"),
    ],
)
def test_a_volume_kubernetes_or_argo_refuses_is_refused_before_anything_runs(
    tmp_path: Path, wf: dict[str, Any], says: str
) -> None:
    with pytest.raises(WorkflowError, match=re.escape(says)):
        run_workflow(wf, home=tmp_path / "home")
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*"))
