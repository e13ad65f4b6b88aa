"""The OpenAI API over a fake engine: streaming equals non-streaming, usage, chat, errors, /health while busy."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest

from components.serving.app import create_app
from components.serving.engine import Sampling, plain_chat

EOS = 0


class FakeEngine:
    """One token per character; answers with the prompt's last word reversed, then ends (or fails, or waits)."""

    context_length = 64

    def __init__(self):
        self.release = threading.Event()
        self.release.set()
        self.started = threading.Event()

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(chr(i) for i in ids)

    def render_chat(self, messages):
        return plain_chat(messages)

    def start(self, prompt_ids, sampling: Sampling):
        prompt = self.decode(prompt_ids)
        answer = [ord(c) for c in (prompt.split() or [""])[-1][::-1]] + [EOS]
        engine = self

        class Decoding:
            produced = 0

            def step(self):
                engine.started.set()
                assert engine.release.wait(10)
                if "boom" in prompt and self.produced == 2:
                    raise RuntimeError("the GPU fell off the bus")
                if self.produced >= sampling.max_tokens:
                    return None
                token = answer[self.produced]
                self.produced += 1
                return None if token == EOS else token

        return Decoding()


def call(coro_factory, engine=None):
    engine = engine or FakeEngine()

    async def go():
        transport = httpx.ASGITransport(app=create_app(engine, "fake"))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await coro_factory(client)

    return asyncio.run(go())


def post(path, body):
    return call(lambda c: c.post(path, json=body) if isinstance(body, dict) else c.post(path, content=body))


def events(response):
    assert response.headers["content-type"].startswith("text/event-stream")
    raw = response.text
    assert raw.endswith("data: [DONE]\n\n")
    blocks = raw.split("\n\n")[:-2]
    assert all(b.startswith("data: ") for b in blocks)
    return [json.loads(b.removeprefix("data: ")) for b in blocks]


def test_a_completion_with_usage():
    response = post("/v1/completions", {"prompt": "say olleh", "max_tokens": 10})
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "text_completion" and body["model"] == "fake"
    assert body["choices"][0]["text"] == "hello" and body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}


def test_max_tokens_cuts_with_finish_reason_length_and_defaults_to_16():
    body = post("/v1/completions", {"prompt": "x abcdefgh", "max_tokens": 3}).json()
    assert body["choices"][0] == {"index": 0, "text": "hgf", "logprobs": None, "finish_reason": "length"}
    body = post("/v1/completions", {"prompt": "x " + "a" * 20}).json()
    assert body["usage"]["completion_tokens"] == 16


def test_streamed_chunks_concatenate_to_the_non_streamed_text():
    request = {"prompt": "go dlrow olleh", "max_tokens": 12, "stop": "o"}
    whole = post("/v1/completions", request).json()
    chunks = events(post("/v1/completions", {**request, "stream": True, "stream_options": {"include_usage": True}}))
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == whole["choices"][0]["text"] == "hell"
    assert chunks[-2]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == whole["usage"]
    assert len({c["id"] for c in chunks}) == 1
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["text"]) == 4, "one chunk per token"


def test_chat_uses_role_lines_for_a_model_without_a_template():
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "iH"}]},
    ]
    assert plain_chat([{"role": "user", "content": "iH"}]) == "user: iH\nassistant:"
    body = post("/v1/chat/completions", {"messages": messages, "max_tokens": 8}).json()
    assert body["object"] == "chat.completion"
    # the prompt ends in "assistant:", and the fake answers with the prompt's last word reversed
    assert body["choices"][0]["message"] == {"role": "assistant", "content": ":tnatsis"}
    assert body["usage"]["prompt_tokens"] == len("system: be brief\nuser: iH\nassistant:")


def test_streamed_chat_starts_with_the_role_and_ends_with_a_finish_reason():
    request = {"messages": [{"role": "user", "content": "cba"}], "max_completion_tokens": 3}
    whole = post("/v1/chat/completions", request).json()["choices"][0]["message"]["content"]
    chunks = events(post("/v1/chat/completions", {**request, "stream": True}))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[0]["object"] == "chat.completion.chunk"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == whole
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "length"}


@pytest.mark.parametrize(
    ("path", "body", "status", "fragment"),
    [
        ("/v1/completions", b"{nope", 400, "not valid JSON"),
        ("/v1/completions", b"[1, 2]", 400, "must be a JSON object"),
        ("/v1/completions", {"max_tokens": 3}, 400, "'prompt' is required"),
        ("/v1/completions", {"prompt": "a", "max_tokens": 0}, 400, "'max_tokens' is invalid"),
        ("/v1/completions", {"prompt": "a", "temperature": 9}, 400, "'temperature' is invalid"),
        ("/v1/completions", {"prompt": ["a", "b"]}, 400, "one prompt per request"),
        ("/v1/completions", {"prompt": "a", "n": 3}, 400, "only n=1 is supported"),
        ("/v1/completions", {"prompt": "a", "stop": [""]}, 400, "must not be empty"),
        ("/v1/completions", {"prompt": "a" * 60, "max_tokens": 10}, 400, "context is 64 tokens"),
        ("/v1/completions", {"prompt": "a", "model": "gpt-9"}, 404, "'gpt-9' is not served here"),
        ("/v1/chat/completions", {"messages": []}, 400, "'messages' is invalid"),
        ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, 400, "'messages.0.role'"),
        ("/v1/embeddings", {"input": "x"}, 404, "POST /v1/embeddings is not served here"),
    ],
)
def test_bad_requests_get_one_sentence_in_openai_error_shape(path, body, status, fragment):
    response = post(path, body)
    assert response.status_code == status
    error = response.json()["error"]
    assert fragment in error["message"] and error["message"].count(". ") == 0 and error["message"].endswith(".")
    assert set(error) == {"message", "type", "param", "code"}


def test_models_and_health():
    async def go(client):
        return (await client.get("/health")).json(), (await client.get("/v1/models")).json()

    health, models = call(go)
    assert health == {"status": "ok"}
    assert models["data"][0]["id"] == "fake" and models["data"][0]["max_model_len"] == 64


def test_a_model_failure_is_a_500_or_an_error_event_and_the_server_goes_on():
    assert post("/v1/completions", {"prompt": "boom abc"}).status_code == 500
    chunks = events(post("/v1/completions", {"prompt": "boom abc", "stream": True}))
    assert "the GPU fell off the bus" in chunks[-1]["error"]["message"]
    assert post("/v1/completions", {"prompt": "fine abc"}).json()["choices"][0]["text"] == "cba"


def test_health_answers_while_a_generation_is_running():
    engine = FakeEngine()
    engine.release.clear()  # the model is busy until we say so

    async def go(client):
        generation = asyncio.create_task(client.post("/v1/completions", json={"prompt": "a xyz"}))
        while not engine.started.is_set():
            await asyncio.sleep(0.01)
        health = await client.get("/health")
        still_running = not generation.done()
        engine.release.set()
        return health.status_code, still_running, (await generation).json()["choices"][0]["text"]

    assert call(go, engine) == (200, True, "zyx")
