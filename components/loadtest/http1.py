"""A lean HTTP/1.1 client on asyncio streams: the load generator's own CPU must not be what limits a load test.

httpx spends about a millisecond of CPU per request, so a generator built on it saturates its core long before a
fast server does. This client does only what a load test needs, for `http://` URLs: keep-alive connections in a
pool (at most `connections` at once), requests with a body, responses read as they arrive (`wire`). It speaks
the subset of httpx's interface the load generator uses (`stream`, `get`, `status_code`, `aread`,
`aiter_lines`, `json`, `aclose`), so either can drive a test; `https://` goes through httpx.
"""

from __future__ import annotations

import asyncio
import functools
import json as jsonlib
from collections.abc import Mapping
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from components.loadtest.wire import (
    READ_SIZE,
    ConnectError,
    Connection,
    ConnectTimeout,
    Http1Response,
    HttpError,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    connect_failure,
)

__all__ = [
    "ConnectError",
    "ConnectTimeout",
    "Http1Client",
    "Http1Response",
    "HttpError",
    "ReadError",
    "ReadTimeout",
    "RemoteProtocolError",
    "client_headers",
    "route",
]


def _render(headers: Mapping[str, str]) -> str:
    return "".join(f"{name.lower()}: {value}\r\n" for name, value in headers.items())


def client_headers(headers: Mapping[str, str] | None) -> str:
    """The header lines every request of a client carries: ours (user-agent, accept), then the caller's `headers`."""
    extra = {"user-agent": "vcpilot-loadtest", "accept": "*/*"}
    extra.update({name.lower(): value for name, value in (headers or {}).items()})
    return _render(extra)


@functools.lru_cache(maxsize=256)
def route(method: str, url: str, common: str, own: tuple[tuple[str, str], ...]) -> tuple[tuple[str, int], bytes]:
    """Where `url` goes, and the request head up to its Content-Length with the client's and the request's headers.

    Cached across clients: a load test makes one client per request in flight.
    """
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// URL; this client does not speak TLS")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    head = f"{method} {target} HTTP/1.1\r\nhost: {parts.netloc}\r\n{common}{_render(dict(own))}"
    return (parts.hostname, parts.port or 80), head.encode("latin-1")


class _Exchange:
    """`async with client.stream(...) as response`: a connection from the pool for one request, then back."""

    __slots__ = ("_client", "_method", "_url", "_body", "_headers", "_conn", "_response")

    def __init__(
        self, client: Http1Client, method: str, url: str, body: bytes, headers: tuple[tuple[str, str], ...]
    ) -> None:
        self._client, self._method, self._url, self._body, self._headers = client, method, url, body, headers
        self._conn: Connection | None = None
        self._response: Http1Response | None = None

    async def __aenter__(self) -> Http1Response:
        self._conn, self._response = await self._client._send(self._method, self._url, self._body, self._headers)
        return self._response

    async def __aexit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        response, conn = self._response, self._conn
        if conn is not None:
            self._client._release(conn, response is not None and response.reusable)


