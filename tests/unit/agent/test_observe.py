"""Observing never fails: what cannot be read becomes a note; checkpoints count only once complete."""

from __future__ import annotations

import json
from pathlib import Path

from agent.observation import AttemptRecord, Observation, PlanRequest, Throughput
from agent.observe import find_checkpoint, observe
from components.volcano.cluster import ClusterError, Event, JobInfo, JobNotFound, NodeInfo, QueueNotFound, QueueSnapshot

REQUEST = PlanRequest(gpus=4, global_batch=16, micro_batch=4, queue="gpu-a", fallback_queue="spare")


class FakeCluster:
    """The read side of the Cluster protocol, over fixed objects; `down` makes every call fail."""

    def __init__(self, down: bool = False) -> None:
        self.down = down
        self.jobs = {"wf-train-1": JobInfo(name="wf-train-1", uid="u", queue="gpu-a", phase="Failed", min_available=1)}

    def _check(self) -> None:
        if self.down:
            raise ClusterError("the API server at https://k8s.example:6443 refused the connection.")

    def queue(self, name: str) -> QueueSnapshot:
        self._check()
        if name != "gpu-a":
            raise QueueNotFound(f"queue {name!r} does not exist.")
        return QueueSnapshot(name=name, state="Open", pending=1, pending_gpus=2)

    def nodes(self) -> list[NodeInfo]:
        self._check()
        return [NodeInfo(name="node-0", ready=True, gpu_capacity=4, gpu_allocatable=4, gpu_allocated=1)]

    def get(self, name: str, namespace: str = "default") -> JobInfo:
        self._check()
        if name not in self.jobs:
            raise JobNotFound(f"job {namespace}/{name} does not exist.")
        return self.jobs[name]

    def priority_classes(self) -> dict[str, int]:
        self._check()
        return {"vcpilot-run-2h": 1005, "system-node-critical": 2000001000, "vcpilot-run-30m": 1012}

    def events(self, name: str, namespace: str = "default", limit: int = 50) -> list[Event]:
        self._check()
        return [Event(time=1.0, object=f"Job/{name}", type="Warning", reason="Failed", message="PodFailed")]


def checkpoint(root: Path, step: int, complete: bool = True, metadata_step: int | None = None) -> Path:
    path = root / f"step-{step}"
    path.mkdir(parents=True)
    if complete:
        (path / "metadata.json").write_text(json.dumps({"step": step if metadata_step is None else metadata_step}))
    return path


def test_observe_takes_the_queues_nodes_job_events_and_latest_complete_checkpoint(tmp_path: Path) -> None:
    checkpoint(tmp_path, 10)
    latest = checkpoint(tmp_path, 20)
    checkpoint(tmp_path, 30, complete=False)  # a save that crashed half-way is not a checkpoint
    history = [AttemptRecord(attempt=1, job="wf-train-1", gpus=4, outcome="Failed")]
    measured = Throughput(samples_per_s=8.0, gpus=2, source="mlflow")
    seen = observe(
        FakeCluster(),
        REQUEST,
        job_name="wf-train-1",
        checkpoints=str(tmp_path),
        history=history,
        throughput=measured,
        now=42.0,
    )
    assert seen.time == 42.0 and seen.request == REQUEST
    assert seen.queue is not None and seen.queue.pending_gpus == 2
    assert [n.name for n in seen.nodes] == ["node-0"]
    assert seen.job is not None and seen.job.phase == "Failed" and seen.events[0].message == "PodFailed"
    assert seen.checkpoint is not None and (seen.checkpoint.path, seen.checkpoint.step) == (str(latest), 20)
    assert seen.history == history and seen.throughput == measured
    assert seen.run_bands == ["vcpilot-run-30m", "vcpilot-run-2h"]  # the run bands only, shortest first
    # The fallback queue does not exist: a fact the policies act on, not an exception.
    assert seen.fallback_queue is None and seen.missing_queues == ["spare"] and seen.notes == []
    assert seen.priority_classes == ["system-node-critical", "vcpilot-run-2h", "vcpilot-run-30m"]
    assert Observation.model_validate_json(seen.model_dump_json()) == seen  # serializable, so replayable


def test_an_unreachable_cluster_a_missing_job_and_no_checkpoints_become_notes(tmp_path: Path) -> None:
    down = observe(FakeCluster(down=True), REQUEST, job_name="wf-train-1", checkpoints=str(tmp_path / "none"))
    assert down.queue is None and down.nodes == [] and down.job is None and down.checkpoint is None
    assert down.notes[0] == (
        "could not read queue gpu-a: the API server at https://k8s.example:6443 refused the connection."
    )
    assert down.notes[-1] == f"no complete checkpoint under {tmp_path / 'none'}" and down.run_bands == []
    assert "could not read the priority classes: the API server" in " ".join(down.notes)
    missing = observe(FakeCluster(), REQUEST, job_name="wf-train-9")
    assert missing.job is None and missing.events == []
    assert "could not read job wf-train-9: job default/wf-train-9 does not exist." in missing.notes
    alone = observe(None, REQUEST)
    assert alone.notes == ["no cluster to observe from this step"] and alone.time > 0


def test_the_checkpoint_step_comes_from_its_metadata(tmp_path: Path) -> None:
    checkpoint(tmp_path, 50, metadata_step=48)
    found = find_checkpoint(str(tmp_path))
    assert found is not None and found.step == 48
    assert find_checkpoint(str(tmp_path / "absent")) is None
