"""One streamed request to an OpenAI-compatible server, measured; and the checks that the server is there.

`send_request` never raises for a failed request: a refused connection, an HTTP error status, a timeout, a
stream the server cut short or an error event all become a record with `error` set, so one bad request cannot
end a load test. The HTTP client is anything with httpx's streaming interface (`HttpClient`): an
`httpx.AsyncClient` for https:// and in tests, our lean HTTP/1.1 client (`components.loadtest.http1`). A load test
of an http:// server sends through `sse.SseClient` instead, which reads the same `Completion` on asyncio's
callbacks and makes the same records.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import httpx
import orjson
from pydantic import BaseModel, ConfigDict

from components.loadtest.records import RequestRecord, RequestSpec
from components.loadtest.wire import HttpError
from components.ports import check_http_url
from components.untrusted import loads_json

__all__ = [
    "HttpClient",
    "StreamedResponse",
    "Target",
    "Unreachable",
    "discover_model",
    "encode_request",
    "parse_target",
    "send_request",
    "wait_healthy",
]

Clock = Callable[[], float]

# What a failed exchange raises: httpx's errors or ours, the socket's (OSError); a malformed body adds ValueError.
_TRANSPORT = (httpx.HTTPError, HttpError, OSError)
_FAILURES = (*_TRANSPORT, ValueError, RecursionError)  # a chunk nested too deeply for Python's parser, too


class StreamedResponse(Protocol):
    """The part of a response the load generator reads (httpx.Response and http1.Http1Response have it)."""

    @property
    def status_code(self) -> int:
        """The HTTP status."""

    async def aread(self) -> bytes:
        """The whole body."""

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body in the pieces it arrives in."""

    def json(self) -> Any:
        """The body read so far, parsed as JSON."""


