"""Schema 7: a run's model turns ride in its next tool intent or its end instead of an entry
each (journal.left_out), and every reader gets them back exactly: the turns themselves, a read
of ``model_usage`` entries (any backend, either order, with a limit), recovery of a run a
crash left open, the timeline's lines and the tokens Pulse adds up."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime_core.control.pulse_reads import read_pulse
from runtime_core.journal import InMemoryJournal, PostgresJournal, SQLiteJournal
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.inspect import read_entries
from runtime_core.journal.left_out import USAGE, carry_turns, turns_of, with_turns
from runtime_core.journal.postgres.reader import PostgresReader
from runtime_core.journal.provider import JournalProvider, ReadFilter
from runtime_core.journal.replay import rebuild_run
from runtime_core.journal.summary import summarize
from tests.helpers.durable_runs import run_workload

INTENT = {"step": 2, "tool": "book", "call_id": "c0", "effect": "write", "args": {"ref": "r1"}}
CALL = {"name": "book", "args": {"ref": "r1"}, "call_id": "c0"}
CALLS = st.lists(st.fixed_dictionaries({
    "name": st.sampled_from(["book", "look"]), "args": st.dictionaries(
        st.sampled_from(["ref", "n"]), st.integers() | st.text(max_size=3), max_size=2),
    "call_id": st.sampled_from(["c0", "c1"])}), max_size=2)
TURN = st.fixed_dictionaries({"step": st.integers(0, 9), "turn": st.integers(0, 9)}, optional={
    "output_tokens": st.integers(1, 99), "input_tokens": st.integers(1, 99),
    "reply": st.text(max_size=5), "tool_calls": CALLS | st.just([CALL])})


@given(turns=st.lists(TURN, min_size=1, max_size=3))
def test_turns_an_intent_carries_come_back_exactly_or_are_not_carried(
        turns: list[dict[str, Any]]) -> None:
    carried = carry_turns(turns, INTENT)
    if carried is None:  # e.g. a last turn that said "no calls" as an empty list
        assert turns[-1].get("tool_calls") == []
        return
    assert turns_of(EntryType.TOOL_INTENT, {**INTENT, USAGE: carried}) == turns
    if turns[-1].get("tool_calls") == [CALL]:  # the intent's own call is left out
        assert "tool_calls" not in carried[-1]


def test_an_intent_leaves_out_the_step_before_it_and_a_first_turn() -> None:
    first = {"step": 1, "turn": 0, "output_tokens": 6, "tool_calls": [CALL]}
    assert carry_turns([first], INTENT) == [{"output_tokens": 6}]  # step 2 - 1, turn 0
    later = {"step": 5, "turn": 3, "tool_calls": [CALL]}
    assert carry_turns([later], INTENT) == [{"step": 5, "turn": 3}]  # not derivable: kept
    both = [{"step": 0, "turn": 0, "reply": "hm"}, {"step": 1, "turn": 1, "tool_calls": [CALL]}]
    assert carry_turns(both, INTENT) == [{"step": 0, "reply": "hm"}, {"turn": 1}]
    assert turns_of(EntryType.TOOL_INTENT, {**INTENT, USAGE: carry_turns(both, INTENT)}) == both


def _entries(path: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT entry_type, data FROM entries WHERE run_id IS NOT NULL "
                            "ORDER BY seq").fetchall()


async def test_a_tool_run_writes_its_turns_in_its_intent_and_its_end(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await run_workload(path, 2)
    kinds = [kind for kind, _ in _entries(path)]
    # the start rides in the first intent too (SQLite schema 9: test_carried_starts.py)
    assert kinds == [EntryType.TOOL_INTENT, EntryType.TOOL_RESULT, EntryType.RUN_FINISHED] * 2
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        usage = await journal.read(ReadFilter(process="bench",
                                              entry_type=EntryType.MODEL_USAGE))
        carriers = {e.seq: e for e in await journal.read("bench")
                    if e.entry_type in (EntryType.TOOL_INTENT, EntryType.RUN_FINISHED)}
        assert [u.data["turn"] for u in usage] == [0, 1, 0, 1]
        assert [carriers[u.seq].entry_type for u in usage] == [
            EntryType.TOOL_INTENT, EntryType.RUN_FINISHED] * 2
        first = usage[0].data
        assert first["tool_calls"] == [{"name": "book", "args": {"ref": "inv-0"},
                                        "call_id": carriers[usage[0].seq].data["call_id"]}]
        assert all(u.run_id == carriers[u.seq].run_id for u in usage)
        newest = await journal.read(ReadFilter(process="bench", newest_first=True, limit=3,
                                               entry_type=EntryType.MODEL_USAGE))
        assert [(u.seq, u.data["turn"]) for u in newest] == [
            (u.seq, u.data["turn"]) for u in reversed(usage)][:3]
        offline = read_entries(path, "bench", entry_type=EntryType.MODEL_USAGE, limit=3)
        assert [(e.seq, e.data) for e in offline] == [(u.seq, u.data) for u in usage[:3]]
        intent = carriers[usage[0].seq]
        assert summarize(intent).endswith("(model turn 0)")
        assert "(1 model turn(s))" in summarize(carriers[usage[1].seq])
    finally:
        await journal.close()


TURN_0 = {"step": 1, "turn": 0, "output_tokens": 6}
TURN_1 = {"step": 3, "turn": 1}


async def _one_run(journal: JournalProvider) -> None:
    """A run whose intent carries its first model turn (the call left out) and whose end
    carries the second, with a sampling turn of its own entry between; then another run's
    intent that carries none, though its arguments hold a list ``usage`` (seq 6: a read of the
    newest turns with a limit must not count it)."""
    sampling = {"step": 2, "turn": 0, "tool_calls": [], "sampling": {"server": "s"}}
    for kind, data, run in ((EntryType.RUN_STARTED, {"event_id": "e1"}, "r1"),
                            (EntryType.TOOL_INTENT, {**INTENT, USAGE: [TURN_0]}, "r1"),
                            (EntryType.MODEL_USAGE, sampling, "r1"),
                            (EntryType.RUN_FINISHED, {"event_id": "e1", "state": "succeeded",
                                                      "event_done": True, USAGE: [TURN_1]},
                             "r1"),
                            (EntryType.RUN_STARTED, {"event_id": "e2"}, "r2"),
                            (EntryType.TOOL_INTENT, {**INTENT, "args": {USAGE: [1, 2]}},
                             "r2")):
        await journal.append(JournalEntry("p", kind, data, run_id=run))


async def _reads_turns(journal: JournalProvider) -> None:
    usage = await journal.read(ReadFilter(process="p", entry_type=EntryType.MODEL_USAGE))
    assert [(u.seq, u.data.get("turn"), "sampling" in u.data) for u in usage] == [
        (2, 0, False), (3, 0, True), (4, 1, False)]
    assert usage[0].data == {**TURN_0, "tool_calls": [CALL]} and usage[2].data == TURN_1
    last = await journal.read(ReadFilter(process="p", entry_type=EntryType.MODEL_USAGE,
                                         newest_first=True, limit=2))
    assert [u.seq for u in last] == [4, 3]


async def test_the_memory_journal_reads_carried_turns_the_same_way() -> None:
    journal = InMemoryJournal()
    await _one_run(journal)
    await _reads_turns(journal)


async def _opened_one_run_read(journal: SQLiteJournal | PostgresJournal) -> None:
    await journal.open()
    try:
        await _one_run(journal)
        await _reads_turns(journal)
    finally:
        await journal.close()


async def test_the_sqlite_journal_reads_carried_turns_the_same_way(tmp_path: Path) -> None:
    await _opened_one_run_read(SQLiteJournal(tmp_path / "journal.db"))
    assert [(e.seq, e.data.get("turn")) for e in read_entries(  # promptui logs's read
        tmp_path / "journal.db", "p", entry_type=EntryType.MODEL_USAGE, newest_first=True,
        limit=2)] == [(4, 1), (3, 0)]


@pytest.mark.slow
async def test_postgres_reads_carried_turns_the_same_way(pg_dsn: str) -> None:
    await _opened_one_run_read(PostgresJournal(pg_dsn))
    reader = PostgresReader(pg_dsn)  # the command line's (promptui logs --type model_usage)
    assert [(e.seq, e.data.get("turn")) for e in reader.read_entries(
        "p", entry_type=EntryType.MODEL_USAGE, newest_first=True, limit=2)] == [(4, 1), (3, 0)]


def test_recovery_rebuilds_a_run_from_the_turns_its_intent_carries() -> None:
    started = JournalEntry("p", EntryType.RUN_STARTED, {"event_id": "e1"}, run_id="r1", seq=1)
    turn = {"step": 1, "turn": 0, "tool_calls": [CALL]}
    carried = carry_turns([turn], INTENT)
    assert carried is not None
    lean = [started, JournalEntry("p", EntryType.TOOL_INTENT, {**INTENT, USAGE: carried},
                                  run_id="r1", seq=2)]
    old = [started, JournalEntry("p", EntryType.MODEL_USAGE, turn, run_id="r1", seq=2),
           JournalEntry("p", EntryType.TOOL_INTENT, INTENT, run_id="r1", seq=3)]
    assert [e.entry_type for e in with_turns(lean)] == [e.entry_type for e in old]
    rebuilt, before = rebuild_run(lean), rebuild_run(old)
    assert rebuilt.unknown is not None and before.unknown is not None  # the write is open
    assert rebuilt.unknown.idempotency_key == before.unknown.idempotency_key == "r1:2"
    assert rebuilt.history == before.history and rebuilt.model_calls == 1


@pytest.mark.parametrize("backend", ["sqlite", "memory"])
async def test_pulse_adds_up_the_tokens_of_carried_turns(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "j.db"
    process = await run_workload(path, 3)
    journal: JournalProvider
    if backend == "sqlite":
        journal = SQLiteJournal(path)
        await journal.open()
    else:  # the same entries in a journal without the grouped SQL read
        journal = InMemoryJournal()
        source = SQLiteJournal(path)
        await source.open()
        try:
            for entry in await source.read("bench"):
                if entry.run_id is None:  # the runs are what Pulse reads
                    continue
                await journal.append(JournalEntry("bench", entry.entry_type, entry.data,
                                                  run_id=entry.run_id,
                                                  timestamp=entry.timestamp))
        finally:
            await source.close()
    try:
        usage = await journal.read(ReadFilter(process="bench",
                                              entry_type=EntryType.MODEL_USAGE))
        tokens = sum(int(u.data.get("output_tokens", 0)) + int(u.data.get("input_tokens", 0))
                     for u in usage)
        assert len(usage) == 6 and tokens > 0
        now = max(u.timestamp for u in usage) + 1
        view = await read_pulse(journal, "bench", now, 3600, 60)
        assert sum(view.tokens) == tokens and sum(view.runs) == 3
    finally:
        await journal.close()
    assert process.invocation_count == 3
