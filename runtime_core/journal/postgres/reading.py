"""The PostgreSQL journal's reading connections: a small pool that a burst of quick reads does
not grow, and that does not spend a round trip checking a connection before each read.

A start sends its recovery reads together (a checkpoint, the queue, the open runs, the
conversation...), each well under a millisecond on the server. Handed straight to the pool,
every read that found the one connection busy made the pool open another (a backend to start,
a login, cold catalog caches: 5-10 ms each on a 2-core box, issue 37), and every checkout
sent an empty query first (``check_connection``). Here a read waits its turn on the connection
there is, and goes to the pool beside it only once one read has held that connection for
``PATIENCE`` (a slow read, an export say, must not hold the others up): so the pool grows for
slow reads, never for a burst of quick ones. A connection the server dropped while it sat
idle (a restart, a failover) is found by the read that uses it: reads change nothing, so that
read runs once more on a checked connection, which is what the check on every checkout
bought.

A reading connection plans without bitmap scans (``plan_reads``). The type index holds only
the rare types (schema 3), so "the last 50 run ends" walks (process, seq) backwards; on a
journal not yet analyzed (a fresh one: autovacuum's first ANALYZE comes a minute later) the
planner guessed one matching row and took a bitmap scan of the process's every entry and a
sort instead: 9.5 ms at 2,000 runs and growing with the journal (0.3 ms walked backwards). No
read of the journal gains from a bitmap scan: its lookups are by key or by an index's order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

__all__ = ["PATIENCE", "ReadConnections", "plan_reads"]

#: How long a read waits on one read in progress before it asks the pool for a connection of
#: its own (seconds): many times a quick read's round trip, even on a loaded box; short next
#: to a slow read (an export, a search of a long journal).
PATIENCE = 0.05
AsyncConn = psycopg.AsyncConnection[Any]


class ReadConnections:
    """Reads through ``pool`` (opened and closed by its owner), one at a time unless one
    takes longer than ``patience``; a read that found its connection dropped is run again."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn], *,
                 patience: float = PATIENCE) -> None:
        self.pool = pool
        self.patience = patience
        self._turn = asyncio.Lock()
        self._turns = 0  # turns taken so far: a wait that saw none taken waited on one read

    async def fetch(self, sql: str, params: tuple[Any, ...], wait: float) -> list[Any]:
        """The rows ``sql`` selects, waiting at most ``wait`` seconds for a connection;
        psycopg's errors and PoolTimeout are the caller's."""
        async with self._my_turn():
            try:
                return await self._fetch_once(sql, params, wait)
            except _Dropped:
                # The server dropped the connection since its last use (a restart): the
                # pool's other idle ones likely went too. Drop those, then read again, once.
                await self.pool.check()
            try:
                return await self._fetch_once(sql, params, wait)
            except _Dropped as dropped:
                error = dropped.error
            raise error  # out of the except block: psycopg's error, not wrapped in ours

    async def _fetch_once(self, sql: str, params: tuple[Any, ...], wait: float
                          ) -> list[Any]:
        async with self.pool.connection(timeout=wait) as conn:  # a broken one is dropped
            try:
                cur = await conn.execute(sql, params)
                return list(await cur.fetchall())
            except psycopg.OperationalError as exc:
                if conn.broken:
                    raise _Dropped(exc) from exc
                raise

    @asynccontextmanager
    async def _my_turn(self) -> AsyncIterator[None]:
        held = False
        while not held:
            turns = self._turns
            try:
                async with asyncio.timeout(self.patience):
                    await self._turn.acquire()
                held = True
            except TimeoutError:
                if self._turns == turns:
                    break  # one read held it all along, a slow one: go round it
                # the queue moved (quick reads ahead of this one): keep waiting
        if held:
            self._turns += 1
        try:
            yield
        finally:
            if held:
                self._turn.release()


async def plan_reads(conn: AsyncConn) -> None:
    """Set a new reading connection up (the pool's ``configure``): no bitmap scans."""
    await conn.execute("SET enable_bitmapscan = off")


class _Dropped(Exception):
    """A read's connection was no longer there (``error``: psycopg's), not the read's fault."""

    def __init__(self, error: psycopg.OperationalError) -> None:
        super().__init__(str(error))
        self.error = error

