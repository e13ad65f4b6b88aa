"""Addresses checked before anything starts, in one sentence: where a server listens, and the http(s) URLs we call."""

from __future__ import annotations

import errno
import re
import socket
from urllib.parse import SplitResult, urlsplit

from components.errors import InputError

__all__ = ["check_http_url", "check_port_free"]


def check_port_free(host: str, port: int) -> None:
    """InputError in one sentence when `host` is not an address of this machine or something listens on `port`."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except (socket.gaierror, UnicodeError) as err:
        raise InputError(f"--host {host!r} is not an address of this machine ({err}); give one with --host") from None
    with socket.socket(family) as sock:
        # As the server will: a port left in TIME_WAIT by a stopped server is free, a listening one is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as err:
            if err.errno == errno.EADDRNOTAVAIL:
                raise InputError(f"--host {host} is not an address of this machine; give one with --host") from None
            raise InputError(
                f"port {port} on {host} is taken ({err.strerror or err}); choose another with --port"
            ) from None


def check_http_url(url: str) -> SplitResult:
    """`url` split, or ValueError in one sentence when it is not http(s)://host[:port] with a port from 1 to 65535."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL such as http://127.0.0.1:8000")
    # Letters (IDNA too), digits, '-', '_', '.'; or an IPv6 literal, with its zone after '%'. 'http://a b' was
    # looked up in DNS, and 'http://a%20b' an internal error in MLflow's client.
    if not re.fullmatch(r"[\w.-]+|[\w.]*:[\w.:]*(%[\w.-]+)?", parts.hostname):
        raise ValueError(f"{url!r} has a host, {parts.hostname!r}, that is not a host name or an IP address")
    if ":" not in parts.hostname:
        try:  # what the resolver asks of a name: labels of 1 to 63 characters (else an internal error, deep in it)
            parts.hostname.encode("idna")
        except UnicodeError:
            raise ValueError(
                f"{url!r} has a host, {parts.hostname!r}, with a label that is empty or longer than 63 characters"
            ) from None
    try:
        port = parts.port  # urlsplit checks the port only when asked: deep in a client, an internal error
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError(f"{url!r} has a port that is not a number from 1 to 65535")
    return parts
