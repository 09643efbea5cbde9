"""A PostgreSQL journal fenced to a lease epoch: its writes land while the epoch is current,
carry it in the entries table, and are refused (JournalFenced, for good) once another node
took the process over; a batch in flight holds the takeover back until it commits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from runtime_core.cluster import LeaseStore
from runtime_core.journal import JournalEntry, JournalFenced, PostgresJournal
from tests.helpers.polling import wait_for

pytestmark = pytest.mark.slow


def rows(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return [tuple(r) for r in conn.execute(sql).fetchall()]  # type: ignore[arg-type]


def entry(process: str, n: int) -> JournalEntry:
    return JournalEntry(process=process, entry_type="note", data={"n": n})


@pytest.fixture
async def leases(pg_dsn: str) -> AsyncIterator[LeaseStore]:
    store = LeaseStore(pg_dsn)
    try:
        yield store
    finally:
        await store.close()


async def test_writes_carry_the_epoch_until_a_takeover_fences_them(
        pg_dsn: str, leases: LeaseStore) -> None:
    epoch = await leases.claim("p", "a", 30.0)
    assert epoch == 1
    journal = PostgresJournal(pg_dsn, fence=("p", epoch), idle_in_transaction_timeout=5.0)
    heard: list[JournalFenced] = []
    journal.on_fenced(heard.append)
    await journal.open()
    try:
        for n in range(3):
            await journal.append(entry("p", n))
        assert rows(pg_dsn, "SELECT seq, epoch FROM entries ORDER BY seq") == \
            [(1, 1), (2, 1), (3, 1)]

        # node b takes the process over: a new term, epoch 2
        assert await leases.release("p", "a", epoch)
        assert await leases.claim("p", "b", 30.0) == 2
        with pytest.raises(JournalFenced) as refused:
            await journal.append(entry("p", 3))
        error = refused.value
        assert (error.process, error.epoch, error.owner, error.owner_epoch) == ("p", 1, "b", 2)
        text = str(error)
        assert "'p'" in text and "epoch 1" in text and "'b'" in text and "epoch 2" in text
        assert heard == [error]
        assert journal.fenced is error

        # fenced for good: refused at once, nothing queued, flush has nothing to wait for
        future = journal.submit(entry("p", 4))
        assert future.done() and isinstance(future.exception(), JournalFenced)
        await journal.flush()
        assert heard == [error]
    finally:
        await journal.close()
    assert rows(pg_dsn, "SELECT seq FROM entries ORDER BY seq") == [(1,), (2,), (3,)]


async def test_refuse_writes_nothing_more_and_tells_no_listener(
        pg_dsn: str, leases: LeaseStore) -> None:
    epoch = await leases.claim("q", "a", 30.0)
    assert epoch is not None
    journal = PostgresJournal(pg_dsn, fence=("q", epoch))
    heard: list[JournalFenced] = []
    journal.on_fenced(heard.append)
    await journal.open()
    try:
        await journal.append(entry("q", 0))
        journal.refuse("handed over to node 'b' (rebalance)")
        with pytest.raises(JournalFenced, match="handed over to node 'b'"):
            await journal.append(entry("q", 1))
    finally:
        await journal.close()
    assert heard == []
    assert rows(pg_dsn, "SELECT seq, epoch FROM entries") == [(1, epoch)]


async def wait_for_lock_wait(conn: psycopg.AsyncConnection[Any], timeout: float = 10.0
                             ) -> None:
    """Until some session of this database waits on a lock."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        cur = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                 "current_database() AND wait_event_type = 'Lock'")
        row = await cur.fetchone()
        if row and row[0]:
            return
        assert asyncio.get_running_loop().time() < deadline, "nobody waited on the lease row"
        await asyncio.sleep(0.01)


async def test_a_takeover_waits_for_the_batch_in_flight(pg_dsn: str, leases: LeaseStore
                                                       ) -> None:
    """The fence share-locks the lease row: a claim that lands while a fenced batch is open
    waits for its commit, so the new owner reads a journal no old write can follow."""
    epoch = await leases.claim("r", "a", 0.5)
    assert epoch is not None
    journal = PostgresJournal(pg_dsn, fence=("r", epoch))
    await journal.open()
    conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    try:
        await journal.append(entry("r", 0))
        # hold a share lock on the lease row as a paused writer would, then let it expire
        await conn.execute("BEGIN")
        await conn.execute("SELECT cluster_fence('r', %s)", (epoch,))
        while (lease := await leases.owner("r")) is not None and lease.expires_in_s > 0:
            await asyncio.sleep(0.02)  # until the lease ran out
        claim = asyncio.ensure_future(leases.claim("r", "b", 30.0))
        await wait_for_lock_wait(conn)
        assert not claim.done()  # waits on the open fenced transaction
        await conn.execute("COMMIT")
        assert await asyncio.wait_for(claim, 10) == epoch + 1
        with pytest.raises(JournalFenced):
            await journal.append(entry("r", 1))
        await wait_for(lambda: journal.fenced is not None, what="the journal fenced")
    finally:
        await conn.close()
        await journal.close()


async def test_a_retry_that_finds_the_new_owners_entries_is_fenced(
        pg_dsn: str, leases: LeaseStore) -> None:
    """A paused writer's connection was cut (idle in transaction too long) and the new owner
    wrote on: the retry finds another writer's entries under its seqs, and says why."""
    epoch = await leases.claim("s", "a", 0.5)
    assert epoch is not None
    old = PostgresJournal(pg_dsn, fence=("s", epoch), application_name="old-owner")
    await old.open()
    new: PostgresJournal | None = None
    try:
        await old.append(entry("s", 0))
        while (lease := await leases.owner("s")) is not None and lease.expires_in_s > 0:
            await asyncio.sleep(0.02)  # until the lease ran out
        taken = await leases.claim("s", "b", 30.0)
        assert taken == epoch + 1
        new = PostgresJournal(pg_dsn, fence=("s", taken))
        await new.open()
        await new.append(entry("s", 1))  # seq 2, the new owner's
        killed = rows(pg_dsn, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE application_name = 'old-owner'")
        assert killed and all(ok for (ok,) in killed)
        with pytest.raises(JournalFenced) as refused:
            await old.append(entry("s", 2))  # also seq 2, by the old owner's count
        assert (refused.value.owner, refused.value.owner_epoch) == ("b", taken)
    finally:
        await old.close()
        if new is not None:
            await new.close()
    assert rows(pg_dsn, "SELECT seq, epoch FROM entries WHERE process = 's' ORDER BY seq") == \
        [(1, epoch), (2, epoch + 1)]
