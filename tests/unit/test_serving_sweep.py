"""What real and hostile clients send the model server, and odd server replies to the load generator.

Each case was a 500, a plain-text error, a wrong answer or a hang before: the server must answer OpenAI's error
JSON with a 4xx for the caller's mistakes, and the load generator must count an odd reply as a failed request
with its reason while the other requests keep their figures.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from components.loadtest.client import parse_target
from components.loadtest.records import RequestSpec
from components.loadtest.runner import LoadPlan, connector, run_load
from components.serving.app import body_limit, create_app
from components.serving.engine import Sampling, load_engine, plain_chat

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


class EchoEngine:
    """One token per character; answers with the prompt's characters in order until max_tokens."""

    context_length = 64

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(chr(i) for i in ids)

    def render_chat(self, messages):
        return plain_chat(messages)

    def start(self, prompt_ids, sampling: Sampling):
        ids = iter(list(prompt_ids)[: sampling.max_tokens])

        class Decoding:
            def step(self):
                return next(ids, None)

        return Decoding()


class BuggyEngine(EchoEngine):
    """A model wrapper with a bug: encoding fails with an exception nobody turned into a RequestError."""

    def encode(self, text):
        raise KeyError("vocab")


def post(engine, path, content, *, headers=None, raise_app_exceptions=True):
    """POST raw bytes (or an async iterator of bytes: a chunked body) to an app over `engine`."""

    async def go():
        transport = httpx.ASGITransport(app=create_app(engine, "m"), raise_app_exceptions=raise_app_exceptions)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.post(path, content=content, headers=headers or {"content-type": "application/json"})

    return asyncio.run(go())


def error_of(response, status):
    """The OpenAI error object of a response that must have `status`."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and "Traceback" not in error["message"]
    return error


def test_json_nested_too_deeply_is_a_400_not_a_500():
    deep = b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    error = error_of(post(EchoEngine(), CHAT, deep), 400)
    assert "nests arrays or objects too deeply" in error["message"]


def test_a_lone_surrogate_is_a_400_even_where_the_answer_would_echo_it():
    # the model name comes back in the error: a lone surrogate cannot be encoded into the response's UTF-8
    body = b'{"model": "\\ud800", "prompt": "hi"}'
    error = error_of(post(EchoEngine(), COMPLETIONS, body), 400)
    assert "lone UTF-16 surrogate" in error["message"]
    pair = post(EchoEngine(), COMPLETIONS, b'{"prompt": "x \\ud83d\\ude00", "max_tokens": 3}')
    assert pair.json()["choices"][0]["text"] == "x \U0001f600", "a surrogate pair is one character and served"


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS])
def test_a_prompt_that_fills_the_context_is_refused_without_max_tokens(path):
    # chat defaults max_tokens to the room left; with none left it used to answer 200 with an empty completion
    content = "a" * 80
    body = {"messages": [{"role": "user", "content": content}]} if path == CHAT else {"prompt": content}
    error = error_of(post(EchoEngine(), path, json.dumps(body).encode()), 400)
    assert error["message"].startswith("This model's context is 64 tokens, but the prompt has ")
    assert error["param"] == ("messages" if path == CHAT else "prompt")


def test_a_body_past_the_limit_is_a_413_whether_its_length_is_declared_or_chunked():
    limit = body_limit(EchoEngine.context_length)
    body = json.dumps({"prompt": "a" * limit}).encode()
    error = error_of(post(EchoEngine(), COMPLETIONS, body), 413)
    assert f"over {limit // 1024} KiB" in error["message"]

    async def chunks():
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    error_of(post(EchoEngine(), COMPLETIONS, chunks()), 413)
    assert post(EchoEngine(), COMPLETIONS, b'{"prompt": "ok", "max_tokens": 2}').json()["choices"][0]["text"] == "ok"


def test_an_image_part_is_named_where_it_is_not_as_a_union_member():
    message = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}
    error = error_of(post(EchoEngine(), CHAT, json.dumps({"messages": [message]}).encode()), 400)
    assert error["message"] == "'messages.0.content.0.type' is invalid: input should be 'text'."
    error = error_of(post(EchoEngine(), CHAT, json.dumps({"messages": [], "stop": 5}).encode()), 400)
    assert error["message"].startswith("'") and ".str" not in error["message"]


def test_a_bug_in_the_server_is_a_500_in_openai_shape_without_a_traceback():
    response = post(BuggyEngine(), COMPLETIONS, b'{"prompt": "hi"}', raise_app_exceptions=False)
    error = error_of(response, 500)
    assert error["type"] == "server_error" and "KeyError" in error["message"] and "vocab" not in error["message"]


@pytest.fixture(scope="module")
def tiny_engine(tmp_path_factory):
    """Our tiny model on the CPU: where a real tokenizer and torch's sampler meet what a client sends."""
    from components.lm.tiny import create_tiny_model

    return load_engine(create_tiny_model(tmp_path_factory.mktemp("sweep") / "tiny"), "cpu")


