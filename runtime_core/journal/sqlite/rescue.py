"""What a damaged journal file still holds: its rows, read page by page (``pages``), each one
checked for the shape of the table it belongs to, and every entry against its checksum.

The file itself is never written: a copy (with its ``-wal`` folded in by SQLite, so the newest
commits count) is what is read. When page 1 still holds the schema, each table's rows are
taken from its own b-tree, and a table whose every page was read is known ``complete`` (the
absence of a row then says something); pages no b-tree reaches any more (their parent was
lost) and every page of a file whose schema is gone are sorted by the shape of their rows.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime_core.journal.entry import EntryType
from runtime_core.journal.left_out import STARTED
from runtime_core.journal.sqlite.marks import TABLE as RETAINED
from runtime_core.journal.sqlite.pages import BTreePage, Cell, PageFile, schema_roots
from runtime_core.journal.sqlite.schema import checksum

#: The tables a journal's state is rebuilt from (the indexes are rebuilt by SQLite).
TABLES = ("entries", "heads", "incarnations", "pending", "dead_letters", "open_runs",
          "deliveries", "meta", RETAINED)


#: The entry types whose data the salvage's plan reads whole (``EntryRow.fields``).
FOLDED = frozenset({
    EntryType.EVENT_ACCEPTED, EntryType.RUN_STARTED, EntryType.RUN_WAITING,
    EntryType.RECONCILED, EntryType.EVIDENCE, EntryType.RUN_FINISHED,
    EntryType.DEAD_LETTERED, EntryType.REDELIVERED, EntryType.DEAD_LETTERS_CLEARED})


@dataclass(frozen=True, slots=True)
class EntryRow:
    """One entry as the file stores it; ``fields`` is its data, parsed (for entry types not
    in FOLDED only its ``step``)."""

    id: int
    process: str
    pid: int
    seq: int
    ts: float
    entry_type: str
    run_id: str | None
    data: str
    crc: int
    fields: dict[str, Any]


@dataclass(slots=True)
class Rescued:
    """The rows read back from a damaged journal, by table."""

    entries: dict[str, dict[int, EntryRow]] = field(default_factory=dict)  # process -> seq ->
    torn_entries: int = 0  # rows shaped like entries whose checksum failed
    heads: dict[str, int] = field(default_factory=dict)
    incarnations: dict[int, str] = field(default_factory=dict)  # pid -> process_id
    pending: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    dead: dict[tuple[str, str], tuple[Any, ...]] = field(default_factory=dict)
    open_runs: dict[tuple[str, str], tuple[str, int, str, int]] = field(default_factory=dict)
    deliveries: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    #: Retention's low-water marks: process -> (before_seq, removed, at); entries below
    #: before_seq were removed on purpose, not lost.
    retained: dict[str, tuple[int, int, float]] = field(default_factory=dict)
    complete: set[str] = field(default_factory=set)  # tables read whole
    schema_readable: bool = False
    pages: int = 0  # pages in the file
    expected_pages: int = 0  # pages its header says it has (more: it was cut short)
    torn_cells: int = 0  # cells of b-tree pages that could not be read
    notes: list[str] = field(default_factory=list)

    def processes(self) -> list[str]:
        """Every process something was read for, by name."""
        names = set(self.entries) | set(self.heads)
        for keyed in (self.pending, self.dead, self.open_runs):
            names.update(process for process, _ in keyed)
        return sorted(names)


def rescue(path: Path) -> Rescued:
    """Every row of the journal at ``path`` that can still be read (the file is not
    changed: a copy is read). Each page's cells are let go once sorted, so what is held is
    about the rows, not the rows twice."""
    data, notes = _folded_copy(path)
    pages = PageFile(data)
    out = Rescued(pages=pages.page_count, expected_pages=pages.expected, notes=notes)
    roots = schema_roots(pages)
    out.schema_readable = roots is not None
    reached: set[int] = set(pages.free)
    if roots is not None:
        reached.update(p.number for p in pages.tree(1)[0])
        for name, root in roots.items():  # the tables read; the indexes only walked
            reached.update(_read_tree(pages, out, name, root))
    else:
        out.notes.append("the schema (page 1) cannot be read: every page was sorted by the "
                         "shape of its rows")
    for number in range(1, pages.page_count + 1):
        page = None if number in reached else pages.page(number)
        if page is not None:  # an orphan (its parent is lost), or any page without a schema
            for cell in page.cells:
                _sort(out, cell, page.is_index)
            page.cells = []
    out.torn_cells = sum(p.torn for p in pages.pages.values())
    return out


def _read_tree(pages: PageFile, out: Rescued, name: str, root: int) -> list[int]:
    """Take the rows of the b-tree ``name`` (a table of TABLES; an index's pages are only
    walked), page by page; the table is ``complete`` when every page and row was read and
    every row has its table's shape. Returns the pages it reached."""
    table = name if name in TABLES else None
    misfits = 0

    def take(page: BTreePage) -> None:
        nonlocal misfits
        if table is not None:
            misfits += sum(1 for cell in page.cells if not _take(out, table, cell))
        page.cells = []  # its rows are in ``out`` now

    found, complete = pages.tree(root, take)
    if table is not None and complete and not misfits:
        out.complete.add(table)
    return [page.number for page in found]


