"""The lean HTTP/1.1 client against scripted loopback servers: framing, streaming, keep-alive, failures as errors."""

from __future__ import annotations

import asyncio
import functools
import json
import queue
import threading
import time

import httpx
import pytest
import uvloop

from components.loadtest.client import parse_target, send_request
from components.loadtest.http1 import ConnectError, Http1Client, RemoteProtocolError
from components.loadtest.records import RequestSpec
from components.loadtest.runner import connector
from components.loadtest.session import Outcome, build_config, run_loadtest, run_loadtest_sync
from components.loadtest.sse import SseClient

SPEC = RequestSpec(prompt="hi", max_tokens=8)


def event(text=None, **fields):
    chunk = {"choices": [{"index": 0, "text": text}]} if text is not None else fields
    return f"data: {json.dumps(chunk)}\n\n".encode()


USAGE = event(choices=[], usage={"prompt_tokens": 2, "completion_tokens": 2})
SSE = event("a") + event("b") + USAGE + b"data: [DONE]\n\n"


class Server:
    """A loopback HTTP/1.1 server whose answers a test scripts: `respond(writer, request_number, request)`.

    It records the requests it read and how many connections were opened and open at once.
    """

    def __init__(self, respond):
        self.respond = respond
        self.requests: list[bytes] = []
        self.connections = self.open = self.peak_open = 0

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    async def _connection(self, reader, writer):
        self.connections += 1
        self.open += 1
        self.peak_open = max(self.peak_open, self.open)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                if await self.respond(writer, len(self.requests), head + body) is False:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client hung up, or the test is over
        finally:
            self.open -= 1
            writer.close()


def fixed(status=200, body=b"", headers=b"content-type: text/event-stream\r\n"):
    async def respond(writer, number, request):
        writer.write(b"HTTP/1.1 %d X\r\n%scontent-length: %d\r\n\r\n%s" % (status, headers, len(body), body))
        await writer.drain()

    return respond


def chunked(*pieces, pause=0.0):
    async def respond(writer, number, request):
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for piece in pieces:
            writer.write(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(pause)
        writer.write(b"0\r\nx-trailer: yes\r\n\r\n")
        await writer.drain()

    return respond


@pytest.fixture(params=["streams", "callbacks", "callbacks on uvloop"])
def measure(request):
    """Send `requests` streaming requests one after another through one client; the records and the server.

    Each test runs three times: through `send_request` on `Http1Client` (asyncio streams) and through
    `SseClient.send` (asyncio callbacks, what a load test of an http:// server uses), on asyncio's event loop and
    on uvloop's (which `run_loadtest_sync` runs), which must agree.
    """

    def measure(respond, *, timeout_s=5.0, requests=1):
        async def go():
            async with Server(respond) as server:
                target = parse_target(server.url)
                if request.param == "streams":
                    client = Http1Client(timeout_s=timeout_s)
                    send = functools.partial(send_request, client, target, SPEC, clock=time.perf_counter)
                else:
                    client = SseClient(timeout_s=timeout_s)
                    send = functools.partial(client.send, target, SPEC, clock=time.perf_counter)
                try:
                    records = [await send(index=i) for i in range(requests)]
                finally:
                    await client.aclose()
                return records, server

        return (uvloop.run if request.param == "callbacks on uvloop" else asyncio.run)(go())

    return measure


def test_content_length_stream_is_measured_and_the_connection_is_kept(measure):
    records, server = measure(fixed(body=SSE), requests=3)
    assert all(r.ok and r.output_text == "ab" for r in records), records
    assert (records[0].prompt_tokens, records[0].output_tokens) == (2, 2)
    assert server.connections == 1, "keep-alive: three requests, one connection"
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/completions HTTP/1.1\r\n") and b"content-type: application/json" in head
    assert json.loads(body)["stream"] is True and json.loads(body)["prompt"] == "hi"


def test_chunked_stream_with_extensions_and_trailers(measure):
    records, server = measure(chunked(event("x"), event("y") + event("z"), b"data: [DONE]\n\n", pause=0.01), requests=2)
    assert [r.output_text for r in records] == ["xyz", "xyz"]
    assert records[0].output_tokens == 3
    # y was sent 10 ms after x: it cannot be timed earlier (a busy loop may time either later, so only a bound).
    assert len(records[0].itl_ms) == 2 and records[0].ttft_ms + records[0].itl_ms[0] >= 9
    assert server.connections == 1


def test_sse_events_split_across_tcp_reads_are_put_together_and_timed_on_arrival(measure):
    first, second = event("He"), event("llo")

    async def respond(writer, number, request):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for piece in (first[:9], first[9:], second[:4], second[4:-1], second[-1:] + b"data: [DONE]\n\n"):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.03)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    (record,), _ = measure(respond)
    assert record.ok, record.error
    assert record.output_text == "Hello" and record.output_tokens == 2
    # "He" is whole with the 2nd piece (sent at 30 ms), "llo" with the 4th (at 90 ms): neither is timed before its
    # line is whole (a busy machine may time them later, so these are lower bounds).
    assert record.ttft_ms >= 25
    assert record.ttft_ms + record.itl_ms[0] >= 85


