"""The one definition of the checkpoint layout, read by the trainer, the agent and its tools alike, without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agent.observe import find_checkpoint
from components.finetune.checkpoint_layout import METADATA, complete, damage, digest, latest, recorded_step, step_dir


def make(directory: Path, step: int, metadata: dict[str, object] | None = None) -> Path:
    path = step_dir(directory, step)
    path.mkdir(parents=True)
    if metadata is not None:
        (path / METADATA).write_text(json.dumps(metadata))
    return path


def test_only_step_n_directories_with_their_metadata_count_and_the_highest_n_is_the_latest(tmp_path: Path) -> None:
    make(tmp_path, 5, {"step": 5})
    make(tmp_path, 20, {"step": 20})
    make(tmp_path, 30)  # a copy or save that never finished
    (tmp_path / ".tmp-step-40-x").mkdir()  # a save before its rename
    (tmp_path / "step-x").mkdir()

    assert complete(tmp_path) == [(5, tmp_path / "step-5"), (20, tmp_path / "step-20")]
    assert latest(tmp_path) == tmp_path / "step-20"
    assert latest(tmp_path / "absent") is None and complete(tmp_path / "absent") == []
    found = find_checkpoint(str(tmp_path))
    assert found is not None and (found.path, found.step) == (str(tmp_path / "step-20"), 20)


def test_the_step_is_the_metadatas_and_the_name_says_it_when_the_file_cannot(tmp_path: Path) -> None:
    assert recorded_step(make(tmp_path, 7, {"step": 6})) == 6
    broken = make(tmp_path, 9)
    (broken / METADATA).write_text("not json")
    assert recorded_step(broken) == 9


def test_the_agent_reads_the_layout_without_importing_torch() -> None:
    code = "import sys, agent.observe, agent.tools; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_checkpoint_whose_file_does_not_match_its_recorded_digest_is_passed_over(tmp_path: Path) -> None:
    older = make(tmp_path, 5, {"step": 5})
    newest = make(tmp_path, 10)
    (newest / "model.pt").write_bytes(b"weights")
    (newest / METADATA).write_text(json.dumps({"step": 10, "files": {"model.pt": digest(newest / "model.pt")}}))
    assert latest(tmp_path) == newest and damage(newest) is None
    (newest / "model.pt").write_bytes(b"weigh")  # truncated
    assert damage(newest) == "model.pt does not match its recorded SHA-256 (truncated or damaged)"
    assert latest(tmp_path) == older, "a checkpoint from before checksums (no files recorded) still counts"
    found = find_checkpoint(str(tmp_path))
    assert found is not None and found.step == 5, "the agent retries from the intact one"
    (newest / "model.pt").unlink()
    assert damage(newest) == "model.pt is missing"


def test_metadata_a_training_pod_wrote_past_what_the_readers_expect_is_damage_not_an_exception(tmp_path: Path) -> None:
    deep = make(tmp_path, 1)
    (deep / METADATA).write_text("[" * 100_000)  # past the parser's recursion limit
    assert damage(deep) == f"its {METADATA} cannot be read" and recorded_step(deep) == 1
    assert damage(make(tmp_path, 2, {"step": 2, "files": ["model.pt"]})) == (
        f"its {METADATA} does not map each file to its SHA-256"
    )
    for step, recorded in [(3, 1e999), (4, "4"), (5, True), (6, -1)]:
        path = make(tmp_path, step)
        (path / METADATA).write_text(json.dumps({"step": recorded}))  # 1e999 is written as Infinity
        assert damage(path) == f"its {METADATA} records a step that is not a whole number of 0 or more"
        assert recorded_step(path) == step
    (make(tmp_path, 7) / METADATA).write_text('{"step": 1e999}')
    assert recorded_step(tmp_path / "step-7") == 7 and damage(tmp_path / "step-7") is not None
    assert latest(tmp_path) is None and find_checkpoint(str(tmp_path)) is None


def test_a_file_named_outside_the_checkpoint_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"not the checkpoint's")
    root = tmp_path / "checkpoints"
    link = make(root, 3)
    (link / "model.pt").symlink_to(secret)
    named = {"../../secret": 1, str(secret): 2, "model.pt": 3}
    for name, step in named.items():
        path = link if step == 3 else make(root, step)
        (path / METADATA).write_text(json.dumps({"step": step, "files": {name: digest(secret)}}))
        assert damage(path) == f"{name!r} lies outside the checkpoint"
    assert latest(root) is None
    inside = make(root, 4)
    (inside / "weights.pt").write_bytes(b"weights")
    (inside / "model.pt").symlink_to("weights.pt")  # a link within the checkpoint is still its own file
    (inside / METADATA).write_text(json.dumps({"step": 4, "files": {"model.pt": digest(inside / "weights.pt")}}))
    assert damage(inside) is None and latest(root) == inside
