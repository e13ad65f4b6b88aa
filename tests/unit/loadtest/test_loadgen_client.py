"""One streamed request, measured: SSE parsing, timings on a ticking clock, failures as records."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from components.loadtest import client
from components.loadtest.client import Unreachable, discover_model, parse_target, send_request, wait_healthy
from components.loadtest.records import RequestSpec

SPEC = RequestSpec(prompt="hi", max_tokens=8)


def sse(*events):
    return b"".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events)


def text_chunk(text, finish=None):
    return {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": finish}]}


def chat_chunk(delta, finish=None):
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class Ticks:
    """A clock that advances 1 ms per reading: timings become exact counts of readings."""

    def __init__(self):
        self.readings = 0

    def __call__(self):
        self.readings += 1
        return self.readings / 1000


def send(handler, target=None, clock=None):
    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            return await send_request(
                client, target or parse_target("http://llm:8000"), SPEC, index=3, t0=0.0, clock=clock or Ticks()
            )

    return asyncio.run(go())


class Pieces(httpx.AsyncByteStream):
    """A body that arrives in these pieces, one read each."""

    def __init__(self, *pieces):
        self.pieces = pieces

    async def __aiter__(self):
        for piece in self.pieces:
            yield piece


def test_completion_stream_is_measured_chunk_by_chunk():
    seen = {}

    def handler(request):
        seen["url"], seen["body"] = str(request.url), json.loads(request.content)
        events = [text_chunk(""), text_chunk("a"), text_chunk("b"), text_chunk("c"), text_chunk("", "length"),
                  {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 3}}, "[DONE]"]  # fmt: skip
        return httpx.Response(200, stream=Pieces(*map(sse, events)), headers={"content-type": "text/event-stream"})

    record = send(handler)
    assert seen["url"] == "http://llm:8000/v1/completions"
    assert seen["body"]["stream"] is True and seen["body"]["stream_options"] == {"include_usage": True}
    assert seen["body"]["prompt"] == "hi" and seen["body"]["max_tokens"] == 8 and "model" not in seen["body"]
    assert record.ok and record.output_text == "abc" and record.index == 3
    # clock readings: start=1, then one per read: role chunk=2, a=3, b=4, c=5 (ms)
    assert record.ttft_ms == pytest.approx(2.0)
    assert record.itl_ms == pytest.approx((1.0, 1.0))
    assert record.latency_ms == pytest.approx(4.0)
    assert (record.prompt_tokens, record.output_tokens) == (2, 3)
    assert record.tpot_ms == pytest.approx(1.0)


def test_tokens_one_read_brought_share_its_arrival_time():
    """As vLLM's benchmark stamps a chunk: when the read returned, not when our parser reached each token."""

    def handler(request):
        lines = sse(text_chunk("a"), text_chunk("b")).decode()
        cut = lines.index("\n\n") + 2 + 10  # the second event cut in two: its token arrives with the next read
        pieces = [lines[:cut].encode(), lines[cut:].encode() + sse(text_chunk("c"), "[DONE]")]
        return httpx.Response(200, stream=Pieces(*pieces))

    record = send(handler)
    # readings: start=1, first read=2 (a), second read=3 (b and c)
    assert record.ok and record.output_text == "abc"
    assert record.ttft_ms == pytest.approx(1.0)
    assert record.itl_ms == pytest.approx((1.0, 0.0))
    assert record.latency_ms == pytest.approx(2.0)


def test_chat_stream_without_usage_counts_text_chunks():
    def handler(request):
        assert json.loads(request.content)["messages"] == [{"role": "user", "content": "hi"}]
        body = sse(chat_chunk({"role": "assistant", "content": ""}), chat_chunk({"content": "Hel"}),
                   chat_chunk({"content": "lo"}), chat_chunk({}, "stop"), "[DONE]")  # fmt: skip
        return httpx.Response(200, content=body)

    target = parse_target("http://llm:8000/v1", chat=True).model_copy(update={"model": "m"})
    record = send(handler, target)
    assert record.ok and record.output_text == "Hello" and record.output_tokens == 2


