"""The PostgreSQL journal's writer vacuums the queue's tables (``pending``, ``open_runs``) every
``VACUUM_EVERY`` run ends, so that a burst of runs does not grow their indexes by an entry a run
until autovacuum comes by; the runs' entries, the queue and the open runs are as before."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from runtime_core.journal import PostgresJournal
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.postgres import writer
from runtime_core.journal.provider import ReadFilter

pytestmark = pytest.mark.slow


def vacuums(dsn: str) -> dict[str, int]:
    """How many times each of the queue's tables was vacuumed (a manual VACUUM counts)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT relname, vacuum_count FROM pg_stat_user_tables "
                            "WHERE relname IN ('pending', 'open_runs') "
                            "AND schemaname = current_schema()").fetchall()
    return {str(name): int(count) for name, count in rows}


async def run_ends(journal: PostgresJournal, first: int, count: int) -> None:
    for n in range(first, first + count):
        event = {"event_id": f"e{n}", "payload": {"n": n}}
        await journal.append(JournalEntry("p", EntryType.EVENT_ACCEPTED, {"event_id": f"e{n}"}),
                             attachment=event)
        await journal.append(JournalEntry("p", EntryType.RUN_STARTED, {"event_id": f"e{n}"},
                                          run_id=f"r{n}"))
        await journal.append(JournalEntry("p", EntryType.RUN_FINISHED,
                                          {"event_id": f"e{n}", "state": "succeeded"},
                                          run_id=f"r{n}"))


async def test_the_queue_tables_are_vacuumed_every_so_many_run_ends(
        pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer, "VACUUM_EVERY", 10)
    journal = PostgresJournal(pg_dsn)
    await journal.open()
    try:
        await run_ends(journal, 0, 9)
        assert vacuums(pg_dsn) == {"pending": 0, "open_runs": 0}  # not yet: 9 ends
        await run_ends(journal, 9, 3)
        until = time.monotonic() + 10
        while vacuums(pg_dsn) != {"pending": 1, "open_runs": 1}:
            assert time.monotonic() < until, vacuums(pg_dsn)
            await asyncio.sleep(0.05)
        await journal.append(JournalEntry("p", EntryType.EVENT_ACCEPTED, {"event_id": "kept"}),
                             attachment={"event_id": "kept", "payload": {}})
        assert [e["event_id"] for e in await journal.pending_events("p")] == ["kept"]
        assert await journal.open_runs("p") == []
        finished = await journal.read(ReadFilter(process="p",
                                                 entry_type=EntryType.RUN_FINISHED))
        assert len(finished) == 12
    finally:
        await journal.close()
