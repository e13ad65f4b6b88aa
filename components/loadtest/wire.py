"""HTTP/1.1 on one kept-alive connection: how a response's body is framed and read, a watchdog, and the errors.

A response is read as it arrives (`Http1Response.aiter_bytes`, `aiter_lines`), framed by Content-Length,
chunked encoding or the end of the connection. A read timeout is the server's silence for `timeout_s` in the
middle of a request: one lazy timer per connection watches it, because a timeout context around every read
would cost more CPU than the read. Errors form one tree under `HttpError`: `ConnectError` (`ConnectTimeout`),
`ReadError`, `ReadTimeout` and `RemoteProtocolError` (a malformed response, or a connection closed before the
response ended). `http1.Http1Client` puts these connections in a pool.
"""

from __future__ import annotations

import asyncio
import functools
import json as jsonlib
import math
import os
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

__all__ = [
    "READ_SIZE",
    "ConnectError",
    "ConnectTimeout",
    "Connection",
    "Head",
    "Http1Response",
    "HttpError",
    "ReadError",
    "ReadTimeout",
    "RemoteProtocolError",
    "connect_failure",
    "parse_head",
    "read_failure",
]

READ_SIZE = 65536  # the most one read asks for (also the longest response head or chunk-size line)


class HttpError(Exception):
    """A request failed before a whole response arrived; the message says why in one sentence."""


class ConnectError(HttpError):
    """No connection to the server: refused, unresolvable, unreachable."""


class ConnectTimeout(ConnectError):
    """The server did not accept the connection in time."""


class ReadError(HttpError):
    """The connection broke while a request was sent or its response read (reset, broken pipe)."""


class ReadTimeout(HttpError):
    """The server sent nothing for longer than the read timeout."""


class RemoteProtocolError(HttpError):
    """The server answered something that is not HTTP/1.1, or closed the connection before the response ended."""


class Connection:
    """One TCP connection, and a watchdog that aborts it when the server stays silent for `timeout_s` mid-request."""

    __slots__ = ("origin", "reader", "writer", "timeout_s", "deadline", "busy", "timed_out", "_loop", "_timer")

    def __init__(
        self, origin: tuple[str, int], reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout_s: float
    ) -> None:
        self.origin = origin
        self.reader = reader
        self.writer = writer
        self.timeout_s = timeout_s
        self.deadline = 0.0
        self.busy = False
        self.timed_out = False
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None

    def touch(self) -> None:
        """The server just spoke (or a request starts): the silence allowed starts again from now."""
        self.deadline = self._loop.time() + self.timeout_s
        if self._timer is None and math.isfinite(self.deadline):
            self._timer = self._loop.call_at(self.deadline, self._watch)

    def _watch(self) -> None:
        self._timer = None
        if not self.busy:
            return
        if self._loop.time() >= self.deadline:
            self.timed_out = True
            self.writer.transport.abort()  # the pending read sees the end of the stream; `failure` names it
        else:
            self._timer = self._loop.call_at(self.deadline, self._watch)

    @property
    def usable(self) -> bool:
        """Whether an idle connection can carry another request (the server may have closed it meanwhile)."""
        return not (self.timed_out or self.reader.at_eof() or self.writer.is_closing())

    def failure(self, err: BaseException | None, what: str) -> HttpError:
        """The error to raise for a read that failed (`err`) or hit the end of the stream (None) while `what`."""
        return read_failure(self.timed_out, self.timeout_s, err, what)

    def close(self) -> None:
        """Close the socket now (nothing waits for the peer)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.busy = False
        self.writer.close()


def read_failure(timed_out: bool, timeout_s: float, err: BaseException | None, what: str) -> HttpError:
    """The error for a read that failed (`err`), hit the end of the stream (None) or was timed out, while `what`."""
    if timed_out:
        return ReadTimeout(f"the server sent nothing for {timeout_s:g} s while {what}")
    if err is None:
        return RemoteProtocolError(f"the server closed the connection while {what}")
    reason = getattr(err, "strerror", None) or str(err) or type(err).__name__
    return ReadError(f"the connection broke while {what} ({reason})")


def connect_failure(host: str, port: int, err: OSError, limit_s: float) -> ConnectError:
    """The error for a connection that timed out (`TimeoutError`) or was refused, unresolvable, unreachable."""
    if isinstance(err, TimeoutError):
        return ConnectTimeout(f"{host}:{port} did not accept a connection within {limit_s:g} s")
    # asyncio words a refusal "Connect call failed (...)": say what errno says
    reason = os.strerror(err.errno) if isinstance(err.errno, int) and err.errno > 0 else err.strerror or err
    return ConnectError(f"cannot connect to {host}:{port} ({reason})")


class Head(NamedTuple):
    """What frames a response's body, from its head: the status, how the body ends, its length, keep-alive."""

    status_code: int
    framing: str  # "empty", "chunked", "length" or "close" (the body ends when the server closes the connection)
    length: int
    keep: bool