def test_a_500_is_a_request_error_and_the_connection_serves_the_next_request(measure):
    error, stream = fixed(500, b'{"error": {"message": "boom"}}'), fixed(body=SSE)

    async def respond(writer, number, request):
        await (error if number == 1 else stream)(writer, number, request)

    (failed, ok), server = measure(respond, requests=2)
    assert failed.error == "HTTP 500: boom" and failed.output_tokens == 0
    assert ok.ok and server.connections == 1


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_server_closing_the_connection_mid_stream_is_an_error(framing, measure):
    async def respond(writer, number, request):
        if framing == "chunked":
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n%x\r\n%s" % (100, event("a")))
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n%s" % event("a"))
        await writer.drain()
        return False  # hang up

    (record,), _ = measure(respond)
    assert not record.ok
    assert record.error.startswith("RemoteProtocolError: the server closed the connection while sending")


def test_a_body_that_ends_with_the_connection_is_read_to_its_end(measure):
    async def respond(writer, number, request):
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + SSE)
        await writer.drain()
        return False

    records, server = measure(respond, requests=2)
    assert [r.output_text for r in records] == ["ab", "ab"]
    assert server.connections == 2, "the server said close: a new connection for the second request"


def test_a_silent_server_times_out_as_a_request_error(measure):
    async def respond(writer, number, request):
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(5)

    started = time.perf_counter()
    (record,), _ = measure(respond, timeout_s=0.2)
    assert record.error == "ReadTimeout: the server sent nothing for 0.2 s while sending a chunk's size"
    assert time.perf_counter() - started < 3


def test_an_interim_response_is_skipped_for_the_real_one(measure):
    async def respond(writer, number, request):
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await fixed(body=SSE)(writer, number, request)

    records, server = measure(respond, requests=2)
    assert [r.output_text for r in records] == ["ab", "ab"] and server.connections == 1


@pytest.mark.parametrize("count", ['"2"', "-1", "1.5", "true", "null", '{"n": 1}'])
def test_a_usage_count_that_is_not_a_whole_number_is_not_believed(count, measure):
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":%s,"completion_tokens":%s}}\n\n' % ((count.encode(),) * 2)
    (record,), _ = measure(fixed(body=event("a") + event("b") + event("c") + usage + b"data: [DONE]\n\n"))
    assert record.ok, record.error
    assert (record.output_tokens, record.prompt_tokens) == (3, 0), "the text chunks counted instead"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"zz\r\n", "RemoteProtocolError: the server sent a bad chunk size b'zz\\r\\n'"),
        (b"2\r\nabcd\r\n", "RemoteProtocolError: the server sent a chunk longer than its size"),
    ],
)
def test_a_malformed_chunk_is_a_protocol_error(body, error, measure):
    async def respond(writer, number, request):
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + body)
        await writer.drain()
        await asyncio.sleep(0.2)
        return False

    (record,), _ = measure(respond)
    assert record.error == error