@pytest.mark.parametrize(
    ("response", "fragment"),
    [
        (httpx.Response(500, json={"error": {"message": "CUDA out of memory"}}), "HTTP 500: CUDA out of memory"),
        (httpx.Response(429, text="slow down"), "HTTP 429: slow down"),
        (httpx.Response(200, content=sse(text_chunk("a"), {"error": {"message": "died"}})), "error event: died"),
        (httpx.Response(200, content=sse(text_chunk("a"))), "without [DONE]"),
        (httpx.Response(200, content=b"data: {not json\n\n"), "JSONDecodeError"),
        (httpx.Response(200, content=sse(["a list"])), "not a JSON object"),
        # a chunk nested deeper than Python's parser recurses (a hostile server): once an exception out of the run
        (httpx.Response(200, content=sse("[" * 50_000 + "]" * 50_000)), "RecursionError"),
        (httpx.Response(500, content=b"[" * 50_000 + b"]" * 50_000), "HTTP 500: [[["),
    ],
)
def test_a_failed_request_is_a_record_with_an_error_not_an_exception(response, fragment):
    record = send(lambda request: response)
    assert not record.ok and fragment in record.error
    assert record.output_tokens == 0 and record.index == 3


def test_a_refused_connection_is_a_record_too():
    def handler(request):
        raise httpx.ConnectError("Connection refused", request=request)

    record = send(handler)
    assert record.error == "ConnectError: Connection refused"


def test_an_empty_completion_still_completes():
    record = send(lambda request: httpx.Response(200, content=sse(text_chunk("", "stop"), "[DONE]")))
    assert record.ok and record.output_tokens == 0 and record.ttft_ms == record.latency_ms > 0


@pytest.mark.parametrize(
    ("url", "chat", "endpoint"),
    [
        ("http://h:8000", False, "http://h:8000/v1/completions"),
        ("http://h:8000/", True, "http://h:8000/v1/chat/completions"),
        ("https://api.example.com/v1", False, "https://api.example.com/v1/completions"),
        ("http://h/proxy", False, "http://h/proxy/v1/completions"),
        ("http://h:1/v1/chat/completions", False, "http://h:1/v1/chat/completions"),
    ],
)
def test_targets_from_base_or_endpoint_urls(url, chat, endpoint):
    target = parse_target(url, chat=chat)
    assert target.endpoint == endpoint and target.origin == url.split("/", 3)[0] + "//" + url.split("/")[2]
    assert target.chat == endpoint.endswith("chat/completions")


@pytest.mark.parametrize("url", ["localhost:8000", "ftp://h", "http://:8000", "http:///v1"])
def test_a_url_that_is_not_http_is_refused_in_one_sentence(url):
    with pytest.raises(ValueError, match=r"not an http\(s\) URL"):
        parse_target(url)


@pytest.mark.parametrize("url", ["http://h:99999", "http://h:0", "http://h:abc/v1", "https://h:-1"])
def test_a_port_out_of_range_is_refused_in_one_sentence(url):
    # urlsplit raised its own ValueError only when the port was read, deep in the client: an internal error
    with pytest.raises(ValueError, match="has a port that is not a number from 1 to 65535"):
        parse_target(url)


def test_model_discovery_and_unreachable_servers():
    def models(request):
        return httpx.Response(200, json={"object": "list", "data": [{"id": "tiny"}]})

    def refused(request):
        raise httpx.ConnectError("All connection attempts failed", request=request)

    async def go(handler):
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            return await discover_model(client, parse_target("http://h:8000"))

    assert asyncio.run(go(models)) == "tiny"
    assert asyncio.run(go(lambda r: httpx.Response(404))) is None
    with pytest.raises(Unreachable, match=r"cannot reach http://h:8000 \(ConnectError"):
        asyncio.run(go(refused))


