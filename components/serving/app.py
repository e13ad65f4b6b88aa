"""The OpenAI-compatible HTTP API over an `Engine`: completions and chat completions, streamed or not.

One generation runs at a time (an asyncio lock); each forward pass runs on a single worker thread, so the
event loop keeps answering `/health` and queueing requests while the model works.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException

from components.serving.engine import Engine, Sampling
from components.serving.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    GenerationRequest,
    RequestError,
    chat_chunk,
    chat_response,
    completion_chunk,
    completion_response,
    error_body,
    new_id,
    parse_request,
    sse,
    usage,
)
from components.serving.textstream import TextStream

__all__ = ["COMPLETION_DEFAULT_MAX_TOKENS", "body_limit", "create_app"]

# OpenAI's default for /v1/completions; chat completions default to the rest of the context.
COMPLETION_DEFAULT_MAX_TOKENS = 16

# A request body may hold this many bytes per token of context (at least MIN_BODY_LIMIT_BYTES): room for JSON
# escapes and many messages, while a 50 MB body, which no context holds, is refused before it is read, tokenized
# (seconds of the event loop) and held in memory (gigabytes, with its token ids).
BODY_BYTES_PER_TOKEN = 64
MIN_BODY_LIMIT_BYTES = 1 << 20


def body_limit(context_length: int) -> int:
    """The largest request body, in bytes, a server with this context reads."""
    return max(MIN_BODY_LIMIT_BYTES, BODY_BYTES_PER_TOKEN * context_length)


@dataclass
class _Job:
    """A validated request, ready to generate."""

    prompt_ids: list[int]
    sampling: Sampling
    stop: tuple[str, ...]
    finish_reason: str = "length"
    completion_tokens: int = 0


class _Generator:
    """Runs one job at a time and yields its text deltas."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._lock = asyncio.Lock()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="generate")

    def prepare(self, prompt: str, request: GenerationRequest, max_tokens: int | None, default: int | None) -> _Job:
        ids = self.engine.encode(prompt)
        context = self.engine.context_length
        room = context - len(ids)
        if room < 1:  # no token left to generate, whatever max_tokens says
            raise RequestError(
                f"This model's context is {context} tokens, but the prompt has {len(ids)}; shorten the prompt.",
                param="messages" if isinstance(request, ChatCompletionRequest) else "prompt",
            )
        wanted = max_tokens or default or room
        if wanted > room:
            raise RequestError(
                f"This model's context is {context} tokens, but the prompt has {len(ids)} and "
                f"max_tokens asks for {wanted}; shorten the prompt or lower max_tokens.",
                param="max_tokens",
            )
        sampling = Sampling(max_tokens=wanted, temperature=request.temperature, top_p=request.top_p, seed=request.seed)
        return _Job(ids, sampling, request.stop_sequences())

    async def deltas(self, job: _Job) -> AsyncIterator[str]:
        """Text pieces as the model produces them; sets the job's finish reason and token count at the end."""
        loop = asyncio.get_running_loop()
        async with self._lock:
            decoding = await loop.run_in_executor(self._worker, self.engine.start, job.prompt_ids, job.sampling)
            text = TextStream(self.engine.decode, job.stop)
            while True:
                token = await loop.run_in_executor(self._worker, decoding.step)
                if token is None:
                    break
                if delta := text.push(token):
                    yield delta
                if text.stopped:
                    break
            job.completion_tokens = text.tokens
            job.finish_reason = "length" if text.tokens >= job.sampling.max_tokens and not text.stopped else "stop"
            if tail := text.finish():
                yield tail


def _error(err: RequestError) -> JSONResponse:
    return JSONResponse(error_body(str(err), err.kind, err.param), status_code=err.status)


async def _read_body(raw: Request, context_length: int) -> bytes:
    """The request's body, or RequestError (413) once it passes `body_limit`: nothing past that is kept."""
    limit = body_limit(context_length)
    declared = raw.headers.get("content-length", "")
    size = int(declared) if declared.isdigit() else 0
    body = bytearray()
    if size <= limit:
        async for piece in raw.stream():
            body += piece
            if len(body) > limit:
                break
    if max(size, len(body)) > limit:
        raise RequestError(
            f"The request body is over {limit // 1024} KiB, the most this server reads for a context of "
            f"{context_length} tokens; shorten the prompt.",
            status=413,
        )
    return bytes(body)


