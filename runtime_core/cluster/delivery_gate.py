"""One delivery, one event, whichever nodes it reaches at the same time.

A sender that retries (GitHub after its 10 s timeout, a load balancer's second try) can reach
two nodes at once: the owner of the process, which journals the event itself, and another node,
which puts it into the process's cluster inbox. Each checked the other's record before writing
its own, so both could miss the other: the other node answered 202 with an event id that was
then found a duplicate and never ran (a phantom), or both events were journaled and it ran
twice.

So every take of an event with a delivery key (a sender's delivery id, a signature, an inject's
idempotency key) holds a PostgreSQL advisory lock on (process, key) while it decides:

- a node that does not run the process (:meth:`DeliveryGate.put_once`), in one transaction:
  the lock, then the inbox (a waiting row with that key: a duplicate of it), then the owner's
  journal (its delivery index: a duplicate of the event it took), else the new row; 202 only
  once that commits;
- the owner (:meth:`DeliveryGate.hold`, the runtime's ``delivery_gate``): the lock, then the
  inbox (a waiting row: a duplicate of it, which the owner's puller journals), then, still
  holding it, its intake checks its journal and journals the event; the lock is let go once
  that journal commit is done.

The inbox is read before the journal on both roads: a row leaves the inbox only after the
owner journaled it, so a key is always found in one of the two. The owner's puller, which
journals rows that passed this gate already, does not take the lock (:func:`pulling`): one
row per key, and nobody adds one while another holder decides. Two keys rarely share a lock
(a 64-bit hash): they then only wait for each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from runtime_core.cluster.db import AsyncConn
from runtime_core.cluster.errors import ClusterError
from runtime_core.cluster.inbox import CHANNEL, NOTIFY_SQL, PUT_SQL, PutResult, event_text
from runtime_core.journal.provider import DELIVERY_KEEP_SECONDS, MAX_DELIVERY_KEY
from runtime_core.triggers.base import DELIVERY_KEY, TriggerEvent

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

__all__ = ["DeliveryGate", "delivery_lock_key", "pulling"]

LOCK_SQL = "SELECT pg_advisory_xact_lock(%s, %s)"
LOCK_TIMEOUT_SQL = "SELECT set_config('lock_timeout', %s, true)"
WAITING_SQL = ("SELECT event_id FROM cluster_inbox WHERE process = %s AND delivery_key = %s "
               "ORDER BY id LIMIT 1")
JOURNALED_SQL = ("SELECT event_id FROM deliveries WHERE process = %s AND delivery_key = %s "
                 "AND at >= %s")
JOURNAL_TABLE_SQL = "SELECT to_regclass('deliveries') IS NOT NULL"

#: set while the owner's puller hands an inbox row to its process (no lock: see the module)
_PULLING: ContextVar[bool] = ContextVar("cluster_inbox_pulling", default=False)


@contextlib.contextmanager
def pulling() -> Iterator[None]:
    """Around a puller's hand-over of an inbox row: the gate lets it through unheld."""
    token = _PULLING.set(True)
    try:
        yield
    finally:
        _PULLING.reset(token)


def delivery_lock_key(process: str, key: str) -> tuple[int, int]:
    """The two int4 halves of the advisory lock of ``key`` of ``process`` (the two-key
    space of advisory locks: apart from the cluster's one-key DDL locks)."""
    digest = hashlib.blake2b(f"{process}\0{key}".encode("utf-8", "surrogatepass"),
                             digest_size=8).digest()
    return (int.from_bytes(digest[:4], "big", signed=True),
            int.from_bytes(digest[4:], "big", signed=True))


def _sender_key(event: TriggerEvent) -> str | None:
    key = event.metadata.get(DELIVERY_KEY)
    return key if isinstance(key, str) and 0 < len(key) <= MAX_DELIVERY_KEY else None


