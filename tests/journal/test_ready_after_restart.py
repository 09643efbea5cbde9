"""Ready after a restart (issue 37): what a start reads and writes does not grow with the
journal's length nor with the number of runs a crash left in flight."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.agent.tools import tool
from runtime_core.journal import (
    EntryType,
    InMemoryJournal,
    JournalEntry,
    PostgresJournal,
    ReadFilter,
    SQLiteJournal,
)
from runtime_core.journal.left_out import with_starts
from runtime_core.journal.rewind import ends_messages, finished_messages
from runtime_core.journal.sqlite.queries import read_sql
from tests.helpers import durable_runs as workload
from tests.helpers.polling import wait_for
from tests.helpers.recovery import Ledger, abandon

IN_FLIGHT = 8
#: The queries a start reads with (its checkpoint and what follows, the conversation's base,
#: ends and their starts, the queue, the dead letters, the open runs, their entries and
#: profiles), whatever the journal's length and however many runs a crash left open.
START_READS = 12


def config(db: Path) -> ProcessConfig:
    return ProcessConfig(
        model={"provider": "scripted", "turns": [
            {"tool_calls": [{"name": "record", "args": {"item": "$payload.i"}}]},
            {"reply": "done"}]},
        journal={"path": str(db)}, concurrency=IN_FLIGHT)


def plan(db: Path, query: ReadFilter) -> str:
    sql, params = read_sql(query)
    with sqlite3.connect(db) as conn:
        return " | ".join(str(row[-1]) for row in conn.execute(
            f"EXPLAIN QUERY PLAN {sql}", params))


async def ledger_all_in_flight(journal: SQLiteJournal) -> bool:
    """Every run's write intent is durable: each run is mid-write."""
    await journal.flush()
    intents = await journal.read(ReadFilter(process="p", entry_type=EntryType.TOOL_INTENT))
    return len(intents) == IN_FLIGHT


async def test_a_runs_entries_are_found_by_the_run_index_not_by_walking_the_process(
        tmp_path: Path) -> None:
    """Recovery reads each open run's entries, and the conversation each recent run's start:
    by the run index, whatever the journal's length (not every entry of the process)."""
    db = tmp_path / "journal.db"
    journal = SQLiteJournal(db)
    await journal.open()
    await journal.close()
    for query in (ReadFilter(process="p", run_id="r1"),
                  ReadFilter(process="p", run_id="r1", entry_type=EntryType.RUN_STARTED,
                             until_seq=100, limit=1),
                  ReadFilter(process="p", run_id="r1", since_seq=3)):
        said = plan(db, query)
        assert "entries_by_run" in said, said


