"""Checkpoints count only when complete, are replaced atomically, pruned to the newest k, and restore RNG exactly.

Periodic ones are written beside training from a snapshot: later steps do not change them, a failed write ends the
run as a synchronous one would, and a stop or the end of the run waits for the write in flight.
"""

from __future__ import annotations

import copy
import errno
import json
import random
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from components.finetune import checkpoint as checkpoint_module
from components.finetune.checkpoint import (
    Checkpointer,
    CheckpointMetadata,
    TrainingState,
    capture_rng,
    restore_rng,
)
from components.finetune.checkpoint_layout import METADATA, TEMP_PREFIX
from components.finetune.checkpoint_writer import CheckpointWriter, snapshot
from components.finetune.config import TrainConfig
from components.finetune.distributed import Distributed
from components.finetune.errors import EXIT_NO_ROOM, FinetuneError, NoRoom, Stopped, why_write_failed
from components.finetune.optim import lr_factor
from components.finetune.train import train


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


# Asynchronous checkpoints (checkpoint_writer.py): training waits only for a snapshot; a thread writes it.


def train_config(tmp_path, dataset, **overrides):
    settings = dict(
        data=dataset,
        out=tmp_path / "out",
        checkpoint_dir=tmp_path / "ck",
        max_steps=4,
        checkpoint_every=2,
        micro_batch=2,
        global_batch=4,
        lr=1e-2,
    )
    return TrainConfig(**{**settings, **overrides})


def recorded(out):
    """What rank 0 recorded in metrics.jsonl, one dict a step."""
    file = out / "metrics.jsonl"
    return [json.loads(line) for line in file.read_text().splitlines()] if file.is_file() else []


