"""The data sets people bring, read alike by training and evaluation: every shape read right, every fault one sentence.

Each case is a file a user could hand `vcpilot finetune --data` or `vcpilot evaluate --eval-set`: the record it
must become, or the sentence (naming the file and the line) it must be refused with.
"""

from __future__ import annotations

import gzip
import json

import pytest

from components.errors import VcpilotError
from components.evaluate.model import CausalLM
from components.evaluate.scoring import Example, read_eval_set, score
from components.finetune.data import IGNORE, load_examples, tokenize
from components.lm.tiny import create_tiny_model, load

PLAIN = {"prompt": "Q", "completion": "A"}
CHAT = {"messages": [{"role": "user", "content": "Q"}], "completion": "A"}


def lines(*records: object) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


@pytest.mark.parametrize(
    ("content", "record"),
    [
        (
            lines(
                {
                    "messages": [
                        {"role": "system", "content": "S"},
                        {"role": "user", "content": "Q"},
                        {"role": "assistant", "content": "A"},
                    ]
                }
            ),
            {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}], "completion": "A"},
        ),
        (
            lines(
                {
                    "messages": [
                        {"role": "user", "content": [{"type": "text", "text": "Q"}]},
                        {"role": "assistant", "content": [{"type": "text", "text": "A"}]},
                    ]
                }
            ),
            CHAT,
        ),
        (lines({"conversations": [{"from": "human", "value": "Q"}, {"from": "gpt", "value": "A"}]}), CHAT),
        (lines({"instruction": "Q", "output": "A"}), CHAT),
        (
            lines({"instruction": "Add", "input": "1 2", "output": "3"}),
            {"messages": [{"role": "user", "content": "Add\n\n1 2"}], "completion": "3"},
        ),
        (json.dumps([PLAIN], indent=2).encode(), PLAIN),
        (b"\xef\xbb\xbf" + lines(PLAIN), PLAIN),
        (gzip.compress(lines(PLAIN)), PLAIN),
        (lines({"prompt": "a\u2028b\u0085c", "completion": "A"}), {"prompt": "a\u2028b\u0085c", "completion": "A"}),
    ],
    ids=["openai-chat", "text-parts", "sharegpt", "alpaca", "alpaca-input", "json-array", "bom", "gzip", "u2028"],
)
def test_every_shape_people_bring_is_read_by_training_and_evaluation_alike(tmp_path, content, record):
    (tmp_path / "train.jsonl").write_bytes(content)
    assert load_examples(tmp_path) == [record]
    example = read_eval_set(tmp_path / "train.jsonl")[0]
    assert example.completion == record["completion"]
    assert [dict(m) for m in example.messages] == record.get("messages", [])


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (lines(PLAIN, {"prompt": "2+2", "completion": 4}), "line 2 'completion' is a number, not a string"),
        (lines({"prompt": "a", "completion": None}), "line 1 'completion' is nothing, not a string"),
        (lines(PLAIN) + b'{"prompt": "a", "completion": "b"},\n', "line 2 is not valid JSON (Extra data at column"),
        (
            lines({"messages": [{"content": "Q"}, {"role": "assistant", "content": "A"}]}),
            "line 1 message 1 has no 'role'",
        ),
        (
            lines({"messages": [{"role": "wizard", "content": "Q"}, {"role": "assistant", "content": "A"}]}),
            "line 1 message 1 has role 'wizard'; use one of system",
        ),
        (lines({"messages": [{"role": "system", "content": "S"}]}), "line 1 does not end with an assistant message"),
        (
            lines({"conversations": [{"from": "gpt", "value": "A"}, {"from": "human", "value": "Q"}]}),
            "line 1 does not end with an assistant message",
        ),
        (
            lines(
                {
                    "messages": [
                        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
                        {"role": "assistant", "content": "A"},
                    ]
                }
            ),
            "line 1 message 1 part 1 is 'image_url', not a text part",
        ),
        (lines({"input": "x", "answer": "y"}), "line 1 has none of 'prompt' and 'completion', 'messages'"),
        (lines({"prompt": "a", "completion": "b", "category": 3}), "line 1 'category' is a number"),
        (b'{"prompt": "\\ud800", "completion": "b"}\n', "line 1 'prompt' holds a lone surrogate"),
        (b"[" * 50_000 + b"]" * 50_000, "is not a valid JSON array (JSON nested too deeply to be read)"),
        (b"[1]", "item 1 is a number, not a JSON object"),
    ],
    ids=[
        "number",
        "null",
        "trailing-comma",
        "missing-role",
        "unknown-role",
        "system-only",
        "sharegpt-ends-with-user",
        "image-part",
        "no-shape",
        "category-number",
        "lone-surrogate",
        "too-deep",
        "array-of-numbers",
    ],
)
def test_a_record_that_cannot_be_read_is_one_sentence_naming_file_and_line(tmp_path, content, says):
    path = tmp_path / "train.jsonl"
    path.write_bytes(content)
    for read in (lambda: load_examples(tmp_path), lambda: read_eval_set(path)):
        with pytest.raises(VcpilotError) as caught:
            read()
        sentence = str(caught.value)
        assert str(path) in sentence and says in sentence and "\n" not in sentence