def test_a_chunk_that_is_not_json_fails_its_request_and_the_next_one_gets_a_new_connection(measure):
    bad, good = fixed(body=b"data: {not json\n\n" + SSE), fixed(body=SSE)

    async def respond(writer, number, request):
        await (bad if number == 1 else good)(writer, number, request)

    (failed, ok), server = measure(respond, requests=2)
    assert failed.error.startswith("JSONDecodeError: ") and ok.ok
    assert server.connections == 2, "a response left half read cannot carry the next request"


def test_an_error_event_fails_its_request_and_the_connection_is_kept(measure):
    error = b'data: {"error": {"message": "overloaded"}}\n\n'
    records, server = measure(fixed(body=event("a") + error + SSE), requests=2)
    assert [r.error for r in records] == ["error event: overloaded"] * 2 and server.connections == 1


def test_a_server_that_closes_after_each_response_gets_a_new_connection_each_time(measure):
    async def respond(writer, number, request):
        await fixed(body=SSE)(writer, number, request)
        return False  # closes without saying so

    records, server = measure(respond, requests=3)
    assert [r.error for r in records] == [None] * 3 and server.connections == 3


def test_a_server_that_hangs_up_without_answering_fails_the_request(measure):
    async def respond(writer, number, request):
        return False

    (record,), server = measure(respond)
    assert record.error == "RemoteProtocolError: the server closed the connection without answering"
    assert server.connections == 1, "a fresh connection is not sent again"


@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_the_callback_client_connects_refuses_and_cancels_cleanly(unused_port, run):
    async def slow(writer, number, request):
        if number == 1:  # the head, then silence
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(5)
        await chunked(event("o"), b"data: [DONE]\n\n")(writer, number, request)

    async def go():
        refused = await SseClient().send(parse_target(f"http://127.0.0.1:{unused_port}"), SPEC, clock=time.perf_counter)
        async with Server(slow) as server:
            client, target = SseClient(), parse_target(server.url)
            task = asyncio.create_task(client.send(target, SPEC, clock=time.perf_counter))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            record = await client.send(target, SPEC, clock=time.perf_counter)
            await client.aclose()
            return refused, record, server

    refused, record, server = run(go())
    assert refused.error == f"ConnectError: cannot connect to 127.0.0.1:{unused_port} (Connection refused)"
    assert record.ok and server.connections == 2, "the cancelled request's connection was not used again"


def test_a_refused_connection_is_a_connect_error(unused_port):
    async def go():
        async with Http1Client() as client:
            target = parse_target(f"http://127.0.0.1:{unused_port}")
            record = await send_request(client, target, SPEC, clock=time.perf_counter)
            with pytest.raises(ConnectError, match=f"cannot connect to 127.0.0.1:{unused_port}"):
                await client.get(f"http://127.0.0.1:{unused_port}/health")
            return record

    record = asyncio.run(go())
    assert record.error.startswith(f"ConnectError: cannot connect to 127.0.0.1:{unused_port} (")


def test_a_kept_connection_the_server_closed_is_replaced_once_without_an_error():
    async def respond(writer, number, request):
        await fixed(body=SSE)(writer, number, request)
        return False  # closes after every response without saying so

    async def go():
        async with Server(respond) as server:
            async with Http1Client() as client:
                first = await client.request("POST", server.url + "/v1/completions", json={})
                await asyncio.sleep(0.05)  # the close reaches us: the idle connection is seen closed
                second = await client.request("POST", server.url + "/v1/completions", json={})
            return first, second, server

    first, second, server = asyncio.run(go())
    assert first.status_code == second.status_code == 200 and server.connections == 2