def wait_until(condition):
    """Wait for `condition` — a guard against a deadlock, not a timing: it holds at once when the code is right."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "waited a minute: training did not go on beside the write"
        time.sleep(0.01)


def same(a, b):
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


class Writes:
    """Every `Checkpointer.save`: its step and whether the training thread ran it; `hold[step]` runs before it."""

    def __init__(self, monkeypatch):
        self.done = []
        self.hold = {}
        real = Checkpointer.save

        def save(checkpointer, metadata, state):
            self.hold.get(metadata.step, lambda: None)()
            path = real(checkpointer, metadata, state)
            self.done.append((metadata.step, threading.current_thread() is threading.main_thread()))
            return path

        monkeypatch.setattr(Checkpointer, "save", save)


@pytest.fixture
def writes(monkeypatch):
    return Writes(monkeypatch)


def test_a_periodic_checkpoint_is_written_beside_training_and_the_last_one_before_train_returns(
    tmp_path, dataset, writes
):
    config = train_config(tmp_path, dataset)
    # The write of step 2 goes on only once step 3 is trained: on the training thread it never would.
    writes.hold[2] = lambda: wait_until(lambda: len(recorded(config.out)) >= 3)
    summary = train(config, Distributed())

    # Both from a snapshot, the final one waited for: every `checkpoint_save_s` is a stall, the agent's median too.
    assert writes.done == [(2, False), (4, False)]
    assert sorted(p.name for p in config.checkpoint_dir.iterdir()) == ["step-2", "step-4"], "whole, no temp dir"
    assert Checkpointer(config.checkpoint_dir).read_metadata(config.checkpoint_dir / "step-4").reason == "final"
    timed = [sorted(key for key in record if key.startswith("checkpoint_")) for record in recorded(config.out)]
    assert timed == [[], ["checkpoint_save_s"], [], ["checkpoint_save_s", "checkpoint_write_s"]]

    # Step 3 trained while step 2 was written, yet step 2 holds the state of step 2: resumed, it ends the same.
    resumed = train(
        train_config(
            tmp_path,
            dataset,
            out=tmp_path / "resumed",
            checkpoint_dir=tmp_path / "ck-resumed",
            resume=str(config.checkpoint_dir / "step-2"),
        ),
        Distributed(),
    )
    assert resumed.steps_run == 2
    assert resumed.final_loss == summary.final_loss


def test_the_snapshot_is_the_state_of_its_step_whatever_training_does_while_it_is_written(tmp_path, writes):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (step + 1))

    def step():  # in place, as training does: the parameters and Adam's moments change under the write
        model(torch.rand(4, 3)).sum().backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()

    def live():
        return TrainingState(model.state_dict(), optimizer.state_dict(), scheduler.state_dict(), capture_rng())

    step()
    expected = copy.deepcopy(live())
    trained = threading.Event()
    writes.hold[1] = trained.wait
    writer = CheckpointWriter(Checkpointer(tmp_path))
    assert writer.save(metadata(1), live(), background=True) is None, "no write was in flight"
    for _ in range(3):
        step()
    assert not same(live().model, expected.model) and not same(live().rng, expected.rng)
    trained.set()
    assert writer.wait() is not None

    _, written = Checkpointer(tmp_path).load(tmp_path / "step-1")
    for part in ("model", "optimizer", "scheduler", "rng"):
        assert same(getattr(written, part), getattr(expected, part)), part


def test_the_snapshot_keeps_what_a_state_dict_shares_and_says():
    model = torch.nn.Sequential(torch.nn.Embedding(4, 3), torch.nn.Linear(3, 4, bias=False))
    model[1].weight = model[0].weight  # tied, as the tiny model's embeddings are
    live = model.state_dict()
    copied = snapshot(TrainingState(live, {}, {}, {})).model
    assert copied["0.weight"] is copied["1.weight"], "saved once, as from the live state"
    assert copied["0.weight"].data_ptr() != live["0.weight"].data_ptr()
    assert copied._metadata == live._metadata  # the module versions load_state_dict reads


def test_a_snapshot_copies_into_the_buffers_of_the_one_before_and_holds_its_own_step():
    model = torch.nn.Linear(3, 2)
    kept: dict = {}
    first = snapshot(TrainingState(model.state_dict(), {}, {}, {}), kept).model
    buffers = {name: tensor.data_ptr() for name, tensor in first.items()}
    with torch.no_grad():
        model.weight.add_(1.0)  # a step, in place
    second = snapshot(TrainingState(model.state_dict(), {}, {}, {}), kept).model
    assert {name: tensor.data_ptr() for name, tensor in second.items()} == buffers, "no new host memory"
    assert same(second, model.state_dict()) and len(kept) == 2
    # A tensor gone since (a new optimizer state) frees its buffer: `kept` holds the last snapshot's alone.
    snapshot(TrainingState({"other": torch.zeros(5)}, {}, {}, {}), kept)
    assert [tuple(tensor.shape) for tensor in kept.values()] == [(5,)]


def test_a_background_write_without_room_ends_training_at_the_next_checkpoint_as_a_synchronous_one_would(
    tmp_path, dataset, monkeypatch
):
    real = checkpoint_module._save

    def full_at_step_2(value, path):
        if path.parent.name.startswith(f"{TEMP_PREFIX}2-"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(value, path)

    monkeypatch.setattr(checkpoint_module, "_save", full_at_step_2)
    config = train_config(tmp_path, dataset)
    with pytest.raises(NoRoom) as background:
        train(config, Distributed())
    assert [record["step"] for record in recorded(config.out)] == [1, 2, 3], "raised at step 4, before its checkpoint"
    assert list(config.checkpoint_dir.iterdir()) == [], "the partial write is removed"

    with pytest.raises(NoRoom) as synchronous:
        Checkpointer(config.checkpoint_dir).save(metadata(2), state())
    free = re.compile(r"[0-9.]+ MB free")
    assert free.sub("", str(background.value)) == free.sub("", str(synchronous.value))
    assert str(background.value).startswith("could not write the checkpoint of step 2 under")
    assert background.value.exit_code == EXIT_NO_ROOM


@dataclass(frozen=True)
class PeerStops(Distributed):
    """One rank whose peer got SIGTERM before step `at`; records the complete checkpoints at the barrier."""

    at: int = 0
    checkpoints: Path = Path()
    asked: list = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    at_barrier: list = field(default_factory=list)

    def any_rank(self, flag):
        self.asked.append(flag)
        if len(self.asked) > self.at:  # asked once before each step
            self.stopping.set()
            return True
        return flag

    def barrier(self):
        self.at_barrier.append([step for step, _ in Checkpointer(self.checkpoints).complete()])


@pytest.mark.parametrize(("at", "written"), [(2, [2]), (3, [2, 3])], ids=["at-the-snapshot", "a-step-later"])
def test_a_stop_during_a_write_waits_for_it_and_the_resumed_run_ends_on_the_same_loss(
    tmp_path, dataset, writes, at, written
):
    config = train_config(tmp_path, dataset)
    dist = PeerStops(at=at, checkpoints=config.checkpoint_dir)
    writes.hold[2] = dist.stopping.wait  # the write of step 2 is in flight when the stop comes
    with pytest.raises(Stopped) as stopped:
        train(config, dist)

    assert stopped.value.step == at
    assert [step for step, _ in writes.done] == written, "a step a snapshot holds is not written again"
    assert dist.at_barrier == [written], "no rank leaves before every checkpoint is whole"
    reasons = [
        Checkpointer(config.checkpoint_dir).read_metadata(config.checkpoint_dir / f"step-{s}").reason for s in written
    ]
    assert reasons == ["periodic"] + ["stop-signal"] * (len(written) - 1)
    resumed = train(config.model_copy(update={"resume": "auto"}), Distributed())
    uninterrupted = train(
        train_config(tmp_path, dataset, out=tmp_path / "u", checkpoint_dir=tmp_path / "u-ck"), Distributed()
    )
    assert resumed.steps_run == 4 - at and resumed.final_loss == uninterrupted.final_loss


# A trainer killed (SIGKILL) in the middle of the background write of step 4: after model.pt, before the rest.
_KILLED_MID_WRITE = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
import components.finetune.checkpoint as checkpoint
from components.finetune.distributed import Distributed
from components.finetune.train import train
from test_finetune_checkpoint import train_config
real = checkpoint._save
def killed(value, path):
    real(value, path)
    if path.parent.name.startswith(".tmp-step-4-"):
        os.kill(os.getpid(), signal.SIGKILL)
checkpoint._save = killed
train(train_config(Path(sys.argv[1]), Path(sys.argv[2]), max_steps=6), Distributed())
"""


def test_a_trainer_killed_mid_write_leaves_a_temp_dir_and_resumes_from_the_checkpoint_before(tmp_path, dataset):
    import subprocess
    import sys

    here = str(Path(__file__).parent)
    run = [sys.executable, "-c", _KILLED_MID_WRITE, str(tmp_path), str(dataset), here]
    done = subprocess.run(run, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    config = train_config(tmp_path, dataset, max_steps=6, resume="auto")
    left = sorted(p.name for p in config.checkpoint_dir.iterdir())
    assert left[0].startswith(f"{TEMP_PREFIX}4-") and left[1:] == ["step-2"]
    assert Checkpointer(config.checkpoint_dir).latest() == config.checkpoint_dir / "step-2"

    resumed = train(config, Distributed())
    uninterrupted = train(
        train_config(tmp_path, dataset, max_steps=6, out=tmp_path / "u", checkpoint_dir=tmp_path / "u-ck"),
        Distributed(),
    )
    assert resumed.resumed_from == str(config.checkpoint_dir / "step-2")
    assert resumed.final_loss == uninterrupted.final_loss
    assert not any(p.name.startswith(TEMP_PREFIX) for p in config.checkpoint_dir.iterdir()), "swept"
