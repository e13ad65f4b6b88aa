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
