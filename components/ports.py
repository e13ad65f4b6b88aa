"""Whether a server can listen where it was told: one sentence before anything starts, for every command that serves."""

from __future__ import annotations

import errno
import socket

from components.errors import InputError

__all__ = ["check_port_free"]


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
