"""Where the Argo Server is, read as the `argo` CLI reads it from its environment variables.

ARGO_SERVER is `host:port`, and the URL it calls is `https://` (`http://` when ARGO_SECURE is
`false`) + that + ARGO_BASE_HREF (a server behind a path, `/argo/`); ARGO_INSECURE_SKIP_VERIFY=`true` accepts a
certificate no authority signed (the Argo Server's default one is self-signed). `vcpilot submit` and `vcpilot
doctor` read the same variables the same way, and take a full URL too (as it is).

The argo CLI compares the two switches with the words `false` and `true` exactly (`ARGO_SECURE != "false"`,
`ARGO_INSECURE_SKIP_VERIFY == "true"`, Argo v4.1.2 `cmd/argo/commands/client/conn.go`), so it reads `ARGO_SECURE=0`
as true. A value whose usual meaning (`1`/`0`, `yes`/`no`, `on`/`off`, `True`, …) the argo CLI reads otherwise is
refused here in one sentence rather than read either way: as argo reads it, it would surprise its writer; as its
writer meant it, `vcpilot` and `argo` would call different servers.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["SERVER_HELP", "argo_server_url", "verify_tls"]

# The help of every option that names the Argo Server (`submit`, `doctor`).
SERVER_HELP = (
    "Argo Server host:port or URL (env ARGO_SERVER; ARGO_SECURE, ARGO_INSECURE_SKIP_VERIFY, ARGO_BASE_HREF and "
    "ARGO_TOKEN apply, as for the argo CLI)."
)


def argo_server_url(server: str, environ: Mapping[str, str]) -> str:
    """The Argo Server's base URL: `server` as given when it has a scheme, else as the argo CLI builds it."""
    server = server.strip().rstrip("/")
    if "://" in server:
        return server
    scheme = "https" if _flag(environ, "ARGO_SECURE", True) else "http"
    path = environ.get("ARGO_BASE_HREF", "").strip().strip("/")
    return f"{scheme}://{server}" + (f"/{path}" if path else "")


def verify_tls(environ: Mapping[str, str]) -> bool:
    """Whether the server's certificate must be signed by a trusted authority (not ARGO_INSECURE_SKIP_VERIFY)."""
    return not _flag(environ, "ARGO_INSECURE_SKIP_VERIFY", False)


def _flag(environ: Mapping[str, str], name: str, default: bool) -> bool:
    """One of the argo CLI's switches, unset (`default`) or as its writer and the argo CLI both read it.

    ValueError for a value that is no boolean, or one the argo CLI reads otherwise than it is spelt.
    """
    value = environ.get(name, "").strip()
    if not value:
        return default
    meant = _WORDS.get(value.lower())
    if meant is None:
        raise ValueError(f"{name}={environ[name]} is neither true nor false")
    argo = value != "false" if name == "ARGO_SECURE" else value == "true"
    if argo != meant:
        raise ValueError(
            f"{name}={environ[name]} reads as {str(meant).lower()}, but the argo CLI reads it as "
            f"{str(argo).lower()}; write {str(meant).lower()}"
        )
    return meant


_WORDS = {word: True for word in ("1", "t", "true", "yes", "y", "on")} | {
    word: False for word in ("0", "f", "false", "no", "n", "off")
}
