"""One group commit of the SQLite journal: a batch of queued appends turned into rows and index
changes, and written in one ``BEGIN IMMEDIATE ... COMMIT`` on the writer connection's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from typing import Any

from runtime_core import crashpoints
from runtime_core.journal.entry import JournalEntry
from runtime_core.journal.provider import DELIVERY_KEEP_SECONDS, IndexRules, JournalError
from runtime_core.journal.sqlite.schema import checksum

#: One queued append: the entry, its data as JSON, its attachment as JSON (or None), the future
#: released once it is committed, and its index effects.
PendingAppend = tuple[JournalEntry, str, Any, "asyncio.Future[None]", list[tuple[str, Any]]]
_Statement = tuple[str, tuple[Any, ...]]


def batch_rows(batch: list[PendingAppend]
               ) -> tuple[list[tuple[Any, ...]], list[_Statement], list[tuple[str, int]]]:
    """The entry rows, index statements and new heads (last seq per process) of ``batch``."""
    entry_rows: list[tuple[Any, ...]] = []
    ops: list[_Statement] = []
    heads: dict[str, int] = {}
    for entry, data, attached, _, effects in batch:
        entry_rows.append((entry.process, entry.process_id, entry.seq, entry.timestamp,
                           entry.entry_type, entry.run_id, data, checksum(data)))
        heads[entry.process] = entry.seq
        for op, arg in effects:
            ops.extend(_index_sql(entry, op, arg, attached))
    return entry_rows, ops, list(heads.items())


_SCALE = IndexRules.ORD_SCALE


def _index_sql(entry: JournalEntry, op: str, arg: Any, attached: str | None
               ) -> list[_Statement]:
    p = entry.process
    if op == "pending_add":
        return [("INSERT OR REPLACE INTO pending (process, event_id, ord, event) "
                 "VALUES (?, ?, ?, ?)", (p, arg["event_id"], entry.seq * _SCALE, attached))]
    if op == "pending_remove":
        return [("DELETE FROM pending WHERE process = ? AND event_id = ?", (p, arg))]
    if op == "run_open":
        run_id, event_id, attempt = arg
        return [("INSERT OR REPLACE INTO open_runs (process, run_id, event_id, attempt, state, "
                 "started_seq) VALUES (?, ?, ?, ?, 'running', ?)",
                 (p, run_id, event_id, attempt, entry.seq))]
    if op in ("run_wait", "run_resume"):
        state = "waiting" if op == "run_wait" else "running"
        return [("UPDATE open_runs SET state = ? WHERE process = ? AND run_id = ?",
                 (state, p, arg))]
    if op == "run_close":
        return [("DELETE FROM open_runs WHERE process = ? AND run_id = ?", (p, arg))]
    if op == "dead_add":
        _, data = arg
        return [("INSERT OR REPLACE INTO dead_letters (process, event_id, ord, event, reason, "
                 "error, attempts, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 (p, data["event_id"], entry.seq * _SCALE, attached, data.get("reason", ""),
                  data.get("error", ""), int(data.get("attempts", 0)), entry.timestamp))]
    if op == "dead_trim":
        return [("DELETE FROM dead_letters WHERE process = ? AND ord NOT IN (SELECT ord FROM "
                 "dead_letters WHERE process = ? ORDER BY ord DESC LIMIT ?)", (p, p, arg))]
    if op == "dead_redeliver":
        out: list[_Statement] = []
        for position, event_id in enumerate(arg):
            out.append(("INSERT OR REPLACE INTO pending (process, event_id, ord, event) SELECT "
                        "process, event_id, ?, event FROM dead_letters WHERE process = ? AND "
                        "event_id = ?", (entry.seq * _SCALE + position, p, event_id)))
            out.append(("DELETE FROM dead_letters WHERE process = ? AND event_id = ?",
                        (p, event_id)))
        return out
    if op == "delivery_add":
        key, event_id = arg
        return [("DELETE FROM deliveries WHERE process = ? AND at < ?",
                 (p, entry.timestamp - DELIVERY_KEEP_SECONDS)),  # pruned by age on insert
                ("INSERT OR IGNORE INTO deliveries (process, delivery_key, event_id, at) "
                 "VALUES (?, ?, ?, ?)", (p, key, event_id, entry.timestamp))]
    if op == "dead_clear":
        if arg is None:
            return [("DELETE FROM dead_letters WHERE process = ?", (p,))]
        return [("DELETE FROM dead_letters WHERE process = ? AND event_id = ?", (p, e))
                for e in arg]
    raise JournalError(f"unknown index operation {op!r}")


def write_batch(
    conn: sqlite3.Connection,
    entry_rows: list[tuple[Any, ...]],
    ops: list[_Statement],
    heads: list[tuple[str, int]],
    pids: dict[str, int],
    before_commit: Callable[[], None] | None = None,
) -> None:
    """Runs on the writer connection's thread (the only user of ``pids``); ``before_commit``
    is called once the rows are written, just before the ``COMMIT`` and its fsync."""
    if conn.in_transaction:  # a rollback after a failed commit failed too: start clean
        conn.execute("ROLLBACK")
    conn.execute("BEGIN IMMEDIATE")
    added: list[str] = []
    try:
        rows = []
        for process, process_id, *rest in entry_rows:
            pid = pids.get(process_id)
            if pid is None:  # resolved in the transaction: another writer may have added it
                conn.execute("INSERT OR IGNORE INTO incarnations (process_id) VALUES (?)",
                             (process_id,))
                pid = int(conn.execute("SELECT pid FROM incarnations WHERE process_id = ?",
                                       (process_id,)).fetchone()[0])
                pids[process_id] = pid
                added.append(process_id)
            rows.append((process, pid, *rest))
        conn.executemany(
            "INSERT INTO entries (process, pid, seq, ts, entry_type, run_id, data, crc) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        for sql, params in ops:
            conn.execute(sql, params)
        conn.executemany(
            "INSERT INTO heads (process, last_seq) VALUES (?, ?) "
            "ON CONFLICT (process) DO UPDATE SET last_seq = excluded.last_seq",
            heads,
        )
        crashpoints.reached("group_commit")  # rows written, transaction not committed
        if before_commit is not None:
            before_commit()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # not when BEGIN itself failed (the lock is held elsewhere)
            with contextlib.suppress(sqlite3.Error):  # the commit's own error says more
                conn.execute("ROLLBACK")
        for process_id in added:  # not committed: forget them
            pids.pop(process_id, None)
        raise