def test_an_empty_eval_split_is_refused_not_skipped(tmp_path):
    (tmp_path / "train.jsonl").write_bytes(lines(PLAIN))
    (tmp_path / "eval.jsonl").write_text("\n\n")
    with pytest.raises(VcpilotError, match="eval.jsonl is empty"):
        load_examples(tmp_path, "eval", required=False)


def test_a_truncated_gzip_file_is_one_sentence(tmp_path):
    path = tmp_path / "eval.jsonl.gz"
    path.write_bytes(gzip.compress(lines(PLAIN) * 100)[:40])
    with pytest.raises(VcpilotError, match="is a gzip file that cannot be decompressed"):
        read_eval_set(path)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return load(create_tiny_model(tmp_path_factory.mktemp("tiny"), hidden=32, seed=0))


def test_a_conversation_trains_on_the_answer_after_the_prompt_the_server_would_render(tiny):
    _, tokenizer = tiny
    record = {"messages": [{"role": "user", "content": "Q"}], "completion": "A"}
    (example,) = tokenize([record], tokenizer, 64)
    learnt = [token for token, label in zip(example.input_ids, example.labels, strict=True) if label != IGNORE]
    prompt = [token for token, label in zip(example.input_ids, example.labels, strict=True) if label == IGNORE]
    assert tokenizer.decode(prompt) == "user: Q\nassistant:"
    assert tokenizer.decode(learnt, skip_special_tokens=True) == "A"


@pytest.mark.parametrize(
    ("prompt", "completion"),
    [("", ""), ("", "x"), ("é漢字🙂\u202e", "🙂"), ("z" * 5000, "y"), ("a", "w" * 3000)],
    ids=["both-empty", "empty-prompt", "unicode", "prompt-past-context", "reference-past-context"],
)
def test_scoring_takes_odd_prompts_and_references(tiny, prompt, completion):
    model = CausalLM(*tiny)
    scores = score(model, [Example(prompt=prompt, completion=completion)])
    assert scores.examples == 1 and 0.0 <= scores.exact_match <= 1.0 and scores.perplexity >= 1.0


def test_scoring_keeps_within_a_model_with_learned_positions(tiny, tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    _, tokenizer = tiny
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=32, n_embd=16, n_layer=1, n_head=2)
    model = CausalLM(GPT2LMHeadModel(config), tokenizer)  # past 32 positions its embedding has no row
    scores = score(model, [Example(prompt="z" * 100, completion="w" * 50)])
    assert scores.examples == 1 and scores.perplexity >= 1.0
