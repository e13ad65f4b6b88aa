"""The OpenAI wire format our server speaks: request models that validate into one sentence, response bodies.

Requests accept (and ignore) fields we do not implement, as OpenAI clients send many; the fields we do implement
are checked, and the first problem becomes one sentence in OpenAI's error shape.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = [
    "ChatCompletionRequest",
    "ChatMessage",
    "CompletionRequest",
    "GenerationRequest",
    "RequestError",
    "StreamOptions",
    "chat_chunk",
    "chat_response",
    "completion_chunk",
    "completion_response",
    "error_body",
    "new_id",
    "parse_request",
    "sse",
    "usage",
]

R = TypeVar("R", bound=BaseModel)


class RequestError(Exception):
    """A request the server refuses: one sentence for the caller, an HTTP status and OpenAI's error type."""

    def __init__(self, message: str, *, status: int = 400, kind: str = "invalid_request_error", param: str = ""):
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.param = param or None


class StreamOptions(BaseModel):
    """`stream_options`: whether the last chunk of a stream carries `usage`."""

    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class GenerationRequest(BaseModel):
    """What completions and chat completions share: the model, the sampling and the stream switch."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    n: int = 1
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)  # what torch's generator takes, as vLLM
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None

    @field_validator("n")
    @classmethod
    def _one_choice(cls, n: int) -> int:
        if n != 1:
            raise ValueError("only n=1 is supported")
        return n

    @field_validator("stop")
    @classmethod
    def _stops(cls, stop: str | list[str] | None) -> str | list[str] | None:
        stops = [stop] if isinstance(stop, str) else stop or []
        if any(not s for s in stops):
            raise ValueError("stop sequences must not be empty")
        if len(stops) > 4:
            raise ValueError("at most 4 stop sequences are supported")
        return stop

    def stop_sequences(self) -> tuple[str, ...]:
        """`stop` as a tuple, whichever form the caller sent."""
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())

    def include_usage(self) -> bool:
        """Whether a stream ends with a usage chunk."""
        return self.stream_options is not None and self.stream_options.include_usage


class CompletionRequest(GenerationRequest):
    """`POST /v1/completions`: continue one prompt (a string, or a list holding one string)."""

    prompt: str | list[str]

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, prompt: str | list[str]) -> str | list[str]:
        if isinstance(prompt, list) and len(prompt) != 1:
            raise ValueError("send one prompt per request (a string or a list holding one string)")
        return prompt

    def prompt_text(self) -> str:
        """The prompt as one string."""
        return self.prompt if isinstance(self.prompt, str) else self.prompt[0]


class ContentPart(BaseModel):
    """One part of a message's content; only text parts are served."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    """One message of a conversation."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        """The message's text, its parts joined."""
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class ChatCompletionRequest(GenerationRequest):
    """`POST /v1/chat/completions`: answer a conversation as the assistant."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)

    def token_budget(self) -> int | None:
        """`max_completion_tokens` (the newer name) or `max_tokens`."""
        return self.max_completion_tokens or self.max_tokens


def _path(loc: tuple[int | str, ...], data: Any) -> list[int | str]:
    """`loc` as a path into the request: without pydantic's names of union members (`str`, `list[str]`)."""
    path: list[int | str] = []
    for i, part in enumerate(loc):
        if isinstance(data, dict) and (part in data or i == len(loc) - 1):  # the last may be a missing field
            path.append(part)
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            path.append(part)
            data = data[part]
    return path


def _describe(error: ValidationError, data: Any) -> tuple[str, str]:
    """One sentence for the deepest problem (a union's members all fail; the one that got furthest says most)."""
    paths = [_path(e["loc"], data) for e in error.errors()]
    deepest = max(range(len(paths)), key=lambda i: len(paths[i]))
    chosen, path = error.errors()[deepest], paths[deepest]
    where = ".".join(str(part) for part in path)
    param = str(path[0]) if path else ""
    if chosen["type"] == "missing":
        return f"'{where}' is required.", param
    message = chosen["msg"].removeprefix("Value error, ")
    return (f"'{where}' is invalid: {message[0].lower() + message[1:]}." if where else f"{message}."), param


def parse_request(model: type[R], body: bytes) -> R:
    """Validate a raw request body into `model`, or raise RequestError with one sentence."""
    try:
        data = json.loads(body)
        json.dumps(data, ensure_ascii=False).encode()  # a lone surrogate (`\\ud800`) parses, but no text holds it
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise RequestError("The request body is not valid JSON.") from None
    except UnicodeEncodeError:
        raise RequestError(
            "The request body holds a lone UTF-16 surrogate escape (\\ud800 to \\udfff without its pair); "
            "send valid Unicode text."
        ) from None
    except RecursionError:
        raise RequestError("The request body nests arrays or objects too deeply to read.") from None
    if not isinstance(data, dict):
        raise RequestError("The request body must be a JSON object.")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        message, param = _describe(err, data)
        raise RequestError(message, param=param) from None


def error_body(message: str, kind: str = "invalid_request_error", param: str | None = None) -> dict[str, Any]:
    """OpenAI's error JSON."""
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def new_id(prefix: str) -> str:
    """A fresh response id such as `cmpl-…` or `chatcmpl-…`."""
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """OpenAI's `usage` object."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _envelope(rid: str, kind: str, model: str, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": rid, "object": kind, "created": int(time.time()), "model": model, "choices": choices, **extra}


def completion_response(
    rid: str, model: str, text: str, finish_reason: str, prompt_tokens: int, completion_tokens: int
) -> dict[str, Any]:
    """The body of a non-streaming completion."""
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
    return _envelope(rid, "text_completion", model, [choice], usage=usage(prompt_tokens, completion_tokens))


def completion_chunk(rid: str, model: str, text: str, finish_reason: str | None = None) -> dict[str, Any]:
    """One streamed piece of a completion."""
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
    return _envelope(rid, "text_completion", model, [choice])


def chat_response(
    rid: str, model: str, text: str, finish_reason: str, prompt_tokens: int, completion_tokens: int
) -> dict[str, Any]:
    """The body of a non-streaming chat completion."""
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}
    return _envelope(rid, "chat.completion", model, [choice], usage=usage(prompt_tokens, completion_tokens))


def chat_chunk(rid: str, model: str, delta: dict[str, str], finish_reason: str | None = None) -> dict[str, Any]:
    """One streamed piece of a chat completion (`delta` holds the role first, then content)."""
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return _envelope(rid, "chat.completion.chunk", model, [choice])


def sse(data: dict[str, Any] | str) -> bytes:
    """One server-sent event: `data: …` and a blank line."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()
