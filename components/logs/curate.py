"""The fine-tuning set the logs hand to the next step: corrected requests as prompt/completion pairs.

A user's correction is the answer the model should have given, so each corrected request becomes one JSONL line
`{"prompt": ..., "completion": <the correction>}`. A prompt counts once (the first correction wins); one carrying an
instruction to a model, or absurdly long, is dropped (`components.untrusted`), invisible characters are removed,
and what looks like a credential is masked (`components.redact`). It goes
to train or eval by a hash of the prompt: the split is the same on every run and machine, and a prompt never
lands on both sides. Lines stream to disk; memory holds one digest per distinct prompt.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pydantic import BaseModel, Field

from components.files import make_dirs, put_output, remove_made_dirs
from components.logs.records import RequestRecord
from components.redact import redact_text
from components.untrusted import clean, instruction_in

__all__ = ["MAX_FIELD", "Curator", "DatasetSummary"]

MAX_FIELD = 16_000  # characters of a prompt or a correction worth learning from; longer is a paste or an attack


class DatasetSummary(BaseModel):
    """Where the fine-tuning set is and what went into it."""

    train: str
    eval: str
    train_examples: int = 0
    eval_examples: int = 0
    corrections: int = Field(default=0, description="corrected requests offered")
    duplicates: int = Field(default=0, description="corrections of a prompt already in the set, dropped")
    rejected: int = Field(
        default=0, description=f"corrections dropped: an instruction to a model in them, or over {MAX_FIELD} characters"
    )
    eval_fraction: float


def _normalized(prompt: str) -> str:
    return " ".join(prompt.split())


SPLIT_FILES = {"train": "train.jsonl", "eval": "eval.jsonl"}
"""The files a Curator writes into its directory, by split."""


class Curator:
    """Writes `train.jsonl` and `eval.jsonl` into a directory from the corrected requests it is offered."""

    def __init__(self, out_dir: Path, eval_fraction: float = 0.2) -> None:
        if not 0.0 <= eval_fraction < 1.0:
            raise ValueError(f"the eval fraction must be in [0, 1), got {eval_fraction}")
        self._made = make_dirs(out_dir)  # removed again by `discard`
        self.summary = DatasetSummary(
            train=str(out_dir / SPLIT_FILES["train"]),
            eval=str(out_dir / SPLIT_FILES["eval"]),
            eval_fraction=eval_fraction,
        )
        self._seen: set[bytes] = set()
        self._paths = {split: out_dir / f".{name}.tmp" for split, name in SPLIT_FILES.items()}
        self._files = {split: path.open("w", encoding="utf-8") for split, path in self._paths.items()}
        # The train example that moves to eval if hashing sent none there: (its hash position, its line number).
        self._first_train: tuple[float, int] | None = None

    def offer(self, record: RequestRecord) -> bool:
        """Add the record if it carries a correction for a prompt not seen yet; returns whether it was added."""
        if not record.correction or not record.correction.strip() or not record.prompt.strip():
            return False
        self.summary.corrections += 1
        # Data, never commands: what the model would learn must not tell it (or the agent reading it) what to do.
        # And no credential a user pasted (`sk-…`, a bearer token): a model learns what it is shown.
        prompt, correction = redact_text(clean(record.prompt)), redact_text(clean(record.correction))
        # A chat request is learnt as its conversation, the correction its answer: every message is checked.
        chat = [{"role": m["role"], "content": redact_text(clean(m["content"]))} for m in record.messages]
        texts = [m["content"] for m in chat] or [prompt]
        if any(len(text) > MAX_FIELD or instruction_in(text) for text in (*texts, correction)):
            self.summary.rejected += 1
            return False
        asked = json.dumps([[m["role"], _normalized(m["content"])] for m in chat]) if chat else _normalized(prompt)
        digest = hashlib.sha256(asked.encode("utf-8")).digest()
        if digest in self._seen:
            self.summary.duplicates += 1
            return False
        self._seen.add(digest)
        position = int.from_bytes(digest[:8], "big") / 2**64
        split = "eval" if position < self.summary.eval_fraction else "train"
        example: dict[str, object] = {"prompt": prompt, "completion": correction}
        if chat:
            example = {"messages": [*chat, {"role": "assistant", "content": correction}]}
        example |= {"category": clean(record.category)} if record.category else {}
        line = json.dumps(example, ensure_ascii=False)
        self._files[split].write(line + "\n")
        if split == "eval":
            self.summary.eval_examples += 1
        else:
            if self._first_train is None or position < self._first_train[0]:
                self._first_train = (position, self.summary.train_examples)
            self.summary.train_examples += 1
        return True

    def close(self) -> DatasetSummary:
        """Finish both files (atomically) and say what they hold."""
        for handle in self._files.values():
            handle.close()
        summary = self.summary
        if summary.eval_fraction > 0 and summary.eval_examples == 0 and summary.train_examples >= 2:
            self._move_one_to_eval()
        put_output(self._paths["train"], summary.train)  # a link in the directory keeps pointing where it did
        put_output(self._paths["eval"], summary.eval)
        return summary

    def _move_one_to_eval(self) -> None:
        """Hashing sent nothing to eval (a small set): move the train example nearest to the eval side there."""
        assert self._first_train is not None
        index = self._first_train[1]
        kept = self._paths["train"].with_suffix(".keep")
        with self._paths["train"].open(encoding="utf-8") as source, kept.open("w", encoding="utf-8") as train:
            with self._paths["eval"].open("a", encoding="utf-8") as evaluation:
                for number, line in enumerate(source):
                    (evaluation if number == index else train).write(line)
        os.replace(kept, self._paths["train"])
        self.summary.train_examples -= 1
        self.summary.eval_examples += 1

    def discard(self) -> None:
        """Drop the unfinished files (the run failed before `close`)."""
        for handle in self._files.values():
            handle.close()
        for path in self._paths.values():
            path.unlink(missing_ok=True)
        remove_made_dirs(self._made)
