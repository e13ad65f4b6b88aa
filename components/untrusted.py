"""Text from outside (log lines, requests, corrections, an LLM's rationale): shown escaped, checked for instructions.

A log line or a user's correction is data, never a command. `printable` makes it safe to quote in a report or a
terminal: control characters, ANSI escape sequences and the invisible Unicode that reorders or hides text (bidi
overrides, zero-width characters) become visible escapes, and an oversized field is cut with a note. An
instruction hidden in that data is found by `instruction_in`, which looks at the text as a reader would see it —
NFKC-folded, invisible characters dropped, common Cyrillic and Greek look-alikes read as Latin — so a training
example that tells the model (or the agent) to do something else is dropped instead of learnt.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

__all__ = ["MAX_QUOTED", "clean", "instruction_in", "loads_json", "printable"]

MAX_QUOTED = 2000  # characters of one quoted field in a report

# CSI / OSC / other ESC sequences, as a terminal would interpret them
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
# bidi embeddings, overrides and isolates; zero-width and other invisible format characters
_INVISIBLE = set("\u061c\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2061\u2062\u2063\u2064")
_INVISIBLE |= set("\u2066\u2067\u2068\u2069\ufeff\u180e\u00ad")

# Latin look-alikes an attacker swaps in to slip past a word filter (Cyrillic, Greek), read as the letter they mimic
_HOMOGLYPHS = str.maketrans(
    "аеорсухіјѕԁԛԝАВЕКМНОРСТХІЈЅαβεικνορτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdqwABEKMHOPCTXIJSabeiknoptuxABEZHIKMNOPTYX",
)

_INSTRUCTIONS = [
    r"\b(ignore|disregard|forget|override)\b.{0,40}\b(previous|prior|above|earlier|all|your|the)\b.{0,20}"
    r"\b(instructions?|prompts?|rules?|guardrails?|context)\b",
    r"\b(new|updated|real|actual) (system )?instructions?\b",
    r"\bsystem prompt\s*:",
    r"\byou are now\b|\bact as (an? )?(admin|root|system|developer)\b",
    r"<\|(im_start|im_end|system|endoftext)\|>|\[/?inst\]|<<sys>>|^\s*#{2,} *(system|instruction)",
    r"\b(submit_training_job|cancel_job|delete_?job|kubectl|rm -rf|curl https?:)",
    r"\b(call|use|invoke|run) (the )?(tool|function) ",
    r"\b(abort|cancel|delete|kill|stop) (the |this |every |all )?(run|runs|training|job|jobs|pipeline|workflow)s?\b",
    r"\b(scale|set|use|allocate|request|give)\b.{0,20}\b\d{3,}\s*gpus?\b",
    r"\b(promote|release|register)\b.{0,30}\b(champion|production)\b.{0,30}\b(now|immediately|without)\b",
]
_INSTRUCTION = re.compile("|".join(f"(?:{p})" for p in _INSTRUCTIONS), re.I | re.M)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, limit: int = MAX_QUOTED) -> str:
    """`text` safe to print or quote: escapes for what a terminal or a renderer would act on, cut at `limit`."""
    out = "".join(
        _escape(c) if c in _INVISIBLE or (unicodedata.category(c) in ("Cc", "Cf", "Co", "Cs", "Zl", "Zp")) else c
        for c in text[: limit + 1]
    )
    if len(text) > limit:
        out = out[:limit] + f"… ({len(text) - limit} more characters)"
    return out


def clean(text: str) -> str:
    """`text` as training data: ANSI sequences and invisible characters removed, newlines and tabs kept.

    A line or paragraph separator (U+2028, U+2029) becomes a newline: JSONL readers that split on it would break.
    """
    text = _ANSI.sub("", text).replace("\u2028", "\n").replace("\u2029", "\n")
    return "".join(
        c for c in text if c in "\n\t" or not (c in _INVISIBLE or unicodedata.category(c) in ("Cc", "Cf", "Co", "Cs"))
    )


def instruction_in(text: str) -> str | None:
    """The instruction aimed at a model or an agent that `text` carries, as a reader would see it; None if none."""
    seen = unicodedata.normalize("NFKC", clean(text)).translate(_HOMOGLYPHS)
    found = _INSTRUCTION.search(" ".join(seen.split()))
    return found.group() if found else None


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members as a dict, or ValueError for a key given twice (`object_pairs_hook` of `loads_json`).

    Python keeps the last, as Go's encoding/json does (Argo's step outputs are read so); a Kubernetes API server
    with strict field validation (kubectl's default) refuses the object, and so does go-yaml in its strict mode.
    """
    members: dict[str, Any] = {}
    for key, value in pairs:
        if key in members:
            raise ValueError(f"key {key!r} is given twice")
        members[key] = value
    return members


def loads_json(text: str | bytes, **options: Any) -> Any:
    """`json.loads` for text from outside (a file, a server, a model, a step's output): one exception for bad JSON.

    Python's parser recurses once per level, so `[[[[…` a few thousand deep raises RecursionError, which no
    `except ValueError` catches; here it is a ValueError like any other JSON nothing should read, and so is a
    number beyond Python's 4,300-digit limit (already a ValueError).
    """
    try:
        return json.loads(text, **options)
    except RecursionError:
        raise ValueError("JSON nested too deeply to be read") from None