async def test_runs_left_in_flight_are_read_at_once_and_wait_in_one_commit_not_one_each(
        tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    ledger = Ledger()
    ledger.gate = asyncio.Event()  # every write hangs: the crash finds them open
    journal = CountingJournal(db)
    first = AgentProcess("p", config(db), journal=journal, tools=ledger.tools())
    await first.start()
    for i in range(IN_FLIGHT):
        await first.inject(TriggerEvent("t", "manual", {"i": str(i)}, event_id=f"ev-{i}"))
    await wait_for(lambda: ledger_all_in_flight(journal), what="every run mid-write")
    await abandon(first)
    ledger.gate = None
    batches, reads = journal.batches, journal.reads
    second = AgentProcess("p", config(db), journal=journal, tools=ledger.tools())
    await second.start()
    # Its runs' entries are read in one query (their profiles in one more), not one each.
    assert journal.reads - reads <= START_READS, journal.reads - reads
    waiting: list[Any] = second.waiting_runs()
    assert len(waiting) == IN_FLIGHT
    assert all(run.waiting_reason == "unknown_write_outcome" for run in waiting)
    marked = await journal.read(ReadFilter(process="p", entry_type=EntryType.RUN_WAITING))
    assert len(marked) == IN_FLIGHT
    # The start commits a few batches (its transitions, the recovered summary, the waits),
    # not one per run left waiting.
    assert journal.batches - batches < IN_FLIGHT // 2, journal.batches - batches
    assert ledger.writes == []  # never re-dispatched blindly
    await second.stop()
    await journal.close()


class CountingJournal(SQLiteJournal):
    """An SQLite journal that counts the queries it reads with."""

    reads = 0

    async def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        self.reads += 1
        return await super()._fetch(sql, params)


async def reads_of_a_start(db: Path) -> tuple[int, list[dict[str, Any]]]:
    """How many queries a start on ``db`` reads with, and the conversation it takes back."""
    journal = CountingJournal(db)
    process = AgentProcess("bench", workload.config(db), journal=journal,
                           tools=[tool(workload.book, effect="write")])
    await process.start()
    reads, conversation = journal.reads, process.conversation.messages()
    await process.stop()
    await journal.close()
    return reads, conversation


async def test_a_start_reads_as_often_whatever_the_number_of_runs_its_conversation_holds(
        tmp_path: Path) -> None:
    """The conversation a start takes back is rebuilt from the recent runs' ends and their
    starts read in one query, not one per run: the same reads after 3 runs as after 12 (a
    conversation of 24 messages), and the same conversation the process had before."""
    dbs = tmp_path / "3.db", tmp_path / "12.db"
    counted = []
    for db, runs in zip(dbs, (3, 12), strict=True):
        before = (await workload.run_workload(db, runs)).conversation.messages()
        reads, conversation = await reads_of_a_start(db)
        assert conversation == before and len(conversation) == 2 * runs
        assert conversation[0]["role"] == "user" and "inv-0" in conversation[0]["content"]
        counted.append(reads)
    few, many = counted
    assert many == few, (few, many)


async def test_the_conversation_rebuilt_at_once_is_the_one_rebuilt_run_by_run(
        tmp_path: Path) -> None:
    """Every journal gives the same messages for a run's end read with the others (one query
    on SQL journals, a round of reads on the rest) as for that end read alone."""
    db = tmp_path / "journal.db"
    await workload.run_workload(db, 4)
    sqlite_journal = SQLiteJournal(db)
    await sqlite_journal.open()
    memory = InMemoryJournal()
    await memory.open()
    # with_starts: a run's start rides in its first intent (schema 9)
    for entry in with_starts(await sqlite_journal.read(ReadFilter(process="bench"))):
        if entry.entry_type in (EntryType.RUN_STARTED, EntryType.RUN_FINISHED):
            await memory.append(entry)  # a copy of the runs' starts and ends, in their order
    try:
        for journal in (sqlite_journal, memory):
            ends = await journal.read(ReadFilter(process="bench",
                                                 entry_type=EntryType.RUN_FINISHED))
            alone = [await finished_messages(journal, end) for end in ends]
            assert await ends_messages(journal, ends) == alone
            assert all(len(said) == 2 for said in alone), alone
    finally:
        await sqlite_journal.close()
        await memory.close()


@pytest.mark.slow
async def test_the_entries_of_many_runs_are_read_in_one_query_on_postgres(pg_dsn: str) -> None:
    journal = PostgresJournal(pg_dsn)
    await journal.open()
    try:
        for run in ("r1", "r2", "r3"):
            await journal.append(JournalEntry("p", EntryType.RUN_STARTED,
                                              {"event_id": f"e-{run}"}, run_id=run))
            await journal.append(JournalEntry("p", EntryType.MODEL_USAGE, {}, run_id=run))
        found = await journal.runs_entries("p", ["r3", "r1", "nothing"],
                                           EntryType.RUN_STARTED)
        assert [(e.run_id, e.entry_type) for e in found] == [
            ("r1", EntryType.RUN_STARTED), ("r3", EntryType.RUN_STARTED)]
        found = await journal.runs_entries("p", ["r2", "r3"])
        assert [(e.run_id, e.entry_type) for e in found] == [
            ("r2", EntryType.RUN_STARTED), ("r2", EntryType.MODEL_USAGE),
            ("r3", EntryType.RUN_STARTED), ("r3", EntryType.MODEL_USAGE)]
    finally:
        await journal.close()


#: The queries a start after a clean stop reads with: its checkpoint and what follows, the
#: conversation's bases (rewind, fork), its newest run ends and their starts, the queue, the
#: dead letter count and the open runs (no dead letters read when it counts none).
CLEAN_START_READS = 9


async def test_a_clean_start_reads_no_dead_letters_when_it_counts_none(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    await workload.run_workload(db, 3)
    reads, conversation = await reads_of_a_start(db)
    assert len(conversation) == 6
    assert reads <= CLEAN_START_READS, reads


def wal_bytes(db: Path) -> int:
    wal = db.with_name(db.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


async def test_opening_a_journal_a_clean_stop_left_commits_nothing(tmp_path: Path) -> None:
    """The writer's settings an existing file already has are not set again: setting one is a
    write transaction (a WAL frame and an fsync) on every open, before any entry."""
    db = tmp_path / "journal.db"
    await workload.run_workload(db, 2)
    assert wal_bytes(db) == 0  # the clean stop folded the WAL into the file
    journal = SQLiteJournal(db)
    await journal.open()
    try:
        assert wal_bytes(db) == 0  # opened: nothing committed yet
        with sqlite3.connect(db) as conn:  # and the file keeps its incremental vacuuming
            assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    finally:
        await journal.close()


async def test_a_new_journal_is_still_made_with_incremental_vacuuming(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    journal = SQLiteJournal(db)
    await journal.open()
    await journal.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
