"""The HTTP edge of `vcpilot mcp`: a bearer token, a request-size limit and a per-client rate limit before the SDK.

`Gate` is a plain ASGI wrapper around the SDK's streamable HTTP app, so every request meets, in this order: the
token (401: nothing reaches the MCP session without it; repeated failures from one address get 429, so guessing is
slowed down), the rate limit of its client — its MCP session, or its connection before it has one, within a ceiling
for its address (429) — and the declared body size (413; the SDK also cuts a streamed body at the same limit). A
request that passes carries who sent it in its ASGI scope, where the tool handler finds it for the audit log.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.errors import InputError
from components.files import open_binary
from components.redact import MASK

__all__ = ["CALLER_KEY", "TOKEN_ENV", "Gate", "RateLimit", "TokenMask", "load_token", "token_identity"]

TOKEN_ENV = "VCPILOT_MCP_TOKEN"
CALLER_KEY = "vcpilot.caller"  # the scope key under which Gate leaves "token:<id> from <peer>"
_MIN_TOKEN = 16
_MAX_TOKEN_FILE_BYTES = 4096  # a token is tens of characters; Kubernetes caps a Secret at 1 MiB

ASGIApp = Callable[..., Any]


def load_token(token_file: Path | None, environ: Mapping[str, str] | None = None) -> str:
    """The bearer token from `token_file`, else from VCPILOT_MCP_TOKEN; an InputError when there is none."""
    if token_file is not None:
        try:
            with open_binary(token_file) as handle:  # at most a little more than any token: /dev/zero never ends
                data = handle.read(_MAX_TOKEN_FILE_BYTES + 1)
        except OSError as err:
            raise InputError(f"the token file {token_file} cannot be read: {err.strerror}") from None
        if len(data) > _MAX_TOKEN_FILE_BYTES:
            raise InputError(
                f"--token-file {token_file} holds more than {_MAX_TOKEN_FILE_BYTES} bytes, which no bearer token "
                "needs; give a file that holds the token alone"
            )
        token = data.decode("utf-8", errors="replace").strip()  # not UTF-8: refused below
        where = f"the token file {token_file}"
        if not token:
            raise InputError(
                f"--token-file {token_file} is empty; write a bearer token of at least {_MIN_TOKEN} characters "
                f"into it (e.g. openssl rand -hex 32 > {token_file})"
            )
    else:
        token = (os.environ if environ is None else environ).get(TOKEN_ENV, "").strip()
        where = TOKEN_ENV
    if not token:
        raise InputError(
            "the MCP server over HTTP needs a bearer token: pass --token-file FILE or set "
            f"{TOKEN_ENV} (e.g. {TOKEN_ENV}=$(openssl rand -hex 32))"
        )
    # A client sends the token in an HTTP header: only visible ASCII travels there unchanged (a BOM never does).
    if len(token) < _MIN_TOKEN or not all("!" <= c <= "~" for c in token):
        raise InputError(
            f"the bearer token in {where} must be at least {_MIN_TOKEN} visible ASCII characters, without spaces "
            "(e.g. openssl rand -hex 32)"
        )
    return token


def token_identity(token: str) -> str:
    """A name for a token that logs may carry: the first 8 hex digits of its SHA-256, never the token."""
    return "token:" + hashlib.sha256(token.encode()).hexdigest()[:8]


class TokenMask(logging.Filter):
    """A logging filter that writes the server's own token as `***`: a client may send it anywhere, in an argument too.

    `components.redact` knows a token by its shape or its field's name; a bare `openssl rand -hex 32` has neither.
    """

    def __init__(self, token: str) -> None:
        """Mask `token` in every record this filter passes."""
        super().__init__()
        self._token = token

    def filter(self, record: logging.LogRecord) -> bool:
        """Pass every record, its message rewritten when it carries the token."""
        message = record.getMessage()
        if self._token in message:
            record.msg, record.args = message.replace(self._token, MASK), None
        return True


@dataclass
class RateLimit:
    """A token bucket per client: `burst` requests at once, refilled at `per_second`; the clock is injected."""

    per_second: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)

    def allow(self, client: str, share: int = 1) -> bool:
        """Whether `client` may make one more request now (and count it); `share` clients' allowance for a group."""
        now = self.clock()
        burst, per_second = float(self.burst * share), self.per_second * share
        level, since = self._buckets.get(client, (burst, now))
        level = min(burst, level + (now - since) * per_second)
        if level < 1:
            self._buckets[client] = (level, now)
            return False
        self._buckets[client] = (level - 1, now)
        if len(self._buckets) > 10_000:  # forget idle clients rather than grow without end
            self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < 60}
        return True


# How many clients' allowance every session from one address shares (a client holding the token opened a new
# session, or sent a new invented session id, for a fresh allowance each time).
HOST_SHARE = 4


class Gate:
    """ASGI middleware: the bearer token (constant-time), a rate limit per client, the body size."""

    def __init__(self, app: ASGIApp, token: str, max_body_bytes: int, rate: RateLimit, log: Callable[[str], None]):
        """Guard `app` with `token`; `log` gets one JSON line for each request refused here."""
        self._app = app
        self._token = token.encode()
        self._identity = token_identity(token)
        self._max_body = max_body_bytes
        self._rate = rate
        self._log = log

    async def __call__(self, scope: dict[str, Any], receive: ASGIApp, send: ASGIApp) -> None:
        """Answer a refused request here; pass the others on with who sent them."""
        if scope["type"] != "http":  # lifespan: the SDK's session manager starts and stops
            await self._app(scope, receive, send)
            return
        host, port = scope.get("client") or ("unknown", 0)
        peer = f"{host}:{port}"
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self._token):
            if not self._rate.allow(f"address {host}"):  # guessing the token: slowed down per address
                await self._refuse(send, peer, 429, "too many requests from this client; slow down and retry", "1")
            else:
                await self._refuse(send, peer, 401, "a valid bearer token is required (Authorization: Bearer TOKEN)")
            return
        caller = f"{self._identity} from {peer}"  # past the token: the audit names who was refused
        # A client is its MCP session; before it has one (initialize), its connection. Every session from one
        # address together gets HOST_SHARE clients' allowance: new sessions (or invented ids) buy no more than that.
        session = headers.get("mcp-session-id", "")
        client = f"session {session}" if session else f"connection {peer}"
        if not (self._rate.allow(f"host {host}", HOST_SHARE) and self._rate.allow(client)):
            await self._refuse(send, peer, 429, "too many requests from this client; slow down and retry", "1", caller)
            return
        length = headers.get("content-length", "")
        if length.isascii() and length.isdigit() and int(length) > self._max_body:
            await self._refuse(send, peer, 413, f"the request body is larger than {self._max_body} bytes", "", caller)
            return
        scope[CALLER_KEY] = caller
        await self._app(scope, receive, send)

    async def _refuse(
        self, send: ASGIApp, peer: str, status: int, message: str, retry_after: str = "", caller: str = ""
    ) -> None:
        who = caller or f"anonymous from {peer}"
        self._log(json.dumps({"caller": who, "http_status": status, "verdict": message}))
        body = json.dumps({"error": message}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="vcpilot"'))
        if retry_after:
            headers.append((b"retry-after", retry_after.encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
