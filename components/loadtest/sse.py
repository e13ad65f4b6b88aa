"""Streamed completions over HTTP/1.1 on asyncio's callbacks: the load generator's fast path for http:// servers.

`send_request` reads a response through an HTTP client's async iterators, so every read of every response wakes
a coroutine; at thousands of requests a second that costs more CPU than the parsing a load test exists for. Here
each connection is an `asyncio.Protocol`: the bytes a read brings are framed (Content-Length, chunked, or to the
connection's end), cut into whole lines and fed to the request's `Completion` in the callback that received them,
stamped with the time they arrived; the coroutine that sent the request wakes once, when its response has ended.
It behaves as `send_request` on `http1.Http1Client` does (the same records, errors and messages; keep-alive; one
retry of a kept connection the server had closed; the read timeout as the server's silence mid-request), which
`tests/unit/loadtest/test_loadgen_http1.py` checks by running its cases through both.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from typing import cast

from components.loadtest.client import Completion, Target, describe, encode_request, error_message
from components.loadtest.http1 import client_headers, route
from components.loadtest.records import RequestRecord, RequestSpec
from components.loadtest.wire import (
    READ_SIZE,
    Head,
    HttpError,
    RemoteProtocolError,
    connect_failure,
    parse_head,
    read_failure,
)

__all__ = ["SseClient"]

Clock = Callable[[], float]
_JSON = (("content-type", "application/json"),)

# Where a response is: what the next bytes are.
_HEAD, _LENGTH, _SIZE, _CHUNK, _CHUNK_END, _TRAILERS, _TO_CLOSE, _DONE = range(8)
_WHILE = {  # what the server was doing when the stream ended there (wire.Http1Response's words)
    _HEAD: "sending the response head",
    _SIZE: "sending a chunk's size",
    _CHUNK_END: "ending a chunk",
    _TRAILERS: "sending the trailers",
    _TO_CLOSE: "sending the body",
}
_FRAMING = {"empty": _DONE, "length": _LENGTH, "chunked": _SIZE, "close": _TO_CLOSE}


class _Stale(Exception):
    """A kept-alive connection was found closed before any byte of the response came."""


class _Connection(asyncio.Protocol):
    """One TCP connection carrying one request at a time; `exchange` sends it and reads the response as it comes."""

    def __init__(self, timeout_s: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.timeout_s = timeout_s
        self.transport: asyncio.Transport | None = None
        self.closed = self.timed_out = False
        self.waiter: asyncio.Future[BaseException | None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.deadline = 0.0
        self.stream: Completion | None = None
        self.clock: Clock = self.loop.time
        self.head = Head(0, "empty", 0, False)
        self.state = _DONE
        self.remaining = 0
        self.buffer = b""  # framing bytes not yet read: a head, a chunk-size line
        self.pending = b""  # the body's last line, not yet whole
        self.error_body: list[bytes] = []  # the body of a response that is not a 200, for its error message
        self.received = False

    # -- asyncio's callbacks --------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio's subclasses

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():
            self.close()  # bytes nobody asked for: the connection cannot be trusted with another request
            return
        now = self.clock()
        self.received = True
        self.deadline = self.loop.time() + self.timeout_s
        try:
            self._read(self.buffer + data if self.buffer else data, now)
        except (HttpError, ValueError, RecursionError) as err:
            self._end(err)

    def eof_received(self) -> bool:
        return False  # close: connection_lost says what that means

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._cancel_timer()
        if self.waiter is None or self.waiter.done():
            return
        if self.state == _TO_CLOSE and exc is None and not self.timed_out:
            self._body_end()  # the body was framed by the connection's end
            self._end(None)
        elif self.state == _HEAD and not self.received and not self.timed_out:
            self._end(_Stale())
        else:
            self._end(read_failure(self.timed_out, self.timeout_s, exc, self._where()))

    # -- one exchange ---------------------------------------------------------------------------------------------

    async def exchange(self, request: bytes, stream: Completion, clock: Clock) -> BaseException | None:
        """Send `request` and read its response into `stream`; the error that ended it early, or None."""
        assert self.transport is not None
        if self.closed or self.transport.is_closing():
            return _Stale()
        self.stream, self.clock = stream, clock
        self.state, self.buffer, self.pending, self.received = _HEAD, b"", b"", False
        self.error_body = []
        self.waiter = waiter = self.loop.create_future()
        self.deadline = self.loop.time() + self.timeout_s
        if self.timer is None and math.isfinite(self.deadline):
            self.timer = self.loop.call_at(self.deadline, self._watch)
        self.transport.write(request)
        try:
            return await waiter
        except BaseException:  # cancelled mid-response: the rest of it would arrive on the next request
            self.close()
            raise

    @property
    def status_code(self) -> int:
        return self.head.status_code

    @property
    def reusable(self) -> bool:
        """Whether the connection can carry the next request: the response was read to its end and may be kept."""
        return self.state == _DONE and self.head.keep and not self.closed

    def close(self) -> None:
        self._cancel_timer()
        if self.transport is not None:
            self.transport.close()
        self.closed = True

    # -- reading a response ---------------------------------------------------------------------------------------

    def _read(self, data: bytes, now: float) -> None:
        """Frame what has arrived; whatever cannot be read yet waits in `buffer` for the next bytes."""
        while data:
            state = self.state
            if state == _HEAD:
                end = data.find(b"\r\n\r\n")
                if end < 0:
                    if len(data) > READ_SIZE:
                        raise RemoteProtocolError("the server sent a response head over 64 KiB")
                    break
                self.head = head = parse_head(data[: end + 4], "POST")
                data = data[end + 4 :]
                if not 100 <= head.status_code < 200:  # 1xx: an interim answer; the real one follows
                    self.state, self.remaining = _FRAMING[head.framing], head.length
                    if self.state == _LENGTH and not self.remaining:
                        self.state = _DONE
            elif state == _LENGTH or state == _CHUNK:
                piece, data = data[: self.remaining], data[self.remaining :]
                self.remaining -= len(piece)
                self._body(piece, now)
                if not self.remaining:
                    self.state = _DONE if state == _LENGTH else _CHUNK_END
            elif state == _TO_CLOSE:
                self._body(data, now)
                data = b""
            elif state == _CHUNK_END:
                if len(data) < 2:
                    break
                if data[:2] != b"\r\n":
                    raise RemoteProtocolError("the server sent a chunk longer than its size")
                data, self.state = data[2:], _SIZE
            elif state == _SIZE or state == _TRAILERS:
                end = data.find(b"\r\n")
                if end < 0:
                    if len(data) > READ_SIZE:
                        raise RemoteProtocolError(f"the server sent an over-long line while {self._where()}")
                    break
                line, data = data[: end + 2], data[end + 2 :]
                if state == _TRAILERS:
                    if line == b"\r\n":
                        self.state = _DONE
                    continue
                try:
                    self.remaining = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    raise RemoteProtocolError(f"the server sent a bad chunk size {line[:20]!r}") from None
                self.state = _CHUNK if self.remaining else _TRAILERS
            else:  # _DONE with bytes left: more than the response; the connection is not kept
                self.head = self.head._replace(keep=False)
                data = b""
        self.buffer = data
        if self.state == _DONE:
            self._body_end()
            self._end(None)

    def _body(self, data: bytes, now: float) -> None:
        if self.head.status_code != 200:
            if sum(map(len, self.error_body)) < READ_SIZE:
                self.error_body.append(data)
            return
        stream = self.stream
        assert stream is not None
        if self.pending:
            data = self.pending + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self.pending = data
            return
        self.pending = data[cut + 1 :]
        if not stream.done:  # whole lines only: no character is cut in two
            stream.feed(data[:cut].decode("utf-8", "replace"), now)

    def _body_end(self) -> None:
        stream = self.stream
        if self.pending and stream is not None and not stream.done and self.head.status_code == 200:
            stream.feed(self.pending.decode("utf-8", "replace"), self.clock())
        self.pending = b""

    def _end(self, error: BaseException | None) -> None:
        if error is not None:
            self.close()
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(error)

    def _where(self) -> str:
        if self.state == _LENGTH:
            return f"sending the body ({self.remaining} bytes to come)"
        if self.state == _CHUNK:
            return f"sending a chunk ({self.remaining} bytes to come)"
        return _WHILE.get(self.state, "sending the response")

    # -- the read timeout -----------------------------------------------------------------------------------------

    def _watch(self) -> None:
        self.timer = None
        if self.waiter is None or self.waiter.done() or self.transport is None:
            return
        if self.loop.time() >= self.deadline:
            self.timed_out = True
            self.transport.abort()  # connection_lost names the timeout
        else:
            self.timer = self.loop.call_at(self.deadline, self._watch)

    def _cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class SseClient:
    """Streaming completion requests to one server over one kept-alive connection, one request at a time.

    The runner gives each request in flight a client of its own. `timeout_s` is how long the server may stay
    silent in the middle of a request, `connect_timeout_s` how long connecting may take; `headers` go with every
    request.
    """

    def __init__(
        self, *, timeout_s: float = 300.0, connect_timeout_s: float = 10.0, headers: Mapping[str, str] | None = None
    ) -> None:
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._extra = client_headers(headers)
        self._conn: _Connection | None = None

    async def _connect(self, origin: tuple[str, int]) -> _Connection:
        host, port = origin
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _, conn = await loop.create_connection(lambda: _Connection(self._timeout_s), host, port)
        except OSError as err:  # TimeoutError too
            raise connect_failure(host, port, err, self._connect_timeout_s) from None
        return conn

    async def send(
        self,
        target: Target,
        spec: RequestSpec,
        *,
        index: int = 0,
        t0: float = 0.0,
        clock: Clock,
        body: bytes | None = None,
    ) -> RequestRecord:
        """`send_request(client, target, spec, ...)`: one streaming request, measured; never raises for failures."""
        if body is None:
            body = encode_request(target, spec)
        origin, head = route("POST", target.endpoint, self._extra, _JSON)
        request = b"%scontent-length: %d\r\n\r\n%s" % (head, len(body), body)
        start = clock()
        stream = Completion(target.chat, start)
        conn = self._conn if self._conn is not None and not self._conn.closed else None
        reused = conn is not None
        while True:
            if conn is None:
                try:
                    conn = self._conn = await self._connect(origin)
                except HttpError as err:
                    return RequestRecord(index=index, start_s=start - t0, error=describe(err))
            error = await conn.exchange(request, stream, clock)
            if not isinstance(error, _Stale):
                break
            # A kept-alive connection the server had closed: nothing was answered, so sending again is safe (what
            # httpx and urllib3 do). Only once, and never on a fresh connection.
            conn.close()
            conn = self._conn = None
            if not reused:
                error = RemoteProtocolError("the server closed the connection without answering")
                break
            reused = False
        if conn is not None and not conn.reusable:
            conn.close()
            self._conn = None
        if error is not None:
            return RequestRecord(index=index, start_s=start - t0, error=describe(error))
        assert conn is not None
        if conn.status_code != 200:
            message = error_message(b"".join(conn.error_body))
            return RequestRecord(index=index, start_s=start - t0, error=f"HTTP {conn.status_code}: {message}")
        return stream.record(index, t0, clock)

    async def aclose(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
