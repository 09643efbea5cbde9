"""One group commit of the PostgreSQL journal: a queued append turned into SQL when it is
submitted (so an entry PostgreSQL could not store is refused before it takes a seq), and a
batch of them written in one transaction, sent as one message (one round trip for the lot).

A commit whose outcome is unknown (the connection dropped around COMMIT) is retried only after
``written_before`` has looked: the batch is all there (it committed: don't write it twice), or
none of it is (write it), or some other writer holds its seqs (fail loudly).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import psycopg

from runtime_core import crashpoints
from runtime_core.journal.entry import JournalEntry
from runtime_core.journal.postgres.coalesce import (
    PENDING_ADD,
    PENDING_REMOVE,
    RUN_CLOSE,
    RUN_OPEN,
    RUN_STATE,
    coalesce,
)
from runtime_core.journal.postgres.fencing import FENCE_SQL
from runtime_core.journal.postgres.schema import ENTRIES_FROM, PROCESS_ID, checksum
from runtime_core.journal.provider import (
    DELIVERY_KEEP_SECONDS,
    IndexRules,
    JournalError,
    to_json,
)

Statement = tuple[str, tuple[Any, ...]]
_SCALE = IndexRules.ORD_SCALE


@dataclass(slots=True)
class PendingAppend:
    """One queued append (``entry`` None: a flush marker, never written)."""

    entry: JournalEntry | None
    future: asyncio.Future[None]
    row: tuple[Any, ...] = ()
    statements: list[Statement] = field(default_factory=list)


def prepare(entry: JournalEntry, seq: int, data: str, attached: str | None,
            effects: list[tuple[str, Any]]) -> tuple[tuple[Any, ...], list[Statement]]:
    """The entry's row and index statements as they will be written with ``seq``; a
    JournalError for anything PostgreSQL text cannot hold (a NUL, a lone surrogate) in a
    name or id (the JSON is escaped, it always can)."""
    row = (entry.process, entry.process_id, seq, float(entry.timestamp), entry.entry_type,
           entry.run_id, data, checksum(data))
    try:
        statements = [s for op, arg in effects for s in _index_sql(entry, seq, op, arg, attached)]
    except (TypeError, ValueError) as exc:
        raise JournalError(f"a {entry.entry_type} entry cannot be indexed: {exc}") from exc
    texts = [row[0], row[1], row[4], row[5]]
    for _, params in statements:
        for param in params:
            texts.extend(param if isinstance(param, list) else [param])
    for value in texts:
        if isinstance(value, str) and not storable(value):
            raise JournalError(f"a {entry.entry_type} entry of {entry.process!r} holds text "
                               f"PostgreSQL cannot store (a NUL or a lone surrogate): {value!r}")
    return row, statements


def storable(text: str) -> bool:
    """Whether PostgreSQL text can hold ``text`` (no NUL, no lone surrogate)."""
    if "\x00" in text:
        return False
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _index_sql(entry: JournalEntry, seq: int, op: str, arg: Any, attached: str | None
               ) -> list[Statement]:
    p = entry.process
    if op == "pending_add":
        return [(PENDING_ADD, (p, str(arg["event_id"]), seq * _SCALE, attached))]
    if op == "pending_remove":
        return [(PENDING_REMOVE, (p, str(arg)))]
    if op == "run_open":
        run_id, event_id, attempt = arg
        return [(RUN_OPEN, (p, str(run_id), str(event_id), int(attempt), seq))]
    if op in ("run_wait", "run_resume"):
        state = "waiting" if op == "run_wait" else "running"
        return [(RUN_STATE, (state, p, str(arg)))]
    if op == "run_close":
        return [(RUN_CLOSE, (p, str(arg)))]
    if op == "dead_add":
        _, data = arg
        return [("INSERT INTO dead_letters (process, event_id, ord, event, reason, error, "
                 "attempts, at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                 "ON CONFLICT (process, event_id) DO UPDATE SET ord = excluded.ord, "
                 "event = excluded.event, reason = excluded.reason, error = excluded.error, "
                 "attempts = excluded.attempts, at = excluded.at",
                 (p, str(data["event_id"]), seq * _SCALE, attached,
                  to_json(data.get("reason", ""), "reason"), to_json(data.get("error", ""),
                                                                     "error"),
                  int(data.get("attempts", 0)), float(entry.timestamp)))]
    if op == "dead_trim":
        return [("DELETE FROM dead_letters WHERE process = %s AND ord NOT IN (SELECT ord FROM "
                 "dead_letters WHERE process = %s ORDER BY ord DESC LIMIT %s)", (p, p, arg))]
    if op == "dead_redeliver":
        out: list[Statement] = []
        for position, event_id in enumerate(arg):
            out.append(("INSERT INTO pending (process, event_id, ord, event) SELECT process, "
                        "event_id, %s, event FROM dead_letters WHERE process = %s AND "
                        "event_id = %s ON CONFLICT (process, event_id) DO UPDATE SET "
                        "ord = excluded.ord, event = excluded.event",
                        (seq * _SCALE + position, p, event_id)))
            out.append(("DELETE FROM dead_letters WHERE process = %s AND event_id = %s",
                        (p, event_id)))
        return out
    if op == "delivery_add":
        key, event_id = arg
        at = float(entry.timestamp)
        return [("DELETE FROM deliveries WHERE process = %s AND at < %s",
                 (p, at - DELIVERY_KEEP_SECONDS)),  # pruned by age on insert
                ("INSERT INTO deliveries (process, delivery_key, event_id, at) "
                 "VALUES (%s, %s, %s, %s) ON CONFLICT (process, delivery_key) DO NOTHING",
                 (p, key, str(event_id), at))]
    if op == "dead_clear":
        if arg is None:
            return [("DELETE FROM dead_letters WHERE process = %s", (p,))]
        return [("DELETE FROM dead_letters WHERE process = %s AND event_id = ANY(%s)",
                 (p, list(arg)))]
    raise JournalError(f"unknown index operation {op!r}")


# The process id is kept once, in incarnations (schema 4 on): a row names it by its number,
# looked up in this very transaction (the batch's incarnations statement made sure it is there)
# by one join for the whole batch. A scalar subquery per row was a subplan per row to plan and
# run: it made a 116-row commit 4 ms slower (issue 37). A LEFT JOIN: an incarnation missing
# would leave pid NULL, which entries_incarnation refuses (never a row silently left out); and
# ORDER BY the row's place: ids are assigned in submission order, the commit order reads see.
_INSERT_ENTRIES = ("INSERT INTO entries (process, pid, seq, ts, entry_type, run_id, data, crc, "
                   "epoch) SELECT v.process, i.pid, v.seq::bigint, v.ts::float8, v.entry_type, "
                   "v.run_id, v.data, v.crc::bigint, v.epoch::bigint FROM (VALUES ")
_ENTRY_ROW = "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
_ENTRIES_JOIN = (") AS v (n, process, incarnation, seq, ts, entry_type, run_id, data, crc, "
                 "epoch) LEFT JOIN incarnations i ON i.process_id = v.incarnation ORDER BY v.n")
_ADD_INCARNATIONS = "INSERT INTO incarnations (process_id) VALUES "
_INCARNATION_ROW = "(%s)"
_INCARNATIONS_CONFLICT = " ON CONFLICT (process_id) DO NOTHING"
_SET_HEADS = "INSERT INTO heads (process, last_seq) VALUES "
_HEAD_ROW = "(%s, %s)"
_HEADS_CONFLICT = " ON CONFLICT (process) DO UPDATE SET last_seq = excluded.last_seq"


async def write_batch(conn: psycopg.AsyncConnection[Any], batch: list[PendingAppend],
                      fence: tuple[str, int] | None = None) -> None:
    """Write ``batch`` (no flush markers) in one transaction; returns once it is committed.

    The whole batch goes as one message of statements (the simple query protocol: one
    implicit transaction, rolled back as a whole when a statement fails): PostgreSQL runs it
    to its end without waiting on this client, so a writer paused half-way (SIGSTOP, a long GC)
    never leaves a transaction open holding locks. ``fence`` (process, epoch): when the batch
    holds entries of that process, its first statement proves the epoch is still current
    (fencing.py; SQLSTATE PU409 when it is not), and each of its entries records the epoch."""
    heads: dict[str, int] = {}
    for item in batch:
        heads[item.row[0]] = item.row[2]
    fenced, epoch = fence if fence is not None else (None, None)
    literal = psycopg.AsyncClientCursor(conn).mogrify  # values bound here, quoted by libpq
    statements = []
    if fenced in heads:  # first: the rest waits on its lock, and nothing lands if refused
        statements.append(literal(FENCE_SQL, (fenced, epoch)))
    incarnations = sorted({item.row[1] for item in batch})
    statements.append(_ADD_INCARNATIONS + ", ".join(
        literal(_INCARNATION_ROW, (process_id,)) for process_id in incarnations)
        + _INCARNATIONS_CONFLICT)
    statements.append(_INSERT_ENTRIES + ", ".join(
        literal(_ENTRY_ROW, (n, *item.row, epoch if item.row[0] == fenced else None))
        for n, item in enumerate(batch)) + _ENTRIES_JOIN)
    # the index rows in as few statements as their order allows (coalesce.py)
    statements.extend(literal(sql, params) for sql, params in coalesce(
        [statement for item in batch for statement in item.statements]))
    statements.append(_SET_HEADS + ", ".join(literal(_HEAD_ROW, head)
                                             for head in heads.items()) + _HEADS_CONFLICT)
    crashpoints.reached("group_commit")  # the batch made, nothing of it committed
    await conn.execute(";\n".join(statements))  # no parameters: the simple query protocol


async def written_before(conn: psycopg.AsyncConnection[Any], batch: list[PendingAppend]
                         ) -> bool:
    """Whether an earlier attempt at ``batch`` committed (True: every row is there as it was
    sent) or not (False: none is). Anything else is another writer's entries under these
    seqs: a JournalError."""
    processes = [item.row[0] for item in batch]
    seqs = [item.row[2] for item in batch]
    cur = await conn.execute(
        f"SELECT e.process, e.seq, {PROCESS_ID}, e.entry_type, e.crc FROM {ENTRIES_FROM} "
        "WHERE (e.process, e.seq) IN (SELECT * FROM unnest(%s::text[], %s::bigint[]))",
        (processes, seqs))
    found = {(r[0], int(r[1])): (r[2], r[3], int(r[4])) for r in await cur.fetchall()}
    if not found:
        return False
    sent = {(i.row[0], i.row[2]): (i.row[1], i.row[4], i.row[7]) for i in batch}
    if found == sent:
        return True
    (process, seq), *_ = sorted(set(found) & set(sent))
    raise JournalError(conflict(process, seq))


def conflict(process: str, seq: int) -> str:
    return (f"entry {process}:{seq} is already in the journal, written by another writer: two "
            f"runtimes are appending to process {process!r} on one database; this journal "
            "stops writing (nothing of it was acknowledged); reopen it once one owner remains")


def describe_integrity(exc: psycopg.IntegrityError) -> str:
    """A unique violation on (process, seq) in an operator's words; else the server's."""
    diag = exc.diag
    if diag.constraint_name == "entries_process_seq":
        detail = diag.message_detail or ""
        # "Key (process, seq)=(p, 3) already exists."
        inside = detail.partition(")=(")[2].rpartition(")")[0]
        process, _, seq = inside.rpartition(", ")
        if seq.isdigit():
            return conflict(process, int(seq))
        return conflict("?", 0) + f" ({detail})"
    return str(exc)
