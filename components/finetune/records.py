"""The records of a training or evaluation set, in any of the shapes people bring, read into one shape.

A data set is JSON lines (or one JSON array) of records, plain or gzipped. Each record is one of: prompt and
completion; an OpenAI chat (`messages` of `role` and `content`, a string or text parts); a ShareGPT conversation
(`conversations` of `from` and `value`); an Alpaca instruction (`instruction`, optional `input`, `output`). A
conversation's last message is the answer learnt and scored, and what comes before it is its prompt, rendered as
`vcpilot serve` renders a chat request (`serving.engine.chat_prompt`), so a model answers a request as it was
trained to. Every record that cannot be read is refused with one sentence naming the file and the line; none is
skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from components.errors import InputError
from components.files import kind_of, read_dataset
from components.untrusted import loads_json

__all__ = ["ROLES", "Record", "chat_messages", "read_records"]

Record = dict[str, Any]  # {"prompt", "completion"} or {"messages", "completion"}, with "category" when given

ROLES = ("system", "developer", "user", "assistant", "tool")  # the roles `vcpilot serve` takes in a chat request
_SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}
_SHAPES = "'prompt' and 'completion', 'messages', 'conversations', or 'instruction' and 'output'"


def read_records(path: Path, what: str, *, answered: bool = True) -> list[Record]:
    """Every record of the data set at `path`, in order; InputError (naming `what`, the file and line) otherwise.

    Without `answered` (a load test's prompts) a record may leave its answer out: its completion is then "".
    """
    label = f"{what} {path}"
    text = read_dataset(path, what)
    return [_record(value, f"{label} {where}", answered) for where, value in _values(text, label)]


def _values(text: str, label: str) -> Iterator[tuple[str, Any]]:
    """The JSON values of a JSONL text, or of a JSON array, each with where it is (`line 3`, `item 3`)."""
    if text.lstrip().startswith("["):
        try:
            array = loads_json(text)
        except ValueError as err:
            raise InputError(
                f"{label} is not a valid JSON array ({_why(err)}); fix it, or write one object a line"
            ) from None
        yield from ((f"item {number}", value) for number, value in enumerate(array, start=1))
        return
    # Lines end at LF (a CR before it goes too), not at what str.splitlines also splits on: U+2028 and U+0085 may
    # stand raw inside a JSON string, and the line numbers must be the ones an editor shows.
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                yield f"line {number}", loads_json(line)
            except ValueError as err:
                raise InputError(
                    f"{label} line {number} is not valid JSON ({_why(err)}); write one object a line"
                ) from None


def _why(err: ValueError) -> str:
    """What the JSON parser found wrong, in its words: `Expecting ',' delimiter at column 12`."""
    column = getattr(err, "colno", None)
    return f"{getattr(err, 'msg', err)} at column {column}" if column else str(getattr(err, "msg", err))


def _record(value: Any, where: str, answered: bool = True) -> Record:
    if not isinstance(value, dict):
        raise InputError(f"{where} is {kind_of(value)}, not a JSON object with {_SHAPES}")
    category = {"category": _text(value, "category", where)} if "category" in value else {}

    def answer(field: str) -> str:
        return _text(value, field, where) if answered or field in value else ""

    if "prompt" in value or "completion" in value:
        return {"prompt": _text(value, "prompt", where), "completion": answer("completion"), **category}
    if "messages" in value:
        return _chat(chat_messages(value, where), where, category, answered)
    if "conversations" in value:
        turns = _list(value, "conversations", where)
        return _chat([_turn(t, f"{where} turn {i}") for i, t in enumerate(turns, start=1)], where, category, answered)
    if "instruction" in value or "output" in value:
        ask = _text(value, "instruction", where)
        given = _text(value, "input", where) if value.get("input") is not None else ""
        user = f"{ask}\n\n{given}" if given else ask
        return {
            "messages": [{"role": "user", "content": user}],
            "completion": answer("output"),
            **category,
        }
    raise InputError(f"{where} has none of {_SHAPES}; give each record one of these shapes")


def chat_messages(value: dict[str, Any], where: str) -> list[dict[str, str]]:
    """The `messages` of an OpenAI chat record, each `{"role", "content"}` with its text parts joined.

    InputError naming `where` and the message otherwise. A request log's chat requests are read so too (`logs`).
    """
    messages = _list(value, "messages", where)
    return [_message(m, f"{where} message {i}") for i, m in enumerate(messages, start=1)]


def _chat(messages: list[dict[str, str]], where: str, category: dict[str, str], answered: bool) -> Record:
    """The conversation's last message is the answer; there must be one, the assistant's (unless not `answered`)."""
    if not answered and messages and messages[-1]["role"] != "assistant":
        return {"messages": messages, "completion": "", **category}
    if not messages or messages[-1]["role"] != "assistant":
        raise InputError(f"{where} does not end with an assistant message; end each conversation with the answer")
    return {"messages": messages[:-1], "completion": messages[-1]["content"], **category}


def _message(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise InputError(f"{where} is {kind_of(value)}, not an object with 'role' and 'content'")
    role = _text(value, "role", where)
    if role not in ROLES:
        raise InputError(f"{where} has role {role!r}; use one of {', '.join(ROLES)}")
    content = value.get("content")
    if isinstance(content, list):  # text parts, as the chat API takes them
        content = "".join(_part(part, f"{where} part {i}") for i, part in enumerate(content, start=1))
        return {"role": role, "content": content}
    return {"role": role, "content": _text(value, "content", where)}


def _part(value: Any, where: str) -> str:
    if not isinstance(value, dict) or value.get("type") != "text":
        kind = value.get("type") if isinstance(value, dict) else kind_of(value)
        raise InputError(f"{where} is {kind!r}, not a text part; only text can be trained on and scored")
    return _text(value, "text", where)


def _turn(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise InputError(f"{where} is {kind_of(value)}, not an object with 'from' and 'value'")
    speaker = _text(value, "from", where)
    if speaker not in _SHAREGPT_ROLES:
        raise InputError(f"{where} is from {speaker!r}; use one of {', '.join(_SHAREGPT_ROLES)}")
    return {"role": _SHAREGPT_ROLES[speaker], "content": _text(value, "value", where)}


def _list(value: dict[str, Any], field: str, where: str) -> list[Any]:
    if not isinstance(value[field], list):
        raise InputError(f"{where} '{field}' is {kind_of(value[field])}; give a list")
    return value[field]


def _text(value: dict[str, Any], field: str, where: str) -> str:
    """`value[field]` when it is text that can be tokenized; InputError naming the field otherwise."""
    text = value.get(field)
    if field not in value:
        raise InputError(f"{where} has no '{field}'; add it")
    if not isinstance(text, str):
        raise InputError(f"{where} '{field}' is {kind_of(text)}, not a string; write it in quotes")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:  # a lone UTF-16 surrogate (`"\ud800"`): no tokenizer can take it
        raise InputError(f"{where} '{field}' holds a lone surrogate {text[err.start]!r}; remove it") from None
    return text