@pytest.mark.parametrize(
    ("extra", "status", "fragment"),
    [
        ({"temperature": 1e-300}, 200, ""),  # logits / 1e-300 overflowed: a NaN softmax, a 500
        ({"temperature": 1, "seed": 2**70}, 400, "'seed' is invalid"),  # torch's generator overflowed: a 500
        ({"temperature": 1, "seed": -(2**63)}, 200, ""),
    ],
)
def test_sampling_values_the_model_cannot_take_are_served_or_refused_never_a_500(tiny_engine, extra, status, fragment):
    body = json.dumps({"prompt": "The", "max_tokens": 3, **extra}).encode()
    response = post(tiny_engine, COMPLETIONS, body)
    if status == 200:
        assert response.status_code == 200, response.text
        assert response.json()["usage"]["completion_tokens"] <= 3
    else:
        assert fragment in error_of(response, status)["message"]


def test_a_lone_surrogate_in_a_prompt_is_a_400_not_a_tokenizer_crash(tiny_engine):
    body = b'{"messages": [{"role": "user", "content": "\\udfff hi"}], "max_tokens": 2}'
    assert "lone UTF-16 surrogate" in error_of(post(tiny_engine, CHAT, body), 400)["message"]


def sse(text):
    return b'data: {"choices": [{"index": 0, "text": "%s"}]}\n\n' % text.encode()


REPLIES = {
    "good": (b"text/event-stream", sse("a") + sse("b") + b"data: [DONE]\n\n"),
    "html": (b"text/html", b"<html><body><h1>502 Bad Gateway</h1></body></html>\n"),
    "plain-json": (b"application/json", b'{"choices": [{"text": "not streamed"}]}'),
    "no-done": (b"text/event-stream", sse("a")),
}


async def _reply(reader, writer):
    """A loopback server answering each request by its prompt's name in REPLIES, keeping the connection."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            kind, body = REPLIES[json.loads(await reader.readexactly(length))["prompt"]]
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s" % (kind, len(body), body)
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


@pytest.mark.parametrize("client", ["callbacks", "httpx"])
def test_a_200_that_is_not_an_event_stream_fails_with_what_it_was_and_the_rest_keep_their_figures(client):
    async def go():
        server = await asyncio.start_server(_reply, "127.0.0.1", 0)
        target = parse_target(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        connect = connector(timeout_s=5) if client == "callbacks" else (lambda: httpx.AsyncClient(timeout=5))
        specs = [RequestSpec(prompt=name, max_tokens=2) for name in REPLIES]
        try:
            return await run_load(LoadPlan(requests=8, concurrency=3), specs, target, connect)
        finally:
            server.close()

    records = asyncio.run(go()).records
    errors = {list(REPLIES)[r.index % 4]: r.error for r in records}
    assert len(records) == 8 and [r.output_text for r in records if r.ok] == ["ab", "ab"]
    assert errors["html"] == (
        "the stream ended without [DONE] (the body began '<html><body><h1>502 Bad Gateway</h1></body></html>', "
        "not server-sent events)"
    )
    assert "not streamed" in errors["plain-json"]
    assert errors["no-done"] == "the stream ended without [DONE]", "a stream cut short is said as it was"


def test_a_conversation_the_chat_template_refuses_is_a_400(tiny_engine):
    # Gemma's and Mistral's templates raise on a system message or roles out of turn: the caller's to fix
    refusing = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    tiny_engine.tokenizer.chat_template = refusing + "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    try:
        messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
        error = error_of(post(tiny_engine, CHAT, json.dumps({"messages": messages}).encode()), 400)
        assert "chat template refuses these messages (System role not supported)" in error["message"]
        assert error["param"] == "messages"
        ok = post(tiny_engine, CHAT, json.dumps({"messages": messages[1:], "max_tokens": 2}).encode())
        assert ok.status_code == 200, ok.text
    finally:
        tiny_engine.tokenizer.chat_template = None
