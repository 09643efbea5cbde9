"""The cluster inbox: events accepted on any node, waiting in PostgreSQL for their process's owner.

A webhook or an inject can reach any node; only the owner of the process may journal and run
the event. A non-owner calls :meth:`ClusterInbox.put`: one row of ``cluster_inbox`` and a
``NOTIFY cluster_inbox, '<process>'`` in one transaction, and it answers the sender only after
that commit (an event is acknowledged only once it is durable). ``put`` says ``"duplicate"``
(and adds nothing) when the process's inbox holds the same ``event_id`` or the same sender's
delivery key (the event's metadata ``delivery_key``) already, so a replayed delivery is
accepted once.

The owner drains it with :meth:`ClusterInbox.claim` (usually through puller.InboxPuller). One
transaction: the fence first (``cluster_fence(process, epoch)``: a node that lost the lease
claims nothing), then ``FOR UPDATE SKIP LOCKED`` takes the oldest rows; each event goes to the
owner's ``accept`` callback, which journals it durably in the owner's journal, and only the rows
it accepted are deleted, in that same transaction.

Crash between the owner's journal commit and the inbox delete: the row stays and is claimed
again. To make that redelivery recognisable, ``claim`` gives every event without a delivery key
the key ``cluster-inbox:<row id>`` (:func:`inbox_delivery_key`; a sender's own key is kept): the
journal's delivery index records it with the ``event_accepted`` entry, so the owner's intake
answers "duplicate" the second time and the row is then deleted. Ids are never reused.

Once its row is deleted the inbox forgets an event: a sender replaying it later is caught by the
owner's journal's delivery index (senders' delivery keys are kept there for days), not here.

The ``accept`` callback runs inside the claim's transaction, on the claim's connection: it must
not use the same single connection (a :class:`Connector` shared with it would wait on itself);
give the inbox a pool or a Connector of its own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg

from runtime_core.cluster.db import AsyncConn, ConnectionSource, Connector, Database
from runtime_core.cluster.ddl import advisory_key, ensure_tables
from runtime_core.cluster.leases import as_fenced_out, fence_check_sql
from runtime_core.journal.postgres.dsn import redact_dsn
from runtime_core.journal.provider import MAX_DELIVERY_KEY
from runtime_core.triggers.base import DELIVERY_KEY, TriggerEvent

__all__ = ["CHANNEL", "AcceptEvent", "ClusterInbox", "InboxItem", "PutResult", "event_text",
           "inbox_delivery_key"]

log = logging.getLogger(__name__)

#: the LISTEN/NOTIFY channel; a notification's payload is the process's name
CHANNEL = "cluster_inbox"
INBOX_LOCK = advisory_key(b"pcinbox")
TABLES = ("cluster_inbox",)
INDEXES = ("cluster_inbox_delivery", "cluster_inbox_queue")
STATEMENTS = [
    """CREATE TABLE IF NOT EXISTS cluster_inbox (
        id BIGSERIAL PRIMARY KEY,
        process TEXT NOT NULL,
        event_id TEXT NOT NULL,
        delivery_key TEXT NULL,
        event TEXT NOT NULL,
        accepted_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
        UNIQUE (process, event_id)
    )""",
    """CREATE UNIQUE INDEX IF NOT EXISTS cluster_inbox_delivery
        ON cluster_inbox (process, delivery_key) WHERE delivery_key IS NOT NULL""",
    "CREATE INDEX IF NOT EXISTS cluster_inbox_queue ON cluster_inbox (process, id)",
]

# no conflict target: a clash on (process, event_id) or on the delivery key adds nothing
PUT_SQL = """
INSERT INTO cluster_inbox (process, event_id, delivery_key, event) VALUES (%s, %s, %s, %s)
ON CONFLICT DO NOTHING RETURNING id"""
NOTIFY_SQL = "SELECT pg_notify(%s, %s)"
CLAIM_SQL = """
SELECT id, process, event, accepted_at FROM cluster_inbox WHERE process = %s
ORDER BY id FOR UPDATE SKIP LOCKED LIMIT %s"""
DELETE_SQL = "DELETE FROM cluster_inbox WHERE id = ANY(%s)"

PutResult = Literal["accepted", "duplicate"]
#: the owner's ``await accept(event)``: True once the event is the owner's (journaled durably,
#: or recognised as a delivery it journaled before): its row may go; False leaves it (no room
#: now: it is claimed again later).
AcceptEvent = Callable[[TriggerEvent], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class InboxItem:
    """One waiting event: its row id, its process, the event, when the inbox accepted it."""

    id: int
    process: str
    event: TriggerEvent
    accepted_at: datetime


def inbox_delivery_key(item_id: int) -> str:
    """The delivery key ``claim`` gives an event that came without one."""
    return f"cluster-inbox:{item_id}"


def event_text(process: str, event: TriggerEvent) -> str:
    """``event`` as the JSON an inbox row holds; ValueError naming it if it cannot be."""
    try:
        return json.dumps(event.to_dict(), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"event {event.event_id} for process {process!r} cannot be "
                         f"stored as JSON: {exc}") from None


def _sender_key(event: TriggerEvent) -> str | None:
    key = event.metadata.get(DELIVERY_KEY)
    return key if isinstance(key, str) and 0 < len(key) <= MAX_DELIVERY_KEY else None


def _listen_dsn(source: ConnectionSource | str) -> str | None:
    if isinstance(source, str):
        return source
    conninfo = getattr(source, "conninfo", None)  # psycopg_pool.AsyncConnectionPool
    if isinstance(conninfo, str):
        return conninfo
    if isinstance(source, Connector):
        dsn = getattr(source, "_dsn", None)  # Connector keeps it private: never shown
        return dsn if isinstance(dsn, str) else None
    return None


class ClusterInbox:
    """``cluster_inbox`` through a psycopg AsyncConnectionPool, a :class:`Connector` or a DSN
    (then it owns and closes its connection). ``dsn`` is where a puller LISTENs; it is taken
    from the source when it can be (a DSN, a pool's conninfo, a Connector)."""

    def __init__(self, source: ConnectionSource | str, *, dsn: str | None = None) -> None:
        self.db = Database(source)
        self.dsn = dsn if dsn is not None else _listen_dsn(source)
        self._ready = False

    def __repr__(self) -> str:
        return f"ClusterInbox({redact_dsn(self.dsn) if self.dsn else '?'})"

    async def close(self) -> None:
        """Close the connection it opened itself (a pool or Connector passed in is the
        caller's to close)."""
        await self.db.close()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConn]:
        async with self.db.connection() as conn:
            if not self._ready:
                await ensure_tables(conn, INBOX_LOCK, TABLES, INDEXES, STATEMENTS)
                self._ready = True
            yield conn

    async def ensure(self) -> None:
        """Create the table now if it is missing (otherwise the first call does it)."""
        async with self._connection():
            pass

    async def put(self, process: str, event: TriggerEvent) -> PutResult:
        """Add ``event`` to ``process``'s inbox and wake its owner: ``"accepted"`` once the row
        is committed, ``"duplicate"`` when the inbox has the same event id or delivery key
        already (nothing added). An exception means not accepted: the sender keeps the event
        (a webhook answers 503); a retry after an ambiguous failure is safe (a duplicate)."""
        if not process:
            raise ValueError("ClusterInbox.put needs a process name")
        data = event_text(process, event)
        async with self._connection() as conn:
            async with conn.transaction():
                cur = await conn.execute(
                    PUT_SQL, (process, event.event_id, _sender_key(event), data))
                added = await cur.fetchone() is not None
                if added:
                    await conn.execute(NOTIFY_SQL, (CHANNEL, process))
            if not conn.autocommit:
                await conn.commit()
        return "accepted" if added else "duplicate"

    async def claim(self, process: str, limit: int, accept: AcceptEvent, *,
                    fence: tuple[str, int] | None = None) -> list[InboxItem]:
        """Hand up to ``limit`` of ``process``'s oldest waiting events to ``accept``, in
        order, and delete those it accepted; the items accepted.

        One transaction: ``fence`` = (process, epoch) is checked first (FencedOut, nothing
        claimed, when the epoch moved on) and its lease row stays share-locked until the
        commit; rows another claimer holds are skipped. ``accept`` returning False stops the
        batch (the rest stay, in order). ``accept`` raising stops it too: the rows accepted
        before are deleted, the rest stay, and the exception is raised after the commit."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, not {limit}")
        done: list[InboxItem] = []
        failure: Exception | None = None
        try:
            async with self._connection() as conn:
                async with conn.transaction():
                    if fence is not None:
                        await conn.execute(fence_check_sql(), fence)
                    rows = await (await conn.execute(CLAIM_SQL, (process, limit))).fetchall()
                    for row in rows:
                        item = self._item(row)
                        if item is None:
                            continue
                        try:
                            if not await accept(item.event):
                                break
                        except Exception as exc:
                            failure = exc
                            break
                        done.append(item)
                    if done:
                        await conn.execute(DELETE_SQL, ([item.id for item in done],))
                if not conn.autocommit:
                    await conn.commit()
        except psycopg.Error as exc:
            fenced = as_fenced_out(exc)
            if fenced is not None:
                raise fenced from None
            raise
        if failure is not None:
            raise as_fenced_out(failure) or failure  # the owner's journal write was fenced
        return done

    @staticmethod
    def _item(row: tuple[Any, ...]) -> InboxItem | None:
        item_id, process, text, accepted_at = row
        try:
            data = json.loads(text)
            event = TriggerEvent.from_dict(data)
        except (ValueError, TypeError, KeyError) as exc:
            log.error("cluster inbox: row %s for process %s is not a readable event (%s); it "
                      "stays in cluster_inbox for an operator to inspect", item_id, process, exc)
            return None
        if _sender_key(event) is None:
            event.metadata[DELIVERY_KEY] = inbox_delivery_key(int(item_id))
        return InboxItem(int(item_id), str(process), event, accepted_at)

    async def pending(self, process: str | None = None) -> int:
        """How many events wait (for ``process``, or for all processes)."""
        query = "SELECT count(*) FROM cluster_inbox"
        async with self._connection() as conn:
            if process is None:
                cur = await conn.execute(query)
            else:
                cur = await conn.execute(query + " WHERE process = %s", (process,))
            row = await cur.fetchone()
            if not conn.autocommit:
                await conn.commit()
        return int(row[0]) if row else 0
