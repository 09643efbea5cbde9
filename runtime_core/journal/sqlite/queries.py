"""Reading the SQLite journal: the entry SELECT, a ReadFilter as SQL, rows back into entries
(each checked against its checksum, so a corrupt entry is reported, never returned).
"""

from __future__ import annotations

import json
from typing import Any

from runtime_core.journal.entry import JournalEntry
from runtime_core.journal.left_out import typed_sql
from runtime_core.journal.provider import JournalError, ReadFilter
from runtime_core.journal.run_key import runs_params, runs_term
from runtime_core.journal.sqlite.schema import TYPE_INDEXED, TYPES_INDEXED, checksum

SELECT_ENTRIES = ("SELECT e.process, i.process_id, e.seq, e.ts, e.entry_type, e.run_id, e.data, "
                  "e.crc FROM entries e JOIN incarnations i ON i.pid = e.pid")


def row_to_entry(row: Any) -> JournalEntry:
    process, process_id, seq, ts, entry_type, run_id, data, crc = row
    if checksum(data) != crc:
        raise JournalError(
            f"journal entry {process}:{seq} is corrupt: "
            "its checksum does not match; run 'promptui journal verify'"
        )
    return JournalEntry(process=process, entry_type=entry_type, data=json.loads(data),
                        process_id=process_id, run_id=run_id, timestamp=float(ts),
                        seq=int(seq))


def read_sql(query: ReadFilter) -> tuple[str, tuple[Any, ...]]:
    """The SELECT (and its parameters) for the entries ``query`` asks for, in its order."""
    where: list[str] = []
    params: list[Any] = []
    # A run's entries are found by the run index. Without statistics SQLite would rather walk
    # the (process, seq) index for its order, i.e. every entry of the process: the unary +
    # keeps the process and seq terms off that index (a run's few rows are sorted after).
    by_run = "+" if query.run_id is not None else ""
    if query.process is not None:
        where.append(f"{by_run}e.process = ?")
        params.append(query.process)
    if query.entry_type is not None:
        where.append(typed_sql(query.entry_type))  # with the carriers of such entries
        params.append(query.entry_type)
        if query.entry_type in TYPES_INDEXED:  # SQLite then sees the partial index covers it
            where.append("e." + TYPE_INDEXED)
    if query.run_id is not None:
        where.append(runs_term("e.run_id"))
        params.extend(runs_params([query.run_id]))
    if query.since_seq is not None:
        where.append(f"{by_run}e.seq > ?")
        params.append(query.since_seq)
    if query.since_time is not None:
        where.append("e.ts >= ?")
        params.append(query.since_time)
    if query.until_seq is not None:
        where.append(f"{by_run}e.seq < ?")
        params.append(query.until_seq)
    if query.until_time is not None:
        where.append("e.ts <= ?")
        params.append(query.until_time)
    if query.contains:
        where.append("(e.data LIKE ? ESCAPE '\\' OR e.entry_type LIKE ? ESCAPE '\\')")
        pattern = "%" + query.contains.replace("\\", "\\\\").replace(
            "%", "\\%").replace("_", "\\_") + "%"
        params.extend([pattern, pattern])
    sql = SELECT_ENTRIES
    if where:
        sql += " WHERE " + " AND ".join(where)
    order = "e.seq" if query.process is not None else "e.id"
    sql += f" ORDER BY {order} {'DESC' if query.newest_first else 'ASC'}"
    if query.limit is not None:
        sql += " LIMIT ?"
        params.append(int(query.limit))
    return sql, tuple(params)
