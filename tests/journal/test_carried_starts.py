"""SQLite schema 9 / PostgreSQL schema 8: a run's start rides in its first tool intent
(``journal.left_out.STARTED``) instead of a ``run_started`` row of its own, and every reader
gets it back: a read of ``run_started`` entries (every backend, either order, with a limit),
the open runs index, recovery of a run a stop cut short inside its write, the file's checks
and its salvage, Pulse's run times and the timeline's line."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from runtime_core import AgentProcess, ProcessConfig, ToolContext, TriggerEvent
from runtime_core.agent.model import ModelTurn, ToolCall, Usage
from runtime_core.agent.tools import tool
from runtime_core.control.pulse_reads import read_pulse
from runtime_core.journal import InMemoryJournal, PostgresJournal, SQLiteJournal
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.inspect import read_entries, salvage
from runtime_core.journal.left_out import STARTED, identity_of, with_starts
from runtime_core.journal.postgres.reader import PostgresReader
from runtime_core.journal.provider import JournalProvider, ReadFilter
from runtime_core.journal.recorder import ProcessRecorder
from runtime_core.journal.sqlite.check import find_damage
from runtime_core.journal.summary import summarize
from tests.helpers.durable_runs import run_workload
from tests.helpers.polling import wait_for

INTENT = {"step": 2, "tool": "book", "call_id": "c0", "effect": "write", "args": {"ref": "r1"}}


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


async def test_a_tool_run_keeps_its_start_in_its_first_intent(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    process = await run_workload(path, 2)
    kinds = [str(k) for (k,) in _rows(path, "SELECT entry_type FROM entries WHERE run_id IS "
                                            "NOT NULL ORDER BY seq")]
    assert kinds == [EntryType.TOOL_INTENT, EntryType.TOOL_RESULT, EntryType.RUN_FINISHED] * 2
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        raw = await journal.read("bench")
        intents = [e for e in raw if e.entry_type == EntryType.TOOL_INTENT]
        starts = await journal.read(ReadFilter(process="bench",
                                               entry_type=EntryType.RUN_STARTED))
        assert [(s.seq, s.run_id, s.timestamp) for s in starts] == [
            (i.seq, i.run_id, i.timestamp) for i in intents]
        assert [s.data for s in starts] == [i.data[STARTED] for i in intents]
        accepted = [e.data["event_id"] for e in raw if e.entry_type == EntryType.EVENT_ACCEPTED]
        assert [s.data["event_id"] for s in starts] == accepted
        # the goal the model was given, rendered again from its parts
        goals = [(identity_of(s.data, s.timestamp, s.run_id) or {}).get("goal") for s in starts]
        said = [m["content"] for m in process.conversation.messages() if m["role"] == "user"]
        assert goals == said and all(g.startswith("[Trigger: manual]") for g in goals)
        newest = await journal.read(ReadFilter(process="bench", newest_first=True, limit=1,
                                               entry_type=EntryType.RUN_STARTED))
        assert [s.seq for s in newest] == [starts[-1].seq]
        by_run = await journal.read(ReadFilter(process="bench", run_id=starts[0].run_id,
                                               entry_type=EntryType.RUN_STARTED))
        assert [s.seq for s in by_run] == [starts[0].seq]
        expanded = with_starts(raw)
        assert [e.entry_type for e in expanded if e.run_id == starts[0].run_id] == [
            EntryType.RUN_STARTED, EntryType.TOOL_INTENT, EntryType.TOOL_RESULT,
            EntryType.RUN_FINISHED]
        assert all(STARTED not in e.data for e in expanded
                   if e.entry_type == EntryType.TOOL_INTENT)
        assert summarize(intents[0]).startswith("run started · write book(")
        view = await read_pulse(journal, "bench", raw[-1].timestamp + 1, 3600, 60)
        assert sum(view.runs) == 2 and max(view.p50_ms) > 0  # the run times: start to end
    finally:
        await journal.close()
    offline = read_entries(path, "bench", entry_type=EntryType.RUN_STARTED)  # promptui logs
    assert [(e.seq, e.data) for e in offline] == [(s.seq, s.data) for s in starts]
    assert find_damage(path) == []


def _one_of_each(run: str) -> list[tuple[str, dict[str, object], str]]:
    """A run of the old form (its start its own entry), then one whose intent carries its
    start, then that run's second intent (which carries none) and its end."""
    return [(EntryType.RUN_STARTED, {"event_id": "e0"}, "r0"),
            (EntryType.TOOL_INTENT, {**INTENT, STARTED: {"event_id": "e1", "attempt": 2}}, run),
            (EntryType.TOOL_INTENT, {**INTENT, "step": 3, "args": {STARTED: {"x": 1}}}, run),
            (EntryType.RUN_FINISHED, {"event_id": "e1", "state": "succeeded"}, run)]


