"""The data pipeline: batch arithmetic, a data order that survives restarts and world sizes, labels, bad files."""

from __future__ import annotations

import json

import pytest

from components.finetune.config import resolve_batch
from components.finetune.data import (
    IGNORE,
    DataPosition,
    Example,
    collate,
    load_examples,
    rank_micro_batches,
    take,
    tokenize,
)
from components.finetune.errors import FinetuneError


def test_the_accumulation_is_derived_so_the_global_batch_stays_exact():
    assert resolve_batch(2, 2, None, 8).grad_accum == 2
    assert resolve_batch(1, 2, None, 8).grad_accum == 4
    shape = resolve_batch(2, 4, 3, None)
    assert shape.global_batch == 24 and shape.grad_accum == 3


@pytest.mark.parametrize(("world", "micro", "accum", "global_batch"), [(3, 2, None, 8), (2, 2, 3, 8)])
def test_a_global_batch_that_does_not_divide_is_refused_in_one_sentence(world, micro, accum, global_batch):
    with pytest.raises(FinetuneError) as err:
        resolve_batch(world, micro, accum, global_batch)
    message = str(err.value)
    assert "global batch 8" in message and message.count(".") <= 2 and "\n" not in message


def test_the_data_order_is_a_seeded_permutation_per_epoch_read_as_one_stream():
    first, position = take(DataPosition(), 7, 5, seed=0)
    assert sorted(first[:5]) == [0, 1, 2, 3, 4], "an epoch visits every sample once"
    assert position == DataPosition(epoch=1, offset=2)
    assert take(DataPosition(), 7, 5, seed=0)[0] == first, "the same seed gives the same order"
    assert take(DataPosition(), 5, 5, seed=1)[0] != first[:5], "another seed gives another order"
    second_epoch, _ = take(DataPosition(epoch=1), 5, 5, seed=0)
    assert second_epoch != first[:5] and sorted(second_epoch) == [0, 1, 2, 3, 4]


def test_continuing_from_a_saved_position_gives_what_an_uninterrupted_stream_gives():
    straight, _ = take(DataPosition(), 4 * 9, 10, seed=3)
    resumed, position = [], DataPosition()
    for _ in range(9):
        batch, position = take(position, 4, 10, seed=3)
        position = DataPosition(position.epoch, position.offset)  # what a checkpoint stores
        resumed += batch
    assert resumed == straight


def test_two_ranks_with_accumulation_2_see_the_micro_batches_of_one_rank_with_accumulation_4():
    indices = [9, 3, 7, 1, 0, 5, 2, 8]
    one_rank = rank_micro_batches(indices, 0, 1, 2)
    two_ranks = rank_micro_batches(indices, 0, 2, 2) + rank_micro_batches(indices, 1, 2, 2)
    assert one_rank == two_ranks == [[9, 3], [7, 1], [0, 5], [2, 8]]


class CharTokenizer:
    eos_token_id = 1

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


def test_only_completion_tokens_and_eos_carry_labels():
    (example,) = tokenize([{"prompt": "Q:", "completion": " 12"}], CharTokenizer(), max_length=64)
    assert example.input_ids == (ord("Q"), ord(":"), ord(" "), ord("1"), ord("2"), 1)
    assert example.labels == (IGNORE, IGNORE, ord(" "), ord("1"), ord("2"), 1)
    assert example.target_tokens == 4
    (cut,) = tokenize([{"prompt": "Q:", "completion": " 12"}], CharTokenizer(), max_length=4)
    assert len(cut.input_ids) == len(cut.labels) == 4


def test_padding_is_masked_out_of_attention_and_loss():
    batch = collate([Example((5, 6, 7), (IGNORE, 6, 7)), Example((8,), (8,))], pad_id=0)
    assert batch.input_ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch.labels.tolist() == [[IGNORE, 6, 7], [8, IGNORE, IGNORE]]


def write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (lambda d: None, "does not exist"),
        (lambda d: d.mkdir(), "holds no train.jsonl"),
        (lambda d: write(d / "train.jsonl", ["", "  "]), "is empty"),
        (lambda d: write(d / "train.jsonl", ['{"prompt": "a"']), "line 1 is not valid JSON"),
        (lambda d: write(d / "train.jsonl", [json.dumps({"prompt": "a", "answer": "b"})]), "'completion'"),
    ],
    ids=["missing", "no-train-file", "empty", "truncated-json", "wrong-fields"],
)
def test_unusable_data_is_refused_in_one_sentence(tmp_path, setup, expected):
    directory = tmp_path / "data"
    setup(directory)
    with pytest.raises(FinetuneError) as err:
        load_examples(directory)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_the_eval_split_is_optional(tmp_path):
    write(tmp_path / "train.jsonl", [json.dumps({"prompt": "a", "completion": "b"})])
    assert load_examples(tmp_path) == [{"prompt": "a", "completion": "b"}]
    assert load_examples(tmp_path, "eval", required=False) == []
