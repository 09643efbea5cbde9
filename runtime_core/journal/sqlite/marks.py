"""Where retention removed a process's entries: its low-water mark.

Retention (``retention``) removes entries below a bound and records, in the same transaction,
the process's mark: every removed seq is below ``before_seq``, and every entry from it on is
still there. A check of the seq chain (the start check, ``promptui journal verify``) then
tells the two kinds of gap apart: one below the mark is what retention removed, anything else
is damage. The table (``retained``) comes with schema 4; an older file has no marks.
"""

from __future__ import annotations

import sqlite3

TABLE = "retained"


def low_water_marks(conn: sqlite3.Connection) -> dict[str, int]:
    """Each process's mark (entries below it may have been removed by retention); {} for a
    file without the table (older than schema 4, or never retained)."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                         (TABLE,)).fetchone()
    if found is None:
        return {}
    return {str(process): int(before) for process, before in conn.execute(
        f"SELECT process, before_seq FROM {TABLE}")}


def gap_is_retained(seq: int, mark: int) -> bool:
    """A chain that jumps to ``seq`` lost only what retention removed: every missing seq is
    below the mark."""
    return seq <= mark


def record_mark(conn: sqlite3.Connection, process: str, before_seq: int, removed: int,
                at: float) -> None:
    """Raise ``process``'s mark to ``before_seq`` (never lower it) and count ``removed``
    entries more; in the caller's transaction, the one that removed them."""
    conn.execute(
        f"INSERT INTO {TABLE} (process, before_seq, removed, at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (process) DO UPDATE SET before_seq = MAX(before_seq, excluded.before_seq), "
        "removed = removed + excluded.removed, at = excluded.at",
        (process, before_seq, removed, at))