class DeliveryGate:
    """The advisory locks on delivery keys, through the inbox's connection pool (opened by
    ClusterIngress.start: until then :meth:`hold` refuses, and the sender retries)."""

    def __init__(self, *, timeout_s: float = 5.0) -> None:
        self.pool: AsyncConnectionPool[Any] | None = None
        self.timeout_s = float(timeout_s)  # for a connection, and again for the lock
        self._journal_seen = False  # the journal's delivery index exists (no process
        # journaled yet in a new cluster: nothing to find there)

    def _pool(self) -> AsyncConnectionPool[Any]:
        if self.pool is None:
            raise ClusterError("this node's cluster inbox is not open yet")
        return self.pool

    async def _journal_ready(self, conn: AsyncConn) -> bool:
        """Whether the journal's delivery index exists yet (once it does, it stays)."""
        if not self._journal_seen:
            row = await (await conn.execute(JOURNAL_TABLE_SQL)).fetchone()
            self._journal_seen = bool(row and row[0])
        return self._journal_seen

    @asynccontextmanager
    async def hold(self, process: str, key: str, event_id: str) -> AsyncIterator[str | None]:
        """The owner's road (ports.DeliveryGate): hold ``key`` of ``process`` while its
        intake checks and journals ``event_id``; it yields the id of an event waiting in the
        inbox with that key (a duplicate), or None. An inbox row being pulled passes unheld."""
        if _PULLING.get():
            yield None
            return
        async with self._pool().connection(timeout=self.timeout_s) as conn:
            async with asyncio.timeout(self.timeout_s * 2):
                async with conn.pipeline():  # one round trip: the lock goes with the BEGIN
                    await conn.execute("BEGIN")
                    await conn.execute(LOCK_TIMEOUT_SQL, (self._lock_timeout(),))
                    await conn.execute(LOCK_SQL, delivery_lock_key(process, key))
                    cur = await conn.execute(WAITING_SQL, (process, key))
                row = await cur.fetchone()
            try:  # the journal is the intake's to read and write, still under the lock
                yield str(row[0]) if row is not None and str(row[0]) != event_id else None
            finally:
                # nothing to keep, and a failed end must not fail a journaled event: the
                # pool rolls back (or drops) a connection returned inside a transaction
                with contextlib.suppress(Exception):
                    await conn.execute("ROLLBACK")

    async def put_once(self, process: str, event: TriggerEvent) -> tuple[PutResult, str]:
        """A node that does not run ``process``: put ``event`` into its cluster inbox (and
        wake its owner) unless its delivery was taken already; ("accepted", its id) once the
        row is committed, or ("duplicate", the id of the event it repeats). An exception
        means not accepted (the sender keeps the event)."""
        key = _sender_key(event)
        text = event_text(process, event)
        async with self._pool().connection(timeout=self.timeout_s) as conn, \
                conn.transaction():
            async with asyncio.timeout(self.timeout_s * 2):
                if key is not None:
                    journal = await self._journal_ready(conn)
                    async with conn.pipeline():  # the lock and both reads: one round trip
                        await conn.execute(LOCK_TIMEOUT_SQL, (self._lock_timeout(),))
                        await conn.execute(LOCK_SQL, delivery_lock_key(process, key))
                        waiting = await conn.execute(WAITING_SQL, (process, key))
                        journaled = await conn.execute(JOURNALED_SQL, (
                            process, key, time.time() - DELIVERY_KEEP_SECONDS)) \
                            if journal else None
                    # the inbox first: a row leaves it only once the owner journaled it
                    for cur in (waiting, journaled):
                        row = await cur.fetchone() if cur is not None else None
                        if row is not None and str(row[0]) != event.event_id:
                            return "duplicate", str(row[0])
                cur = await conn.execute(PUT_SQL, (process, event.event_id, key, text))
                if await cur.fetchone() is None:  # this very event, put before (a retry)
                    return "duplicate", event.event_id
                await conn.execute(NOTIFY_SQL, (CHANNEL, process))
        return "accepted", event.event_id

    def _lock_timeout(self) -> str:
        return f"{round(self.timeout_s * 1000)}ms"
