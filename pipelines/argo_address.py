"""Where the Argo Server is, read as the `argo` CLI reads it: ARGO_SERVER, ARGO_SECURE, ARGO_INSECURE_SKIP_VERIFY.

The argo CLI's ARGO_SERVER is `host:port`; ARGO_SECURE (default true) picks https or http, and
ARGO_INSECURE_SKIP_VERIFY=true accepts a certificate no authority signed (the Argo Server's default one is
self-signed). `vcpilot submit` and `vcpilot doctor` read the same variables the same way, and take a full URL too.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["argo_server_url", "flag", "verify_tls"]

_TRUE, _FALSE = {"1", "t", "true", "yes", "y", "on"}, {"0", "f", "false", "no", "n", "off"}


def argo_server_url(server: str, environ: Mapping[str, str]) -> str:
    """The Argo Server's base URL: `server` as given when it has a scheme, else https (http when ARGO_SECURE=false)."""
    server = server.strip().rstrip("/")
    if "://" in server:
        return server
    return f"{'https' if flag(environ, 'ARGO_SECURE', True) else 'http'}://{server}"


def verify_tls(environ: Mapping[str, str]) -> bool:
    """Whether the server's certificate must be signed by a trusted authority (not ARGO_INSECURE_SKIP_VERIFY)."""
    return not flag(environ, "ARGO_INSECURE_SKIP_VERIFY", False)


def flag(environ: Mapping[str, str], name: str, default: bool) -> bool:
    """A boolean environment variable (1/0, t/f, true/false, yes/no, on/off; any case); ValueError otherwise."""
    value = environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in _TRUE | _FALSE:
        return value in _TRUE
    raise ValueError(f"{name}={environ[name]} is neither true nor false")