@functools.lru_cache(maxsize=256)
def parse_head(head: bytes, method: str) -> Head:
    """The framing of a response whose head (status line and headers, CRLF-separated) is `head`.

    Cached: a server sends the same head again and again (or one per second, with a Date).
    """
    line = head[: head.find(b"\r\n")]
    if not (line.startswith(b"HTTP/1.") and line[8:9] == b" " and line[9:12].isdigit()):
        shown = line[:60].decode("latin-1")
        raise RemoteProtocolError(f"the server answered {shown!r}, not an HTTP/1.1 status line")
    status = int(line[9:12])
    lower = head.lower()
    connection = _field(lower, b"connection") or b""
    keep = b"close" not in connection if line[7:8] == b"1" else b"keep-alive" in connection
    if method == "HEAD" or status in (204, 304) or status < 200:
        return Head(status, "empty", 0, keep)
    if b"chunked" in (_field(lower, b"transfer-encoding") or b""):
        return Head(status, "chunked", 0, keep)
    if (length := _field(lower, b"content-length")) is not None:
        if not length.isdigit():
            raise RemoteProtocolError(f"the server sent a Content-Length of {length[:20].decode('latin-1')!r}")
        return Head(status, "length", int(length), keep)
    return Head(status, "close", 0, False)


def _field(head: bytes, name: bytes) -> bytes | None:
    """The value of header `name` (lower case) in a lower-cased response head, or None when it is absent."""
    start = head.find(b"\r\n" + name + b":")
    if start < 0:
        return None
    start += len(name) + 3
    return head[start : head.find(b"\r\n", start)].strip()


class Http1Response:
    """A response whose head has arrived; its body is read with `aiter_bytes`, `aiter_lines` or `aread`.

    Only what frames the body (Content-Length, Transfer-Encoding, Connection) is parsed up front; `headers`
    parses the rest when asked.
    """

    __slots__ = ("status_code", "complete", "_head", "_conn", "_framing", "_length", "_content", "_keep")

    def __init__(self, conn: Connection, head: bytes, method: str) -> None:
        self.status_code, self._framing, self._length, self._keep = parse_head(head, method)
        self.complete = False
        self._head = head
        self._conn = conn
        self._content: bytes | None = None

    @property
    def headers(self) -> dict[str, str]:
        """The response's headers, names in lower case (the last of repeated ones)."""
        fields = {}
        for line in self._head.decode("latin-1").split("\r\n")[1:]:
            name, colon, value = line.partition(":")
            if colon:
                fields[name.strip().lower()] = value.strip()
        return fields

    @property
    def reusable(self) -> bool:
        """Whether the connection can go back to the pool: the body was read to its end and the server allows it."""
        return self.complete and self._keep

    async def _read(self, size: int, what: str) -> bytes:
        """Up to `size` bytes as soon as some are there; an error when the stream ends first."""
        conn = self._conn
        try:
            data = await conn.reader.read(size)
        except OSError as err:
            raise conn.failure(err, what) from None
        conn.touch()
        if not data:
            raise conn.failure(None, what)
        return data

    async def _read_line(self, what: str) -> bytes:
        conn = self._conn
        try:
            line = await conn.reader.readuntil(b"\r\n")
        except asyncio.IncompleteReadError:
            raise conn.failure(None, what) from None
        except asyncio.LimitOverrunError:
            raise RemoteProtocolError(f"the server sent an over-long line while {what}") from None
        except OSError as err:
            raise conn.failure(err, what) from None
        conn.touch()
        return line

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body in the pieces it arrives in (chunk by chunk for a chunked response)."""
        if self._content is not None:
            if self._content:
                yield self._content
            return
        framing = self._framing
        if framing == "length":
            remaining = self._length
            while remaining:
                data = await self._read(min(remaining, READ_SIZE), f"sending the body ({remaining} bytes to come)")
                remaining -= len(data)
                yield data
        elif framing == "chunked":
            while True:
                line = await self._read_line("sending a chunk's size")
                try:
                    remaining = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    raise RemoteProtocolError(f"the server sent a bad chunk size {line[:20]!r}") from None
                if remaining == 0:
                    while await self._read_line("sending the trailers") != b"\r\n":
                        pass
                    break
                while remaining:
                    data = await self._read(min(remaining, READ_SIZE), f"sending a chunk ({remaining} bytes to come)")
                    remaining -= len(data)
                    yield data
                if await self._read_line("ending a chunk") != b"\r\n":
                    raise RemoteProtocolError("the server sent a chunk longer than its size")
        elif framing == "close":
            conn = self._conn
            while True:
                try:
                    data = await conn.reader.read(READ_SIZE)
                except OSError as err:
                    raise conn.failure(err, "sending the body") from None
                conn.touch()
                if not data:
                    if conn.timed_out:
                        raise conn.failure(None, "sending the body")
                    break
                yield data
        self.complete = True

    async def aiter_lines(self) -> AsyncIterator[str]:
        """The body's lines without their endings (LF or CRLF), each as soon as it is whole."""
        pending = b""
        async for data in self.aiter_bytes():
            if pending:
                data = pending + data
            cut = data.rfind(b"\n")
            if cut < 0:
                pending = data
                continue
            pending = data[cut + 1 :]
            text = data[:cut].decode("utf-8", "replace")  # whole lines only: no character is cut in two
            if "\r" in text:
                text = text.replace("\r\n", "\n")
            for line in text.split("\n"):
                yield line
        if pending:
            yield pending.removesuffix(b"\r").decode("utf-8", "replace")

    async def aread(self) -> bytes:
        """The whole body (read once; later calls return the same bytes)."""
        if self._content is None:
            self._content = b"".join([data async for data in self.aiter_bytes()])
        return self._content

    def json(self) -> Any:
        """The body, read by `aread` (or `Http1Client.get`), parsed as JSON."""
        if self._content is None:
            raise RuntimeError("read the body with aread() before calling json()")
        return jsonlib.loads(self._content)
