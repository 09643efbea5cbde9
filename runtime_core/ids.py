"""Random identifiers, drawn from the operating system's random source in blocks.

Every event, run and untrusted-data tag needs fresh random bytes; one ``os.urandom`` call each
costs a system call (about 15 us on a small VM, a quarter of an event's whole cost). The same
bytes, read 4 KiB at a time and handed out once each, are just as unpredictable.
"""

from __future__ import annotations

import os
import threading
import uuid

_BLOCK = 4096
_lock = threading.Lock()
_pool = b""
_at = 0
_pid = 0


def random_bytes(n: int) -> bytes:
    """``n`` bytes from the OS's random source, never handed out twice (not across a fork
    either: a child starts with a fresh block)."""
    global _pool, _at, _pid
    with _lock:
        if _at + n > len(_pool) or _pid != os.getpid():
            _pool, _at, _pid = os.urandom(max(_BLOCK, n)), 0, os.getpid()
        chunk = _pool[_at:_at + n]
        _at += n
        return chunk


def uuid4() -> uuid.UUID:
    """A version 4 UUID, as ``uuid.uuid4()`` makes it."""
    return uuid.UUID(bytes=random_bytes(16), version=4)


def token_hex(nbytes: int) -> str:
    """A random hex string of ``2 * nbytes`` characters, as ``secrets.token_hex`` makes it."""
    return random_bytes(nbytes).hex()
