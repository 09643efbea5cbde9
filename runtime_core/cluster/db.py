"""Where the cluster's stores get their PostgreSQL connections.

A store takes a *connection source*: anything with an async ``connection()`` context manager
(a psycopg_pool ``AsyncConnectionPool`` fits), a :class:`Connector` (one lazily opened
connection, replaced after it breaks: what a node's loop needs), or a DSN (a Connector the store
owns and closes). The first connection a store gets creates the schema if it is missing.

A connection that broke (PostgreSQL restarted, the socket died) or was left mid-query (a
timeout cancelled it) is closed and forgotten; the next ``connection()`` opens a new one, so a
caller that retries after ``psycopg.OperationalError`` reconnects by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import psycopg
from psycopg.pq import TransactionStatus

from runtime_core.cluster.schema import ensure_schema
from runtime_core.journal.postgres.dsn import Scrubber

__all__ = ["AsyncConn", "ConnectionSource", "Connector", "Database"]

AsyncConn = psycopg.AsyncConnection[Any]


class ConnectionSource(Protocol):
    def connection(self) -> AbstractAsyncContextManager[AsyncConn]: ...


class Connector:
    """One autocommit connection to ``dsn``, opened on first use, used by one caller at a time,
    and replaced after it breaks. Errors never show the DSN's password."""

    def __init__(self, dsn: str, *, connect_timeout: float = 5.0,
                 application_name: str = "promptui-cluster",
                 lock_timeout_s: float | None = None) -> None:
        self._dsn = dsn
        self._scrub = Scrubber(dsn)
        self.shown = self._scrub.shown  # the DSN as it may be shown: without its password
        self.connect_timeout = connect_timeout
        self.application_name = application_name
        self.lock_timeout_s = lock_timeout_s  # a statement waiting longer for a row lock fails
        self._conn: AsyncConn | None = None
        self._lock = asyncio.Lock()
        self.connects = 0  # how many connections it opened (1 + reconnections)

    @property
    def is_connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConn]:
        async with self._lock:
            conn = self._conn
            if conn is None or conn.closed or conn.broken:
                conn = self._conn = await self._connect()
            try:
                yield conn
            except BaseException:
                if conn.closed or conn.broken or \
                        conn.info.transaction_status != TransactionStatus.IDLE:
                    await self._discard()
                raise

    async def _connect(self) -> AsyncConn:
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=max(2, round(self.connect_timeout)),
                application_name=self.application_name)
        except psycopg.OperationalError as exc:
            raise psycopg.OperationalError(
                f"cannot connect to {self.shown}: {self._scrub(str(exc).strip())}") from None
        if self.lock_timeout_s is not None:
            await conn.execute("SELECT set_config('lock_timeout', %s, false)",
                               (f"{max(1, round(self.lock_timeout_s * 1000))}ms",))
        self.connects += 1
        return conn

    async def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            with contextlib.suppress(psycopg.Error):  # broken: nothing more to do with it
                await conn.close()

    async def close(self) -> None:
        async with self._lock:
            await self._discard()


class Database:
    """A connection source plus the schema: the first connection creates the tables."""

    def __init__(self, source: ConnectionSource | str) -> None:
        self.owned = isinstance(source, str)  # made from a DSN here: close() closes it
        self.source: ConnectionSource = Connector(source) if isinstance(source, str) else source
        self._ready = False

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConn]:
        async with self.source.connection() as conn:
            if not self._ready:
                await ensure_schema(conn)
                self._ready = True
            yield conn

    async def close(self) -> None:
        if self.owned and isinstance(self.source, Connector):
            await self.source.close()
