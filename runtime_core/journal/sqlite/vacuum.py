"""Giving the pages retention freed back to the file system: incremental vacuuming.

SQLite keeps the pages of deleted rows in the file (on its freelist) and reuses them for new
rows, so a journal whose retention removes as much as it appends stops growing even without
this; with ``auto_vacuum=INCREMENTAL`` the file also shrinks, a few hundred pages at a time
(``vacuum_step``, through the writer). The mode must be set before the first table is made
(``connect_writer`` does, for every new journal); an existing file switches only by a
VACUUM, which rewrites the whole file: done when it is opened if it is small (under
``SWITCH_AT_OPEN_BYTES``), else by ``promptui journal compact`` (about 1 s per 100 MB, and as
much free disk as the file takes, so never behind a start's back).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from pathlib import Path

log = logging.getLogger(__name__)

#: PRAGMA auto_vacuum's value for incremental vacuuming.
INCREMENTAL = 2
#: A file below this many bytes is switched to incremental vacuuming when it is opened.
SWITCH_AT_OPEN_BYTES = 32 * 1024 * 1024
#: Free pages left alone (new entries reuse them): vacuuming starts above this.
KEEP_FREE_PAGES = 64
#: Pages one vacuum step gives back (one short write transaction through the writer).
STEP_PAGES = 256


def set_incremental(conn: sqlite3.Connection) -> None:
    """For a new file: before any table is made (and before WAL mode), this takes effect."""
    conn.execute(f"PRAGMA auto_vacuum={INCREMENTAL}")


def is_incremental(conn: sqlite3.Connection) -> bool:
    """Whether the file vacuums incrementally (freed pages can be given back)."""
    return int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) == INCREMENTAL


def switch_to_incremental(conn: sqlite3.Connection, path: Path, *, limit: int | None
                          ) -> bool:
    """Switch an existing file to incremental vacuuming by a VACUUM (it rewrites the file), if
    it is not already and it is smaller than ``limit`` bytes (None: whatever its size).
    True once it is incremental."""
    if is_incremental(conn):
        return True
    size = used_bytes(conn)
    if limit is not None and size > limit:
        log.info("journal %s (%d MB) does not shrink when retention removes entries (freed "
                 "pages are reused, so it stops growing): 'promptui journal compact -j %s' "
                 "with the runtime stopped switches it to incremental vacuuming once",
                 path, size // 2**20, path)
        return False
    conn.execute(f"PRAGMA auto_vacuum={INCREMENTAL}")
    conn.execute("VACUUM")
    return is_incremental(conn)


def used_bytes(conn: sqlite3.Connection) -> int:
    """The file's size in pages, in bytes (free pages included)."""
    pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
    return pages * int(conn.execute("PRAGMA page_size").fetchone()[0])


def free_pages(conn: sqlite3.Connection) -> int:
    """Pages on the freelist: freed, not yet reused or given back."""
    return int(conn.execute("PRAGMA freelist_count").fetchone()[0])


def vacuum_step(conn: sqlite3.Connection, pages: int = STEP_PAGES) -> int:
    """Give up to ``pages`` free pages back (the file shrinks by them once the WAL is folded
    in); how many it gave. Nothing when the file is not incremental or has few free pages."""
    if not is_incremental(conn):
        return 0
    before = free_pages(conn)
    if before <= KEEP_FREE_PAGES:
        return 0
    if conn.in_transaction:  # a failed job's leftovers: start clean
        conn.execute("ROLLBACK")
    incremental_vacuum(conn, min(pages, before - KEEP_FREE_PAGES))
    return before - free_pages(conn)


def incremental_vacuum(conn: sqlite3.Connection, pages: int | None = None) -> None:
    """``PRAGMA incremental_vacuum``: up to ``pages`` free pages (None: all) given back.
    Stepped to its end by executescript: execute() steps a pragma once, one page."""
    conn.executescript("PRAGMA incremental_vacuum;" if pages is None
                       else f"PRAGMA incremental_vacuum({int(pages)});")


def file_bytes(path: Path) -> int:
    """The journal's bytes on disk: the file and its WAL."""
    total = 0
    for part in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(FileNotFoundError):
            total += part.stat().st_size
    return total
