"""Checkpoints count only when complete, are replaced atomically, pruned to the newest k, and restore RNG exactly."""

from __future__ import annotations

import errno
import json
import random
import re

import pytest
import torch

from components.finetune.checkpoint import (
    Checkpointer,
    CheckpointMetadata,
    TrainingState,
    capture_rng,
    restore_rng,
)
from components.finetune.checkpoint_layout import METADATA
from components.finetune.errors import FinetuneError, why_write_failed
from components.finetune.optim import lr_factor


def metadata(step):
    return CheckpointMetadata(
        step=step,
        epoch=0,
        offset=step * 4,
        loss=1.0 / step,
        global_batch=4,
        world_size=1,
        base_model="tiny",
        lora=False,
        seed=0,
    )


def state(value=0.0):
    return TrainingState({"w": torch.full((2,), value)}, {"state": {}}, {"last_epoch": 1}, capture_rng())


def test_a_save_is_a_complete_step_directory_and_the_latest_wins(tmp_path):
    checkpoints = Checkpointer(tmp_path, keep=3)
    checkpoints.save(metadata(5), state(5.0))
    checkpoints.save(metadata(10), state(10.0))
    assert checkpoints.latest() == tmp_path / "step-10"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-10", "step-5"], "no temporary directory is left"
    loaded_metadata, loaded = checkpoints.load(tmp_path / "step-10")
    assert loaded_metadata == metadata(10).model_copy(update={"files": loaded_metadata.files})
    assert sorted(loaded_metadata.files) == ["model.pt", "train_state.pt"]
    assert loaded.model["w"].tolist() == [10.0, 10.0]


def test_a_directory_without_metadata_is_not_a_checkpoint(tmp_path):
    checkpoints = Checkpointer(tmp_path)
    checkpoints.save(metadata(5), state())
    (tmp_path / "step-10").mkdir()  # a copy or save that never finished
    (tmp_path / "step-10" / "model.pt").write_bytes(b"half")
    (tmp_path / ".tmp-step-15-abc").mkdir()  # a save killed before its rename
    assert checkpoints.latest() == tmp_path / "step-5"
    checkpoints.sweep()
    assert not (tmp_path / ".tmp-step-15-abc").exists()
    with pytest.raises(FinetuneError, match="incomplete"):
        checkpoints.read_metadata(tmp_path / "step-10")


def test_only_the_newest_k_are_kept(tmp_path):
    checkpoints = Checkpointer(tmp_path, keep=2)
    for step in (5, 10, 15, 20):
        checkpoints.save(metadata(step), state())
    assert [step for step, _ in checkpoints.complete()] == [15, 20]


def test_saving_a_step_again_replaces_it_whole(tmp_path):
    checkpoints = Checkpointer(tmp_path)
    checkpoints.save(metadata(5), state(1.0))
    checkpoints.save(metadata(5), state(2.0))
    assert checkpoints.load(tmp_path / "step-5")[1].model["w"].tolist() == [2.0, 2.0]
    assert [p.name for p in tmp_path.iterdir()] == ["step-5"]


def test_metadata_is_written_last_inside_the_temporary_directory(tmp_path, monkeypatch):
    # A crash between the tensors and the metadata leaves nothing that counts as a checkpoint.
    checkpoints = Checkpointer(tmp_path)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(CheckpointMetadata, "model_dump_json", crash)
    with pytest.raises(
        FinetuneError, match=r"could not write the checkpoint of step 5 .*\(disk full; [0-9.]+ MB free there\)"
    ):
        checkpoints.save(metadata(5), state())
    assert checkpoints.latest() is None
    assert list(tmp_path.iterdir()) == [], "the partial save is removed"


