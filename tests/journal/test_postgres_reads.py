"""The PostgreSQL journal's reading connections (runtime_core/journal/postgres/reading.py) and
its batch insert: a burst of quick reads takes turns on one connection instead of opening
more, a slow read does not hold a quick one up, a connection the server dropped while idle
costs a read nothing, and a batch lands in submission order with each row's incarnation.

Each test gets a fresh schema on the worker's throwaway PostgreSQL (``pg_dsn``); the one that
restarts the server leaves it running.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest

from runtime_core.journal import JournalEntry, PostgresJournal, ReadFilter
from tests.helpers.polling import wait_for
from tests.helpers.postgres import PgServer

pytestmark = pytest.mark.slow

APP = "promptui-reads-test"


def backends(dsn: str) -> int:
    """How many connections the journal under test holds (writer and readers)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                           (APP,)).fetchone()
    return int(row[0]) if row else 0


def lock_waits(dsn: str) -> int:
    """How many of the journal's connections wait for a lock."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                           "AND wait_event_type = 'Lock'", (APP,)).fetchone()
    return int(row[0]) if row else 0


async def opened(dsn: str, **kw: Any) -> PostgresJournal:
    journal = PostgresJournal(dsn, application_name=APP, **kw)
    await journal.open()
    return journal


async def test_a_burst_of_quick_reads_takes_turns_on_one_connection(pg_dsn: str) -> None:
    journal = await opened(pg_dsn)
    try:
        for n in range(5):
            await journal.append(JournalEntry("p", "note", {"n": n}, process_id="i1"))
        # what a start sends at once: every read answered, right, and no connection opened
        reads = [journal.read(ReadFilter(process="p", since_seq=k)) for k in range(5)]
        reads += [journal.pending_events("p"), journal.open_runs("p"),
                  journal.dead_letter_count("p"), journal.last_checkpoint("p")]
        *found, pending, open_runs, dead, checkpoint = await asyncio.gather(*reads)
        assert [[e.data["n"] for e in got] for got in found] == [
            list(range(k, 5)) for k in range(5)]
        assert (pending, open_runs, dead, checkpoint) == ([], [], 0, None)
        assert await asyncio.to_thread(backends, pg_dsn) == 2  # the writer and one reader
    finally:
        await journal.close()


async def test_a_slow_read_does_not_hold_up_a_quick_one(pg_dsn: str) -> None:
    journal = await opened(pg_dsn)
    blocker = await psycopg.AsyncConnection.connect(pg_dsn)
    try:
        await journal.append(JournalEntry("p", "note", {"n": 1}, process_id="i1"))
        await blocker.execute("LOCK TABLE pending IN ACCESS EXCLUSIVE MODE")  # held: in a txn
        slow = asyncio.ensure_future(journal.pending_events("p"))
        # the slow read holds its connection, waiting on the lock
        await wait_for(lambda: lock_waits(pg_dsn) == 1, timeout=10, what="the read to wait")
        began = time.perf_counter()
        quick = await journal.read(ReadFilter(process="p"))
        waited = time.perf_counter() - began
        assert [e.data for e in quick] == [{"n": 1}]
        assert waited < 2.0  # on a connection of its own, not behind the slow read
        assert not slow.done()
        await blocker.rollback()
        assert await slow == []
    finally:
        await blocker.close()
        await journal.close()


async def test_a_connection_the_server_dropped_costs_a_read_nothing(
        pg_server: PgServer, pg_dsn: str) -> None:
    journal = await opened(pg_dsn)
    try:
        await journal.append(JournalEntry("p", "note", {"n": 1}, process_id="i1"))
        assert len(await journal.read(ReadFilter(process="p"))) == 1  # a reader, now idle
        await asyncio.to_thread(pg_server.stop, "fast")  # ends every connection
        await asyncio.to_thread(pg_server.start)
        # the idle reader is gone: the read finds out, and is answered on a new one
        assert [e.data for e in await journal.read(ReadFilter(process="p"))] == [{"n": 1}]
        assert await journal.pending_events("p") == []
    finally:
        if not pg_server.running:
            pg_server.start()
        await journal.close()


async def test_a_batch_lands_in_submission_order_with_each_rows_incarnation(
        pg_dsn: str) -> None:
    journal = await opened(pg_dsn)
    try:
        sent = [JournalEntry(f"p{n % 3}", "note", {"n": n}, process_id=f"i{n % 2}",
                             timestamp=1.7e9 + n / 7 + 1e-7)  # doubles, kept to the bit
                for n in range(30)]
        sent[0].timestamp = float("inf")  # a literal of another type in the same VALUES
        futures = [journal.submit(entry) for entry in sent]  # queued at once: a few batches
        await asyncio.gather(*futures)
        got = await journal.read(ReadFilter())  # every process: in commit (id) order
    finally:
        await journal.close()
    assert [(e.process, e.seq, e.process_id, e.data, e.timestamp) for e in got] == [
        (e.process, e.seq, e.process_id, e.data, e.timestamp) for e in sent]
    with psycopg.connect(pg_dsn) as conn:
        stored = conn.execute("SELECT count(*) FROM entries WHERE process_id IS NULL "
                              "AND pid IS NOT NULL AND epoch IS NULL").fetchone()
    assert stored is not None and stored[0] == len(sent)  # the id's text once, by number