class HttpClient(Protocol):
    """The part of an HTTP client the load generator uses (httpx.AsyncClient and http1.Http1Client have it)."""

    def stream(
        self, method: str, url: str, *, content: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> AbstractAsyncContextManager[StreamedResponse]:
        """Send a request with `content` as its body; the response's body is read inside the block."""

    async def get(self, url: str) -> StreamedResponse:
        """GET a URL and read the whole response."""

    async def aclose(self) -> None:
        """Close the client's connections."""


class Unreachable(Exception):
    """The server cannot be reached or never became healthy; the message says so in one sentence."""


class Target(BaseModel):
    """Where requests go: the server's origin, the endpoint and the model name to put in each request."""

    model_config = ConfigDict(frozen=True)

    origin: str  # scheme://host:port
    endpoint: str  # full URL of /v1/completions or /v1/chat/completions
    chat: bool = False
    model: str | None = None


def parse_target(url: str, *, chat: bool = False) -> Target:
    """A target from a base URL (`http://host:8000`, `…/v1`) or a full endpoint URL (`…/v1/chat/completions`)."""
    parts = check_http_url(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if path.endswith("/completions"):
        return Target(origin=origin, endpoint=origin + path, chat=path.endswith("/chat/completions"))
    if not path.endswith("/v1"):
        path += "/v1"
    return Target(origin=origin, endpoint=f"{origin}{path}/{'chat/completions' if chat else 'completions'}", chat=chat)


_JSON = {"content-type": "application/json"}
_decode = json.JSONDecoder().raw_decode  # json.loads without its per-call checks: one chunk per token adds up
# orjson reads a chunk 3x faster than json and, where it reads it at all, as json does but for two things: an integer
# past 64 bits becomes a float (`Completion.feed` reads such a usage count again with json), and it reads nesting to
# 1,024 levels, past json's recursion limit, so a chunk this long (only such can be nested 500 deep) goes to json.
# A chunk orjson refuses (NaN, a lone surrogate, bad JSON) goes to json too, for json's answer or json's error.
_ORJSON_BELOW = 1000


def encode_request(target: Target, spec: RequestSpec) -> bytes:
    """The JSON body of `spec`'s streaming request (a runner encodes them all before its clock starts)."""
    return json.dumps(_payload(target, spec), separators=(",", ":"), ensure_ascii=False).encode()


def _payload(target: Target, spec: RequestSpec) -> dict[str, Any]:
    body: dict[str, Any] = {
        "max_tokens": spec.max_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if target.model:
        body["model"] = target.model
    if target.chat:
        body["messages"] = spec.messages or [{"role": "user", "content": spec.prompt}]
    else:
        body["prompt"] = spec.prompt
    return body


def _chunk_text(chunk: dict[str, Any], chat: bool) -> str:
    """The text a stream chunk carries ("" for role, usage and finish chunks); called once per token, so lean."""
    try:
        first = chunk["choices"][0]
        text = first["delta"]["content"] if chat else first["text"]
    except (KeyError, IndexError, TypeError):
        return ""
    return text if isinstance(text, str) else ""


def _parse(data: str) -> Any:
    """An event's data (stripped), read as json reads it but for integers past 64 bits (`_ORJSON_BELOW`)."""
    if len(data) < _ORJSON_BELOW:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return _json_chunk(data)


def _json_chunk(data: str) -> Any:
    chunk, end = _decode(data)
    if end != len(data):
        raise ValueError(f"the server sent a chunk with text after its JSON: {data[:80]}")
    return chunk


def error_message(body: bytes) -> str:
    try:
        message = loads_json(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = body.decode("utf-8", "replace").strip()
    return str(message)[:200]


def _count(value: object) -> int | None:
    """A token count from the server's usage; None for anything but a whole number of at least 0 (`"12"`, -1, 1.5)."""
    return value if type(value) is int and value >= 0 else None


_UNFINISHED = "the stream ended without [DONE]"
_SSE_FIELDS = (":", "event:", "id:", "retry:")  # the lines of an event stream besides `data:` (":" a comment)


def describe(err: BaseException) -> str:
    """A failed request's error: the exception's type, then its message."""
    text = str(err).strip()
    return f"{type(err).__name__}: {text}"[:200] if text else type(err).__name__


class Completion:
    """A streamed completion as its lines arrive: text pieces with their arrival times, usage, [DONE], errors.

    Fed whole lines in batches (all that one read brought, stamped with when it arrived), so that a read of many
    chunks costs one call, not one per line; `failure` is set, and the rest ignored, at the first bad chunk.
    """

    __slots__ = (
        "chat", "start", "ttft", "last", "itl", "pieces", "usage_tokens", "prompt_tokens", "done", "failure", "stray"
    )  # fmt: skip

    def __init__(self, chat: bool, start: float) -> None:
        self.chat, self.start, self.last = chat, start, start
        self.ttft = 0.0
        self.itl: list[float] = []
        self.pieces: list[str] = []
        self.usage_tokens: int | None = None
        self.prompt_tokens = 0
        self.done = False
        self.failure: str | None = None
        self.stray: str | None = None  # the first line that is no part of an event stream (an HTML page, JSON)

    def feed(self, text: str, now: float) -> None:
        """The complete lines `text` (without the last line ending), which arrived at `now`."""
        for line in text.split("\n"):
            # Read to the end even after [DONE]: a response left unread cannot go back to the connection pool.
            if not line.startswith("data:"):
                if line and self.stray is None and not line.startswith(_SSE_FIELDS):
                    self.stray = line.strip()[:80]
                continue  # blank separators, comments, event names
            if self.done:
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                self.done = True
                continue
            chunk = _parse(data)
            if not isinstance(chunk, dict):
                self.failure, self.done = f"the server sent a chunk that is not a JSON object: {data[:80]}", True
            elif "error" in chunk:
                self.failure, self.done = f"error event: {error_message(data.encode())}", True
            else:
                if (usage := chunk.get("usage")) and isinstance(usage, dict):
                    completion, prompt = usage.get("completion_tokens"), usage.get("prompt_tokens")
                    if type(completion) is float or type(prompt) is float:
                        # orjson reads an integer past 64 bits as a float, json as the integer it is
                        usage = _json_chunk(data)["usage"]
                        completion, prompt = usage.get("completion_tokens"), usage.get("prompt_tokens")
                    self.usage_tokens = _count(completion)
                    self.prompt_tokens = _count(prompt) or 0
                if text := _chunk_text(chunk, self.chat):
                    if self.pieces:
                        self.itl.append((now - self.last) * 1000)
                    else:
                        self.ttft = (now - self.start) * 1000
                    self.last = now
                    self.pieces.append(text)

    def record(self, index: int, t0: float, clock: Clock) -> RequestRecord:
        """The request's record, once its response has been read to the end (`clock` times an empty completion)."""
        if self.failure is not None or not self.done:
            error = self.failure or _UNFINISHED
            if self.failure is None and self.stray is not None:
                error += f" (the body began {self.stray!r}, not server-sent events)"
            return RequestRecord(index=index, start_s=self.start - t0, error=error)
        pieces, start = self.pieces, self.start
        ttft, latency = self.ttft, (self.last - start) * 1000
        if not pieces:  # an empty completion: the first (and last) token is the end of the stream
            ttft = latency = (clock() - start) * 1000
        tokens = self.usage_tokens
        return RequestRecord(
            index=index,
            start_s=start - t0,
            ttft_ms=ttft,
            itl_ms=tuple(self.itl),
            latency_ms=latency,
            prompt_tokens=self.prompt_tokens,
            output_tokens=tokens if tokens is not None else len(pieces),
            output_text="".join(pieces),
        )


async def send_request(
    client: HttpClient,
    target: Target,
    spec: RequestSpec,
    *,
    index: int = 0,
    t0: float = 0.0,
    clock: Clock,
    body: bytes | None = None,
) -> RequestRecord:
    """Send one streaming request and measure TTFT, inter-token gaps and latency (ms); never raises for failures.

    A token's time is when the read that brought it returned. `body` is `encode_request(target, spec)` when the
    caller has it already.
    """
    if body is None:
        body = encode_request(target, spec)
    start = clock()
    stream = Completion(target.chat, start)

    def failed(error: str) -> RequestRecord:
        return RequestRecord(index=index, start_s=start - t0, error=error)

    try:
        async with client.stream("POST", target.endpoint, content=body, headers=_JSON) as response:
            if response.status_code != 200:
                return failed(f"HTTP {response.status_code}: {error_message(await response.aread())}")
            pending = b""
            async for data in response.aiter_bytes():
                now = clock()
                if pending:
                    data = pending + data
                cut = data.rfind(b"\n")
                if cut < 0:
                    pending = data
                    continue
                pending = data[cut + 1 :]
                if not stream.done:  # whole lines only: no character is cut in two
                    stream.feed(data[:cut].decode("utf-8", "replace"), now)
            if pending and not stream.done:
                stream.feed(pending.decode("utf-8", "replace"), clock())
    except _FAILURES as err:
        return failed(describe(err))
    return stream.record(index, t0, clock)


async def discover_model(client: HttpClient, target: Target) -> str | None:
    """The first model the server lists at /v1/models (None when it lists none); Unreachable if it is not there."""
    try:
        response = await client.get(f"{target.origin}/v1/models")
    except _TRANSPORT as err:
        reason = describe(err)
        raise Unreachable(f"cannot reach {target.origin} ({reason}); check --url and that the server runs") from None
    try:
        models = response.json()["data"] if response.status_code == 200 else []
        return str(models[0]["id"]) if models else None
    except (ValueError, KeyError, IndexError, TypeError):
        return None


async def wait_healthy(
    client: HttpClient,
    origin: str,
    timeout_s: float,
    *,
    clock: Clock = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> None:
    """Poll `/health` until it answers 200, or raise Unreachable after `timeout_s` seconds."""
    deadline = clock() + timeout_s
    while True:
        try:
            if (await client.get(f"{origin}/health")).status_code == 200:
                return
        except _TRANSPORT:
            pass
        if clock() >= deadline:
            raise Unreachable(f"the server at {origin} did not become healthy within {timeout_s:g} s")
        await sleep(0.25)