def test_waiting_for_health_polls_until_ready_or_gives_up():
    calls = []

    def handler(request):
        calls.append(request.url.path)
        return httpx.Response(200 if len(calls) >= 3 else 503)

    now = [0.0]

    async def sleep(seconds):
        now[0] += seconds

    async def go(handler, timeout):
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            await wait_healthy(client, "http://h:8000", timeout, clock=lambda: now[0], sleep=sleep)

    asyncio.run(go(handler, 10))
    assert calls == ["/health"] * 3
    with pytest.raises(Unreachable, match="did not become healthy within 2 s"):
        asyncio.run(go(lambda r: httpx.Response(503), 2))


def test_a_character_cut_between_reads_arrives_whole():
    def handler(request):
        body = sse(json.dumps(text_chunk("é€"), ensure_ascii=False), "[DONE]")  # UTF-8 on the wire
        cut = body.index("€".encode()) + 1  # inside the euro sign's three bytes
        return httpx.Response(200, stream=Pieces(body[:cut], body[cut:]))

    record = send(handler)
    assert record.ok and record.output_text == "é€" and record.output_tokens == 1


# Chunks are read by orjson where it gives json's answer, by json where it does not: a server's odd JSON makes the
# same record either way.


@pytest.mark.parametrize(
    ("chunk", "text"),
    [
        ('{"choices": [{"text": "a"}], "score": NaN}', "a"),  # orjson refuses NaN and Infinity; json reads them
        ('{"choices": [{"text": "a"}], "score": -Infinity}', "a"),
        ('{"choices": [{"text": "\\ud800"}]}', "\ud800"),  # a lone surrogate, which orjson refuses
    ],
)
def test_a_chunk_only_pythons_json_reads_is_read(chunk, text):
    record = send(lambda request: httpx.Response(200, content=sse(chunk, "[DONE]")))
    assert record.ok and record.output_text == text


def test_usage_counts_past_64_bits_are_whole_numbers_as_json_reads_them():
    usage = {"choices": [], "usage": {"prompt_tokens": 2**64, "completion_tokens": 2**70}}
    record = send(lambda request: httpx.Response(200, content=sse(text_chunk("a"), usage, "[DONE]")))
    assert (record.prompt_tokens, record.output_tokens) == (2**64, 2**70)


@pytest.mark.parametrize(
    ("chunk", "error"),
    [
        ('{"choices": []} and more', "ValueError: the server sent a chunk with text after its JSON: {"),
        ("{'choices': []}", "JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2"),
        # nested 1,000 deep: past json's recursion limit, within orjson's (1,024); still an error
        ('{"x": ' + "[" * 1000 + "]" * 1000 + "}", "RecursionError: maximum recursion depth exceeded"),
    ],
)
def test_a_chunk_json_refuses_fails_its_request_with_jsons_words(chunk, error):
    record = send(lambda request: httpx.Response(200, content=sse(chunk, "[DONE]")))
    assert record.error is not None and record.error.startswith(error), record.error


def _wide(value):
    """`value` with the integers past 64 bits as floats: what orjson makes of them (usage counts are read again)."""
    if isinstance(value, dict):
        return {key: _wide(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_wide(item) for item in value]
    return float(value) if type(value) is int and not -(2**63) <= value < 2**64 else value


def _read(parse, data):
    try:
        return repr(_wide(parse(data)))
    except (ValueError, RecursionError) as err:
        return f"{type(err).__name__}: {err}"


_JSONISH = st.text(alphabet='{}[]:,"\\ 0123456789-+.eEtrufalsnNIyx\t\n\r\x0c\u00e9\x00', max_size=40)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
    max_leaves=8,
)


@given(st.one_of(_JSONISH, _VALUES.map(json.dumps), st.tuples(_VALUES.map(json.dumps), _JSONISH).map("".join)))
@example('{"a": 1, "a": 2}')
@example('{"n": 18446744073709551616, "m": -9223372036854775809}')
@example('[1.5e400, "\\udc00"]')
@example("01")
@example("\ufeff{}")
def test_chunks_are_read_as_pythons_json_reads_them(data):
    data = data.strip()  # as an event's data is
    assert _read(client._parse, data) == _read(client._json_chunk, data)