def _folded_copy(path: Path) -> tuple[bytes, list[str]]:
    """The file's bytes with its -wal folded in (SQLite's checkpoint on a copy: the damaged
    file and its -wal stay as they are)."""
    wal = path.with_name(path.name + "-wal")
    if not wal.exists() or wal.stat().st_size == 0:
        return path.read_bytes(), []
    with tempfile.TemporaryDirectory(prefix="promptui-salvage-") as folder:
        copy = Path(folder) / "journal.db"
        shutil.copyfile(path, copy)
        shutil.copyfile(wal, copy.with_name("journal.db-wal"))
        try:
            with closing(sqlite3.connect(copy)) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error as exc:
            return path.read_bytes(), [f"its -wal file ({wal.stat().st_size} bytes) could not "
                                       f"be folded in ({exc}): the newest commits in it were "
                                       "not read"]
        return copy.read_bytes(), [f"its -wal file ({wal.stat().st_size} bytes) was read too"]


def _sort(out: Rescued, cell: Cell, index: bool) -> None:
    """A row from a page no known b-tree reaches: into the table its shape fits, if any."""
    candidates = ("pending",) if index else ("entries", "dead_letters", "open_runs",
                                             "deliveries", RETAINED, "heads", "incarnations",
                                             "meta")
    for table in candidates:
        if _take(out, table, cell, guessed=True):
            return


def _text(*values: Any) -> bool:
    return all(isinstance(v, str) for v in values)


def _int(*values: Any) -> bool:
    return all(isinstance(v, int) for v in values)


def _take(out: Rescued, table: str, cell: Cell, *, guessed: bool = False) -> bool:
    """Keep ``cell`` as a row of ``table`` if it has that table's shape; False if not (a row
    that does not fit its own table is damage). The first row read for a key wins."""
    v = cell.values
    if table == "entries":
        return _take_entry(out, cell, guessed)
    if table == "pending" and len(v) == 4 and _text(v[0], v[1], v[3]) and _int(v[2]):
        if _event_id(v[3]) != v[1]:
            return False
        out.pending.setdefault((v[0], v[1]), (v[2], v[3]))
        return True
    if table == "dead_letters" and len(v) == 8 and _text(v[0], v[1], v[3], v[4], v[5]) \
            and _int(v[2], v[6]) and isinstance(v[7], (int, float)):
        if _event_id(v[3]) != v[1]:
            return False
        out.dead.setdefault((v[0], v[1]), tuple(v[2:]))
        return True
    if table == "open_runs" and len(v) == 6 and _text(v[0], v[1], v[2], v[4]) \
            and _int(v[3], v[5]) and v[4] in ("running", "waiting"):
        out.open_runs.setdefault((v[0], v[1]), (v[2], v[3], v[4], v[5]))
        return True
    if table == "deliveries" and len(v) == 4 and _text(*v[:3]) and isinstance(
            v[3], (int, float)):
        out.deliveries.setdefault((v[0], v[1]), (v[2], float(v[3])))
        return True
    if table == RETAINED and len(v) == 4 and _text(v[0]) and _int(v[1], v[2]) \
            and isinstance(v[3], (int, float)):
        out.retained.setdefault(v[0], (v[1], v[2], float(v[3])))
        return True
    if table == "heads" and len(v) == 2 and _text(v[0]) and _int(v[1]):
        out.heads.setdefault(v[0], v[1])
        return True
    if table == "incarnations" and len(v) == 2 and v[0] is None and _text(v[1]) \
            and cell.rowid is not None:
        out.incarnations.setdefault(cell.rowid, v[1])
        return True
    if table == "meta" and len(v) == 2 and _text(v[0], v[1]):
        out.meta.setdefault(v[0], v[1])
        return True
    return False


def _take_entry(out: Rescued, cell: Cell, guessed: bool) -> bool:
    v = cell.values
    if len(v) != 9 or cell.rowid is None or not _text(v[1], v[5]) or not _int(v[2], v[3], v[8]) \
            or not isinstance(v[4], (int, float)) or not (v[6] is None or _text(v[6])):
        return False
    if not isinstance(v[7], str) or checksum(v[7]) != v[8]:
        out.torn_entries += 1
        return not guessed  # in the entries b-tree: a torn entry; elsewhere: not one
    try:
        fields = json.loads(v[7])
    except ValueError:
        fields = None
    if not isinstance(fields, dict):
        out.torn_entries += 1
        return not guessed
    if v[5] not in FOLDED:  # what the salvage's plan reads of the others: their step (and
        # the run start a tool intent carries)
        kept = {k: fields[k] for k in (STARTED,) if isinstance(fields.get(k), dict)}
        if isinstance(fields.get("step"), int):
            kept["step"] = fields["step"]
        fields = kept
    row = EntryRow(cell.rowid, v[1], v[2], v[3], float(v[4]), v[5], v[6], v[7], v[8], fields)
    out.entries.setdefault(row.process, {}).setdefault(row.seq, row)
    return True


def _event_id(event: str) -> str | None:
    try:
        value = json.loads(event)
    except ValueError:
        return None
    found = value.get("event_id") if isinstance(value, dict) else None
    return found if isinstance(found, str) else None