def create_app(engine: Engine, model_name: str) -> FastAPI:
    """The FastAPI application serving `engine` under the name `model_name`."""
    app = FastAPI(title="vcpilot serving", docs_url=None, redoc_url=None)
    generator = _Generator(engine)
    created = int(time.time())

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code in (404, 405):
            message = (
                f"{request.method} {request.url.path} is not served here; this server answers GET /health, "
                "GET /v1/models, POST /v1/completions and POST /v1/chat/completions."
            )
            return JSONResponse(error_body(message, "not_found_error"), status_code=exc.status_code)
        return JSONResponse(error_body(f"{exc.detail}.", "invalid_request_error"), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _server_error(request: Request, exc: Exception) -> JSONResponse:
        # A bug of ours still answers in OpenAI's shape; the traceback goes to the server's log, not to the caller.
        message = f"The server failed on this request ({type(exc).__name__}); its log says why."
        return JSONResponse(error_body(message, "server_error"), status_code=500)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {
            "id": model_name,
            "object": "model",
            "created": created,
            "owned_by": "vcpilot",
            "max_model_len": engine.context_length,
        }
        return {"object": "list", "data": [card]}

    def check_model(request: GenerationRequest) -> None:
        if request.model not in (None, model_name):
            raise RequestError(
                f"The model '{request.model}' is not served here; this server serves '{model_name}'.",
                status=404,
                kind="not_found_error",
                param="model",
            )

    @app.post("/v1/completions", response_model=None)
    async def completions(raw: Request) -> JSONResponse | StreamingResponse:
        try:
            request = parse_request(CompletionRequest, await _read_body(raw, engine.context_length))
            check_model(request)
            job = generator.prepare(request.prompt_text(), request, request.max_tokens, COMPLETION_DEFAULT_MAX_TOKENS)
        except RequestError as err:
            return _error(err)
        rid = new_id("cmpl")
        if request.stream:

            def piece(text: str, finish: str | None = None) -> dict[str, Any]:
                return completion_chunk(rid, model_name, text, finish)

            return _stream(generator, job, request.include_usage(), piece, piece(""), rid)
        return await _complete(generator, job, completion_response, rid, model_name)

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(raw: Request) -> JSONResponse | StreamingResponse:
        try:
            request = parse_request(ChatCompletionRequest, await _read_body(raw, engine.context_length))
            check_model(request)
            try:
                prompt = engine.render_chat([{"role": m.role, "content": m.text()} for m in request.messages])
            except ValueError as err:
                raise RequestError(f"{err}; change the messages.", param="messages") from None
            job = generator.prepare(prompt, request, request.token_budget(), None)
        except RequestError as err:
            return _error(err)
        rid = new_id("chatcmpl")
        if request.stream:

            def piece(text: str, finish: str | None = None) -> dict[str, Any]:
                return chat_chunk(rid, model_name, {"content": text} if text else {}, finish)

            opening = chat_chunk(rid, model_name, {"role": "assistant", "content": ""})
            return _stream(generator, job, request.include_usage(), piece, opening, rid)
        return await _complete(generator, job, chat_response, rid, model_name)

    return app


async def _complete(
    generator: _Generator, job: _Job, render: Callable[..., dict[str, Any]], rid: str, model: str
) -> JSONResponse:
    try:
        text = "".join([delta async for delta in generator.deltas(job)])
    except Exception as err:  # noqa: BLE001 - any model failure becomes one sentence for the caller
        return JSONResponse(error_body(f"The model failed to generate: {err}.", "server_error"), status_code=500)
    return JSONResponse(render(rid, model, text, job.finish_reason, len(job.prompt_ids), job.completion_tokens))


def _stream(
    generator: _Generator,
    job: _Job,
    include_usage: bool,
    piece: Callable[..., dict[str, Any]],
    opening: dict[str, Any],
    rid: str,
) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        yield sse(opening)
        try:
            async for delta in generator.deltas(job):
                yield sse(piece(delta))
        except Exception as err:  # noqa: BLE001 - headers are sent: report the failure inside the stream
            yield sse(error_body(f"The model failed to generate: {err}.", "server_error"))
            yield sse("[DONE]")
            return
        yield sse(piece("", job.finish_reason))
        if include_usage:
            end = dict(piece(""), choices=[], usage=usage(len(job.prompt_ids), job.completion_tokens))
            yield sse(end)
        yield sse("[DONE]")

    headers = {"Cache-Control": "no-cache", "X-Request-Id": rid}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)