class Http1Client:
    """Keep-alive HTTP/1.1 over asyncio streams for `http://` URLs, at most `connections` requests at once.

    `timeout_s` is how long the server may stay silent in the middle of a request, `connect_timeout_s` how long
    connecting may take; `headers` go with every request.
    """

    def __init__(
        self,
        *,
        connections: int = 1,
        timeout_s: float = 300.0,
        connect_timeout_s: float = 10.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if connections <= 0:
            raise ValueError(f"a client needs at least one connection, got {connections}")
        self._slots = asyncio.Semaphore(connections)
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        # Rendered once: the head of every request is this client's headers plus the request's own.
        self._extra = client_headers(headers)
        self._idle: dict[tuple[str, int], list[Connection]] = {}
        self._closed = False

    async def _connect(self, origin: tuple[str, int]) -> Connection:
        host, port = origin
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                reader, writer = await asyncio.open_connection(host, port, limit=READ_SIZE)
        except OSError as err:  # TimeoutError too
            raise connect_failure(host, port, err, self._connect_timeout_s) from None
        return Connection(origin, reader, writer, self._timeout_s)

    def _take_idle(self, origin: tuple[str, int]) -> Connection | None:
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            if conn.usable:
                return conn
            conn.close()
        return None

    async def _send(
        self, method: str, url: str, body: bytes, headers: tuple[tuple[str, str], ...]
    ) -> tuple[Connection, Http1Response]:
        if self._closed:
            raise RuntimeError("the client is closed")
        origin, head = route(method, url, self._extra, headers)
        if body or method not in ("GET", "HEAD"):
            request = b"%scontent-length: %d\r\n\r\n%s" % (head, len(body), body)
        else:
            request = head + b"\r\n"
        await self._slots.acquire()
        conn: Connection | None = None
        try:
            conn = self._take_idle(origin)
            reused = conn is not None
            while True:
                if conn is None:
                    conn = await self._connect(origin)
                conn.busy = True
                conn.touch()
                try:
                    return conn, await self._exchange(conn, request, method)
                except _Stale:
                    # A kept-alive connection the server had closed: nothing was answered, so sending again is safe
                    # (what httpx and urllib3 do). Only once, and never on a fresh connection.
                    conn.close()
                    conn = None
                    if not reused:
                        raise RemoteProtocolError("the server closed the connection without answering") from None
                    reused = False
        except BaseException:
            if conn is not None:
                conn.close()
            self._slots.release()
            raise

    async def _exchange(self, conn: Connection, request: bytes, method: str) -> Http1Response:
        """Write the request and read the response head (skipping 1xx); _Stale when the server hung up at once."""
        conn.writer.write(request)
        try:
            await conn.writer.drain()
            while True:
                head = await conn.reader.readuntil(b"\r\n\r\n")
                conn.touch()
                response = Http1Response(conn, head, method)
                if not 100 <= response.status_code < 200:  # 1xx: an interim answer; the real one follows
                    return response
        except asyncio.IncompleteReadError as err:
            if not err.partial and not conn.timed_out:
                raise _Stale from None
            raise conn.failure(None, "sending the response head") from None
        except asyncio.LimitOverrunError:
            raise RemoteProtocolError("the server sent a response head over 64 KiB") from None
        except (ConnectionResetError, BrokenPipeError):
            if conn.timed_out:
                raise conn.failure(None, "sending the response head") from None
            raise _Stale from None
        except OSError as err:
            raise conn.failure(err, "sending the response head") from None

    def _release(self, conn: Connection, reusable: bool) -> None:
        conn.busy = False
        if reusable and not self._closed:
            self._idle.setdefault(conn.origin, []).append(conn)
        else:
            conn.close()
        self._slots.release()

    def stream(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> _Exchange:
        """`async with client.stream("POST", url, json=body) as response:` read the body as it arrives.

        `content` is the body as bytes, `json` a body to encode as JSON; `headers` are added to the client's.
        Leaving the block before the body's end closes the connection instead of returning it to the pool.
        """
        extra = tuple(headers.items()) if headers else ()
        if json is not None:
            content = jsonlib.dumps(json, separators=(",", ":"), ensure_ascii=False).encode()
            extra += (("content-type", "application/json"),)
        return _Exchange(self, method, url, content or b"", extra)

    async def request(self, method: str, url: str, *, json: Any = None) -> Http1Response:
        """Send a request and read its whole response."""
        async with self.stream(method, url, json=json) as response:
            await response.aread()
        return response

    async def get(self, url: str) -> Http1Response:
        """GET `url` and read the whole response."""
        return await self.request("GET", url)

    async def aclose(self) -> None:
        """Close the idle connections; those in use close when their request ends."""
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()

    async def __aenter__(self) -> Http1Client:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _Stale(Exception):
    """A reused connection was found closed before any byte of the response came."""
