"""aiosqlite connections that never keep a finished program alive.

aiosqlite runs each connection on a worker thread that is not a daemon, so a program that
returns from ``asyncio.run()`` without closing a journal (a script that never calls ``stop()``,
or one that raises) waited forever at exit for that thread. Ours are daemon threads: a
journal's reading connection holds nothing to lose, and a memory store commits every write
before it answers, so ending the thread with the program is as safe as a crash, which both
survive (WAL)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiosqlite


async def connect(path: str | Path, **kwargs: Any) -> aiosqlite.Connection:
    """``aiosqlite.connect(path, **kwargs)``, its worker thread a daemon."""
    import aiosqlite  # here: the read-only paths that import this module never need it

    pending = aiosqlite.connect(path, **kwargs)
    worker = getattr(pending, "_thread", None)  # made in __init__, started when awaited
    if worker is not None and not worker.is_alive():
        worker.daemon = True
    return await pending