def test_a_kept_connection_that_dies_with_the_next_request_is_retried_once_on_a_new_one():
    async def respond(writer, number, request):
        if number == 2:
            return False  # the server dropped the kept connection just as the second request came in
        await fixed(body=b"{}", headers=b"")(writer, number, request)

    async def go():
        async with Server(respond) as server, Http1Client() as client:
            statuses = [(await client.get(server.url + "/health")).status_code for _ in range(3)]
            return statuses, server

    statuses, server = asyncio.run(go())
    assert statuses == [200, 200, 200]
    assert len(server.requests) == 4 and server.connections == 2, "the second request was sent twice"


def test_a_server_that_hangs_up_without_answering_is_a_protocol_error():
    async def respond(writer, number, request):
        return False

    async def go():
        async with Server(respond) as server, Http1Client() as client:
            with pytest.raises(RemoteProtocolError, match="without answering"):
                await client.get(server.url + "/health")

    asyncio.run(go())


def test_the_pool_never_opens_more_connections_than_allowed():
    async def respond(writer, number, request):
        await asyncio.sleep(0.02)
        await fixed(body=b'{"ok": true}', headers=b"")(writer, number, request)

    async def go():
        async with Server(respond) as server:
            async with Http1Client(connections=2) as client:
                responses = await asyncio.gather(*(client.get(server.url + "/x") for _ in range(6)))
            return responses, server

    responses, server = asyncio.run(go())
    assert [r.json() for r in responses] == [{"ok": True}] * 6
    assert server.peak_open <= 2 and server.connections == 2
    assert responses[0].headers["content-length"] == "12"


def test_only_http_is_spoken_and_https_goes_through_httpx():
    async def go():
        async with Http1Client() as client:
            with pytest.raises(ValueError, match="not an http:// URL"):
                await client.get("https://example.com/")

    asyncio.run(go())
    assert isinstance(connector(tls=True)(), httpx.AsyncClient)
    assert isinstance(connector()(), SseClient)


def test_a_whole_load_test_runs_on_the_lean_client():
    async def respond(writer, number, request):
        if request.startswith(b"GET /v1/models"):
            await fixed(body=b'{"data": [{"id": "m"}]}', headers=b"")(writer, number, request)
        elif number % 4 == 0:
            await fixed(503, b"overloaded")(writer, number, request)
        else:
            await chunked(event("o"), event("k"), b"data: [DONE]\n\n")(writer, number, request)

    async def go():
        async with Server(respond) as server:
            outcome = await run_loadtest(build_config(url=server.url, requests=20, concurrency=4))
            return outcome, server

    outcome, server = asyncio.run(go())
    assert outcome.model == "m" and len(outcome.records) == 20
    assert outcome.metrics.errors == 5 and outcome.metrics.top_errors == {"HTTP 503: overloaded": 5}
    assert outcome.metrics.completed == 15 and outcome.metrics.total_output_tokens == 30
    assert server.connections <= 5, "4 in flight plus the model lookup, each kept alive"
    assert not outcome.verdict.passed and "5 of 20 requests failed" in outcome.verdict.reason


@pytest.fixture
def unused_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_blocking_run_returns_the_outcome_without_formatting_it(monkeypatch):
    # On its way out, asyncio.run formats the repr of its main task (CPython 3.11, looking up its SIGINT handler):
    # were the outcome that task's result, it would format every request record, and throw the text away.
    monkeypatch.setattr(Outcome, "__repr__", lambda self: pytest.fail("the whole outcome was formatted"))
    urls: queue.Queue[str] = queue.Queue()
    stop = threading.Event()

    async def serve():
        async with Server(chunked(event("o"), b"data: [DONE]\n\n")) as server:
            urls.put(server.url)
            while not stop.is_set():
                await asyncio.sleep(0.01)

    thread = threading.Thread(target=asyncio.run, args=(serve(),))
    thread.start()
    try:
        outcome = run_loadtest_sync(build_config(url=urls.get(timeout=10), requests=4, concurrency=2, model="m"))
    finally:
        stop.set()
        thread.join()
    assert len(outcome.records) == 4 and outcome.metrics.completed == 4
