"""A damaged journal left behind: moved aside by a start with ``on_damage: start_fresh``, or
found beside the journal from an earlier one. What it held (as far as can be read cheaply:
its queued events, the runs waiting for an operator, its dead letters) is what the room,
``promptui status``, ``GET /health`` and the log say was left behind, and where.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from runtime_core.journal.sqlite.pages import PageFile, schema_roots
from runtime_core.journal.sqlite.schema import readonly_uri

#: Damaged journals found beside one are listed up to this many (the newest).
MAX_FOUND = 5
_SMALL = 64 << 20  # a file read page by page to count what it held, at most (bytes)


@dataclass(frozen=True, slots=True)
class LeftBehind:
    """A damaged journal file kept aside; ``queued``, ``waiting`` and ``dead_letters`` are
    None when they could not be counted."""

    path: Path  # where it lies now
    journal: Path  # the journal it was
    reason: str = ""  # the damage, when this start found it
    queued: int | None = None
    waiting: int | None = None
    dead_letters: int | None = None

    def held(self) -> str:
        """What it held, in words."""
        if self.queued is None:
            return "what it held could not be counted"
        return (f"it held {self.queued} queued event(s), {self.waiting} run(s) waiting for an "
                f"operator and {self.dead_letters} dead letter(s)")

    def describe(self) -> str:
        """One line: what was left behind, where, and what to do."""
        why = f" ({self.reason})" if self.reason else ""
        return (f"journal {self.journal} was damaged{why} and left behind at {self.path}: "
                f"{self.held()}; rescue it with 'promptui journal salvage {self.path}'")


def left_behind(moved: Path, journal: Path, reason: str = "") -> LeftBehind:
    """What the damaged file ``moved`` (once ``journal``) held, as far as can be counted."""
    counts = _counted(moved)
    return LeftBehind(moved, journal, reason, *counts)


def found_beside(journal: Path) -> list[LeftBehind]:
    """The damaged journals an earlier start moved aside from ``journal`` that are still
    beside it (``journal.db.damaged-<time>``), newest first."""
    try:
        found = [p for p in journal.parent.glob(journal.name + ".damaged-*")
                 if not p.name.endswith(("-wal", "-shm")) and ".salvaged-" not in p.name
                 and p.is_file()]
    except OSError:
        return []
    found.sort(key=lambda p: p.name, reverse=True)
    return [left_behind(p, journal) for p in found[:MAX_FOUND]]


def _counted(path: Path) -> tuple[int | None, int | None, int | None]:
    """(queued, waiting, dead letters): SQLite's counts, or, when SQLite cannot read the
    file, the rows of those three tables read page by page."""
    try:
        with closing(sqlite3.connect(readonly_uri(path), uri=True, timeout=1)) as conn:
            return (int(conn.execute("SELECT COUNT(*) FROM pending").fetchone()[0]),
                    int(conn.execute("SELECT COUNT(*) FROM open_runs WHERE state = "
                                     "'waiting'").fetchone()[0]),
                    int(conn.execute("SELECT COUNT(*) FROM dead_letters").fetchone()[0]))
    except (sqlite3.Error, ValueError, TypeError):
        pass
    try:
        if path.stat().st_size > _SMALL:
            return None, None, None
        pages = PageFile(path.read_bytes())
    except OSError:
        return None, None, None
    roots = schema_roots(pages)
    if roots is None or not {"pending", "open_runs", "dead_letters"} <= set(roots):
        return None, None, None
    queued = sum(len(p.cells) for p in pages.tree(roots["pending"])[0])
    waiting = sum(1 for p in pages.tree(roots["open_runs"])[0] for c in p.cells
                  if len(c.values) == 6 and c.values[4] == "waiting")
    dead = sum(len(p.cells) for p in pages.tree(roots["dead_letters"])[0])
    return queued, waiting, dead
