"""Loopback ports: one free to bind, one something already listens on."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (a server binds it after the probe let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextmanager
def taken_port() -> Iterator[int]:
    """A port of 127.0.0.1 that something else listens on while the block runs."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]
    finally:
        sock.close()