def test_restored_rng_repeats_the_same_draws(tmp_path):
    saved = capture_rng()
    torch.save(saved, tmp_path / "rng.pt")
    draws = (random.random(), torch.rand(3).tolist())
    restore_rng(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert (random.random(), torch.rand(3).tolist()) == draws


def test_foreign_metadata_is_refused(tmp_path):
    (tmp_path / "step-3").mkdir()
    (tmp_path / "step-3" / METADATA).write_text('{"step": 3}')
    with pytest.raises(FinetuneError, match="not a vcpilot checkpoint"):
        Checkpointer(tmp_path).read_metadata(tmp_path / "step-3")


def test_the_reason_is_recorded_and_a_checkpoint_from_before_reasons_reads_as_periodic(tmp_path):
    checkpoints = Checkpointer(tmp_path)
    checkpoints.save(metadata(7).model_copy(update={"reason": "stop-signal"}), state())
    assert checkpoints.read_metadata(tmp_path / "step-7").reason == "stop-signal"
    older = metadata(5).model_dump()
    del older["reason"]
    (tmp_path / "step-5").mkdir()
    (tmp_path / "step-5" / METADATA).write_text(json.dumps(older))
    assert checkpoints.read_metadata(tmp_path / "step-5").reason == "periodic"


def test_the_schedule_warms_up_then_decays_to_a_tenth():
    assert lr_factor(0, 10, 100) == pytest.approx(0.1)
    assert lr_factor(9, 10, 100) == pytest.approx(1.0)
    assert lr_factor(10, 10, 100) == pytest.approx(1.0)
    assert lr_factor(100, 10, 100) == pytest.approx(0.1)
    assert lr_factor(55, 10, 100) == pytest.approx(0.55)


def test_a_truncated_latest_checkpoint_fails_its_checksum_and_the_previous_one_is_the_latest(tmp_path):
    checkpoints = Checkpointer(tmp_path)
    checkpoints.save(metadata(5), state(5.0))
    newest = checkpoints.save(metadata(10), state(10.0))
    weights = newest / "model.pt"
    weights.write_bytes(weights.read_bytes()[:-7])  # a disk or a copy that lost the end of the file
    assert checkpoints.latest() == tmp_path / "step-5"
    with pytest.raises(FinetuneError, match=r"step-10 is damaged: model.pt does not match its recorded SHA-256"):
        checkpoints.load(newest)
    assert checkpoints.load(tmp_path / "step-5")[1].model["w"].tolist() == [5.0, 5.0]


# A checkpoint save with a 64 KiB limit on the size of any file the process writes (RLIMIT_FSIZE: the write fails
# with EFBIG, as it would with ENOSPC on a full disk; Python ignores SIGXFSZ). Its own process: the limit stays there.
_FULL_DISK = """
import resource, sys, torch
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from test_finetune_checkpoint import Checkpointer, metadata, state
from components.finetune.errors import FinetuneError, why_write_failed
checkpoints = Checkpointer(Path(sys.argv[1]))
checkpoints.save(metadata(5), state(5.0))
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
big = state(10.0)
big.model["w"] = torch.zeros(100_000)
try:
    checkpoints.save(metadata(10), big)
except FinetuneError as err:
    print(type(err).__name__, err.exit_code, err)
"""


def test_a_save_on_a_full_disk_leaves_no_partial_checkpoint_and_the_previous_one_stays_the_latest(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    here = str(Path(__file__).parent)
    done = subprocess.run([sys.executable, "-c", _FULL_DISK, str(tmp_path), here], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("NoRoom 28 could not write the checkpoint of step 10 under")
    assert re.search(r"\(a file reached the size limit: .*; [0-9.]+ MB free there, step-5 took 0.0 MB\)", done.stdout)
    assert "--resume auto continues from the previous checkpoint" in done.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["step-5"], "the partial save is removed"
    assert Checkpointer(tmp_path).latest() == tmp_path / "step-5"


@pytest.mark.parametrize(
    ("err", "said"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), "the disk is full: [Errno 28] No space left on device"),
        (RuntimeError("Error while serializing: I/O error: File too large (os error 27)"), "a file reached the size"),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), "the disk quota is used up"),
        (OSError(errno.EACCES, "Permission denied"), "[Errno 13] Permission denied"),  # not room: as it says
    ],
    ids=["enospc", "wrapped-efbig", "quota", "not-room"],
)
def test_a_failed_save_names_a_full_disk_as_such(err, said):
    assert why_write_failed(err).startswith(said)