async def _reads_starts(journal: JournalProvider) -> None:
    for kind, data, run in _one_of_each("r1"):
        await journal.append(JournalEntry("p", kind, data, run_id=run))
    starts = await journal.read(ReadFilter(process="p", entry_type=EntryType.RUN_STARTED))
    assert [(s.seq, s.run_id, s.data) for s in starts] == [
        (1, "r0", {"event_id": "e0"}), (2, "r1", {"event_id": "e1", "attempt": 2})]
    last = await journal.read(ReadFilter(process="p", entry_type=EntryType.RUN_STARTED,
                                         newest_first=True, limit=1))
    assert [s.seq for s in last] == [2]
    intents = await journal.read(ReadFilter(process="p", entry_type=EntryType.TOOL_INTENT))
    assert [i.seq for i in intents] == [2, 3]  # a read of intents gives them as written
    runs = await journal.open_runs("p")
    assert sorted((r.run_id, r.event_id, r.attempt) for r in runs) == [
        ("r0", "e0", 1)]  # r1 ended; r0 is still open


async def test_the_memory_journal_reads_carried_starts() -> None:
    await _reads_starts(InMemoryJournal())


async def test_the_sqlite_journal_reads_carried_starts(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "journal.db")
    await journal.open()
    try:
        await _reads_starts(journal)
    finally:
        await journal.close()


@pytest.mark.slow
async def test_postgres_reads_carried_starts(pg_dsn: str) -> None:
    journal = PostgresJournal(pg_dsn)
    await journal.open()
    try:
        await _reads_starts(journal)
    finally:
        await journal.close()
    reader = PostgresReader(pg_dsn)  # the command line's (promptui logs --type run_started)
    assert [e.seq for e in reader.read_entries(
        "p", entry_type=EntryType.RUN_STARTED, newest_first=True, limit=1)] == [2]


async def test_a_start_stays_its_own_entry_when_the_turns_before_it_are_not_carried() -> None:
    """A turn an intent cannot carry exactly (here one that said it asked for no calls) is
    written as its own entry; the start then goes before it, as its own entry too."""
    journal = InMemoryJournal()
    recorder = ProcessRecorder(journal, "p", "pid-1", "checkpoint")
    recorder.run_started("r1", "e1", 1, {"goal": "do it"})
    recorder.sampling_turn("r1", 1, 0, ModelTurn(reply="", tool_calls=(), usage=Usage()),
                           "server", "tool", [])
    await recorder.tool_intent("r1", 2, ToolCall("book", {"ref": "r1"}, "c0"), "write")
    assert [e.entry_type for e in await journal.read("p")] == [
        EntryType.RUN_STARTED, EntryType.MODEL_USAGE, EntryType.TOOL_INTENT]


async def test_a_run_cut_short_in_its_write_is_open_checked_salvaged_and_parked(
        tmp_path: Path) -> None:
    """A stop that keeps the queue cuts a run short inside its write: its only entry is the
    intent carrying its start. The open runs index has it at that entry, the file's checks
    find nothing wrong, a salvage keeps it open, and the next start parks it for an operator
    (its write's outcome is unknown) with the goal it was given."""
    path = tmp_path / "journal.db"
    entered = asyncio.Event()

    async def book(ref: str, ctx: ToolContext) -> str:
        """A write that never returns before the stop."""
        entered.set()
        await asyncio.sleep(60)
        return "booked " + ref

    def process() -> AgentProcess:
        return AgentProcess("books", ProcessConfig(
            model={"provider": "scripted", "turns": [
                {"tool_calls": [{"name": "book", "args": {"ref": "inv-1"}}]},
                {"reply": "booked"}]},
            journal={"path": str(path)}), tools=[tool(book, effect="write")])

    first = process()
    await first.start()
    await first.inject(TriggerEvent("t", "manual", {"ref": "inv-1"}))
    await asyncio.wait_for(entered.wait(), 10)
    await first.shutdown(0)
    [(run_id, started_seq)] = _rows(path, "SELECT run_id, started_seq FROM open_runs")
    [(seq, kind)] = _rows(path, f"SELECT seq, entry_type FROM entries WHERE run_id = "
                                f"'{run_id}'")
    assert (seq, kind) == (started_seq, EntryType.TOOL_INTENT)
    assert find_damage(path) == []
    report = salvage(path, tmp_path / "salvaged.db")
    assert report.verify_problems == []
    assert _rows(tmp_path / "salvaged.db", "SELECT run_id, started_seq FROM open_runs") == [
        (run_id, started_seq)]
    second = process()
    await second.start()
    try:
        await wait_for(lambda: len(second.waiting_runs()) == 1, 10, "the run to be parked")
        [run] = second.waiting_runs()
        assert run.run_id == run_id and run.identity is not None
        assert run.identity.goal.startswith("[Trigger: manual]")
        assert run.identity.goal.endswith('\n{"ref": "inv-1"}\n</untrusted-' +
                                          run.identity.goal.split("<untrusted-")[1][:8] + ">")
    finally:
        await second.stop()
