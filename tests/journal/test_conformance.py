"""One suite that every journal backend must pass, plus the SQLite backend's own guarantees.

The ``journal`` fixture yields an opened InMemoryJournal, SQLiteJournal or PostgresJournal (on
a fresh schema of the worker's throwaway PostgreSQL, tests/helpers/postgres.py); the tests only use
the JournalProvider protocol unless they are explicitly about SQLite (durability on disk, WAL,
reopening, damage handling, corruption, group commit). PostgreSQL's own guarantees are in
test_postgres_journal.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runtime_core.journal import (
    DamagedJournal,
    EntryType,
    InMemoryJournal,
    JournalEntry,
    JournalError,
    JournalProvider,
    OpenRun,
    PostgresJournal,
    ReadFilter,
    SQLiteJournal,
)

T0 = 1_700_000_000.0


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
async def journal(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    j: Any
    if request.param == "memory":
        j = InMemoryJournal()
    elif request.param == "sqlite":
        j = SQLiteJournal(tmp_path / "j.db")
    else:  # pg_dsn only now: memory and sqlite never wait for (or skip on) a PostgreSQL
        j = PostgresJournal(request.getfixturevalue("pg_dsn"))
    await j.open()
    try:
        yield j
    finally:
        await j.close()


# -- helpers ------------------------------------------------------------------------------------
def E(process: str, entry_type: str = "note", data: dict[str, Any] | None = None,
      run_id: str | None = None, **kw: Any) -> JournalEntry:
    return JournalEntry(process=process, entry_type=entry_type, data=data or {}, run_id=run_id,
                        **kw)


def on_disk(path: Path) -> list[tuple[str, int, str]]:
    """What a brand-new connection to the file sees: (process, seq, entry_type) in commit order."""
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT process, seq, entry_type FROM entries ORDER BY id").fetchall()
    return [(r[0], int(r[1]), r[2]) for r in rows]


def in_postgres(dsn: str) -> list[tuple[str, int, str]]:
    """What a brand-new connection to the database sees, in commit order."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT process, seq, entry_type FROM entries ORDER BY id").fetchall()
    return [(r[0], int(r[1]), r[2]) for r in rows]


async def visible(j: Any) -> list[tuple[str, int, str]]:
    """Entries that are durable: on disk for SQLite and in PostgreSQL (a fresh connection),
    the log for memory."""
    if isinstance(j, SQLiteJournal):
        return on_disk(j.path)
    if isinstance(j, PostgresJournal):
        return await asyncio.to_thread(in_postgres, j._dsn)
    return [(e.process, e.seq, e.entry_type) for e in await j.read(ReadFilter())]


def keys(entries: list[JournalEntry]) -> list[tuple[str, int]]:
    return [(e.process, e.seq) for e in entries]


async def accept(j: Any, process: str, event_id: str, **payload: Any) -> dict[str, Any]:
    event = {"event_id": event_id, "payload": payload}
    await j.append(E(process, EntryType.EVENT_ACCEPTED, {"event_id": event_id}),
                   attachment=event)
    return event


async def dead_letter(j: Any, process: str, event: dict[str, Any], *, reason: str = "failed",
                      error: str = "boom", attempts: int = 3, keep: int | None = None
                      ) -> JournalEntry:
    data: dict[str, Any] = {"event_id": event["event_id"], "reason": reason, "error": error,
                            "attempts": attempts}
    if keep is not None:
        data["keep"] = keep
    return await j.append(E(process, EntryType.DEAD_LETTERED, data), attachment=event)


async def pending_ids(j: Any, process: str = "p") -> list[str]:
    return [e["event_id"] for e in await j.pending_events(process)]


async def dead_ids(j: Any, process: str = "p") -> list[str]:
    return [d.event["event_id"] for d in await j.dead_letters(process)]


# -- the protocol ---------------------------------------------------------------------------------
async def test_backends_implement_the_protocol(journal: Any) -> None:
    assert isinstance(journal, JournalProvider)


# -- appending ----------------------------------------------------------------------------------
async def test_seq_is_assigned_per_process_independently(journal: Any) -> None:
    seqs = []
    for process in ["a", "a", "b", "a", "c", "b", "a"]:
        entry = E(process)
        returned = await journal.append(entry)
        assert returned is entry
        seqs.append((process, entry.seq))
    assert seqs == [("a", 1), ("a", 2), ("b", 1), ("a", 3), ("c", 1), ("b", 2), ("a", 4)]
    for process, count in [("a", 4), ("b", 2), ("c", 1)]:
        got = await journal.read(ReadFilter(process=process))
        assert [e.seq for e in got] == list(range(1, count + 1))


async def test_append_returns_only_when_durable(journal: Any) -> None:
    expected = []
    for i, process in enumerate(["a", "b", "a", "a", "b"]):
        entry = await journal.append(E(process, f"t{i}"))
        expected.append((process, entry.seq, f"t{i}"))
        # a brand-new connection (for SQLite) sees the row as soon as append has returned
        assert await visible(journal) == expected


async def test_read_round_trips_every_field(journal: Any) -> None:
    entry = E("p", "tool_result", {"nested": {"list": [1, 2.5, "x", None, True]}, "u": "é✓"},
              run_id="run-1", process_id="pid-7", timestamp=T0 + 0.125)
    await journal.append(entry)
    [got] = await journal.read(ReadFilter())
    assert got.to_dict() == entry.to_dict()
    assert got is not entry


async def test_a_lone_surrogate_is_kept_and_the_journal_goes_on(journal: Any) -> None:
    # JSON "\ud800" (a webhook can send it) has no UTF-8 form; it must neither fail the write
    # nor the journal, and must read back as it came.
    odd = E("p", "tool_result", {"payload": {"text": "a\ud800b", "\udfff": 1}})
    await journal.append(odd)
    await journal.append(E("p", "after"))
    got = await journal.read(ReadFilter())
    assert [e.to_dict() for e in got[:1]] == [odd.to_dict()]
    assert [e.entry_type for e in got] == ["tool_result", "after"]


async def test_submit_returns_a_future_and_commits_in_submission_order(journal: Any) -> None:
    order = ["a", "b", "a", "c", "a", "b", "a", "a"]
    done: list[int] = []
    futures = []
    entries = []
    for i, process in enumerate(order):
        entry = E(process, f"t{i}")
        future = journal.submit(entry)
        assert isinstance(future, asyncio.Future)
        assert entry.seq > 0  # the seq is assigned at submission
        future.add_done_callback(lambda _f, i=i: done.append(i))
        futures.append(future)
        entries.append(entry)
    assert [e.seq for e in entries] == [1, 1, 2, 1, 3, 2, 4, 5]
    await futures[-1]
    # entries commit in submission order: the last one being durable covers all earlier ones
    assert all(f.done() for f in futures)
    for f in futures:
        assert f.result() is None
    assert await visible(journal) == [(e.process, e.seq, e.entry_type) for e in entries]
    await asyncio.sleep(0)  # let the done callbacks run
    assert done == list(range(len(order)))


async def test_a_durable_append_covers_earlier_submissions(journal: Any) -> None:
    futures = [journal.submit(E("p", f"s{i}")) for i in range(5)]
    last = await journal.append(E("p", "last"))
    assert last.seq == 6
    assert all(f.done() for f in futures)
    assert await visible(journal) == [("p", i + 1, f"s{i}") for i in range(5)] + [
        ("p", 6, "last")]


async def test_flush_waits_for_everything_submitted(journal: Any) -> None:
    await journal.flush()  # nothing pending: returns at once
    futures = [journal.submit(E(f"p{i % 3}", "note", {"i": i})) for i in range(30)]
    await journal.flush()
    assert all(f.done() and f.exception() is None for f in futures)
    assert len(await visible(journal)) == 30
    got = await journal.read(ReadFilter())
    assert [e.data["i"] for e in got] == list(range(30))
    await journal.flush()


async def test_a_read_sees_what_was_submitted_before_it(journal: Any) -> None:
    """Read-your-writes: the runtime shows a dead letter (or a state) as soon as it submits its
    entry, so a read right after must see it, committed or not yet."""
    futures = [journal.submit(E("p", "note", {"i": i})) for i in range(20)]
    got = await journal.read(ReadFilter(process="p"))
    assert [e.data["i"] for e in got] == list(range(20))
    assert all(f.done() for f in futures)
    assert await journal.processes() == ["p"]


async def test_processes_lists_every_name(journal: Any) -> None:
    assert await journal.processes() == []
    for process in ["zeta", "alpha", "mid", "alpha"]:
        await journal.append(E(process))
    assert await journal.processes() == ["alpha", "mid", "zeta"]


# -- reading ------------------------------------------------------------------------------------
# (process, entry_type, run_id); timestamps are T0 + index
LOG_SPEC = [
    ("a", "note", None),
    ("b", "note", None),
    ("a", "tool_intent", "r1"),
    ("a", "tool_result", "r1"),
    ("b", "tool_intent", "r2"),
    ("a", "checkpoint", None),
    ("b", "tool_result", "r2"),
    ("a", "tool_intent", "r3"),
    ("b", "checkpoint", None),
    ("a", "tool_result", "r3"),
    ("b", "note", "r1"),
    ("a", "note", None),
]


async def populate(j: Any) -> list[JournalEntry]:
    entries = []
    for i, (process, entry_type, run_id) in enumerate(LOG_SPEC):
        entries.append(await j.append(E(process, entry_type, {"i": i}, run_id=run_id,
                                        timestamp=T0 + i)))
    return entries


def reference(entries: list[JournalEntry], f: ReadFilter) -> list[tuple[str, int]]:
    out = [
        e for e in entries
        if (f.process is None or e.process == f.process)
        and (f.entry_type is None or e.entry_type == f.entry_type)
        and (f.run_id is None or e.run_id == f.run_id)
        and (f.since_seq is None or e.seq > f.since_seq)
        and (f.since_time is None or e.timestamp >= f.since_time)
    ]
    if f.newest_first:
        out.reverse()
    if f.limit is not None:
        out = out[: f.limit]
    return keys(out)


FILTERS = {
    "all": ReadFilter(),
    "process": ReadFilter(process="a"),
    "unknown-process": ReadFilter(process="nobody"),
    "entry_type": ReadFilter(entry_type="tool_intent"),
    "run_id": ReadFilter(run_id="r1"),
    "since_seq": ReadFilter(process="a", since_seq=3),
    "since_seq-all-processes": ReadFilter(since_seq=4),
    "since_seq-past-end": ReadFilter(process="a", since_seq=99),
    "since_time": ReadFilter(since_time=T0 + 7),
    "since_time-inclusive": ReadFilter(since_time=T0 + 11),
    "limit": ReadFilter(limit=4),
    "limit-zero": ReadFilter(limit=0),
    "newest_first": ReadFilter(newest_first=True),
    "newest_first-limit": ReadFilter(newest_first=True, limit=3),
    "process-newest_first-limit": ReadFilter(process="b", newest_first=True, limit=2),
    "process-entry_type": ReadFilter(process="a", entry_type="tool_result"),
    "process-run_id": ReadFilter(process="b", run_id="r1"),
    "entry_type-run_id": ReadFilter(entry_type="tool_intent", run_id="r3"),
    "process-since_seq-limit": ReadFilter(process="a", since_seq=2, limit=2),
    "process-since_seq-newest_first-limit": ReadFilter(process="a", since_seq=2,
                                                       newest_first=True, limit=2),
    "since_time-entry_type": ReadFilter(since_time=T0 + 3, entry_type="note"),
    "everything": ReadFilter(process="a", entry_type="tool_result", run_id="r3", since_seq=1,
                             since_time=T0 + 1, limit=5, newest_first=True),
    "no-match": ReadFilter(process="a", run_id="r2"),
}


@pytest.mark.parametrize("name", list(FILTERS))
async def test_read_filters(journal: Any, name: str) -> None:
    entries = await populate(journal)
    f = FILTERS[name]
    got = await journal.read(f)
    assert keys(got) == reference(entries, f)
    for e in got:  # every field comes back, not only the keys
        assert e.to_dict() == entries[e.data["i"]].to_dict()


async def test_read_filters_spot_checks(journal: Any) -> None:
    """A few expectations written out by hand, so the reference above is not the only oracle."""
    await populate(journal)

    async def read(**kw: Any) -> list[tuple[str, int]]:
        return keys(await journal.read(ReadFilter(**kw)))

    assert await read(process="b") == [("b", 1), ("b", 2), ("b", 3), ("b", 4), ("b", 5)]
    assert await read(entry_type="checkpoint") == [("a", 4), ("b", 4)]
    assert await read(run_id="r1") == [("a", 2), ("a", 3), ("b", 5)]
    assert await read(process="a", since_seq=5) == [("a", 6), ("a", 7)]
    assert await read(since_time=T0 + 9) == [("a", 6), ("b", 5), ("a", 7)]
    assert await read(limit=2) == [("a", 1), ("b", 1)]
    assert await read(newest_first=True, limit=2) == [("a", 7), ("b", 5)]
    assert await read(process="a", newest_first=True, since_seq=4, limit=2) == [("a", 7),
                                                                                ("a", 6)]


async def test_last_checkpoint_is_the_newest_checkpoint_of_that_process(journal: Any) -> None:
    assert await journal.last_checkpoint("p") is None
    await journal.append(E("p", "note"))
    assert await journal.last_checkpoint("p") is None
    first = await journal.append(E("p", EntryType.CHECKPOINT, {"n": 1}))
    assert (await journal.last_checkpoint("p")).to_dict() == first.to_dict()
    second = await journal.append(E("p", EntryType.CHECKPOINT, {"n": 2}, timestamp=T0))
    await journal.append(E("p", "note"))
    await journal.append(E("q", EntryType.CHECKPOINT, {"n": 3}))  # another process
    got = await journal.last_checkpoint("p")
    assert got is not None
    assert got.to_dict() == second.to_dict()  # newest by seq, even with an older timestamp
    assert (await journal.last_checkpoint("q")).data == {"n": 3}
    assert await journal.last_checkpoint("nobody") is None


# -- the pending-events index ---------------------------------------------------------------------
async def test_accepted_events_are_pending_in_acceptance_order(journal: Any) -> None:
    assert await journal.pending_events("p") == []
    events = [await accept(journal, "p", f"e{i}", n=i) for i in (3, 1, 2)]
    await accept(journal, "q", "other")
    assert await journal.pending_events("p") == events
    assert await pending_ids(journal, "q") == ["other"]
    # the attachment is in the index, not in the log
    [entry] = await journal.read(ReadFilter(process="p", limit=1))
    assert entry.data == {"event_id": "e3"}


async def test_run_finished_with_event_done_removes_the_pending_event(journal: Any) -> None:
    for i in range(3):
        await accept(journal, "p", f"e{i}")
    await journal.append(E("p", EntryType.RUN_FINISHED, {"event_id": "e1"}, run_id="r"))
    assert await pending_ids(journal) == ["e0", "e1", "e2"]
    await journal.append(E("p", EntryType.RUN_FINISHED,
                           {"event_id": "e1", "event_done": False}, run_id="r"))
    assert await pending_ids(journal) == ["e0", "e1", "e2"]
    await journal.append(E("p", EntryType.RUN_FINISHED,
                           {"event_id": "e1", "event_done": True}, run_id="r"))
    assert await pending_ids(journal) == ["e0", "e2"]
    # finishing an event of another process does not touch this one
    await journal.append(E("q", EntryType.RUN_FINISHED,
                           {"event_id": "e0", "event_done": True}, run_id="r"))
    assert await pending_ids(journal) == ["e0", "e2"]
    # finishing an unknown event is harmless
    await journal.append(E("p", EntryType.RUN_FINISHED,
                           {"event_id": "nope", "event_done": True}, run_id="r"))
    assert await pending_ids(journal) == ["e0", "e2"]


# -- dead letters ---------------------------------------------------------------------------------
async def test_dead_lettering_moves_an_event_out_of_pending(journal: Any) -> None:
    e0 = await accept(journal, "p", "e0", x=1)
    await accept(journal, "p", "e1")
    entry = await dead_letter(journal, "p", e0, reason="retries exhausted", error="Boom",
                              attempts=4)
    assert await pending_ids(journal) == ["e1"]
    [letter] = await journal.dead_letters("p")
    assert letter.event == e0
    assert letter.reason == "retries exhausted"
    assert letter.error == "Boom"
    assert letter.attempts == 4
    assert letter.dead_lettered_at == entry.timestamp
    assert await journal.dead_letters("q") == []


async def test_dead_letters_keep_the_newest_n(journal: Any) -> None:
    events = [{"event_id": f"d{i}"} for i in range(5)]
    for event in events[:4]:
        await dead_letter(journal, "p", event)
    assert await dead_ids(journal) == ["d0", "d1", "d2", "d3"]
    await dead_letter(journal, "p", events[4], keep=2)
    assert await dead_ids(journal) == ["d3", "d4"]
    await dead_letter(journal, "p", {"event_id": "d5"}, keep=5)
    assert await dead_ids(journal) == ["d3", "d4", "d5"]
    await dead_letter(journal, "p", {"event_id": "d6"}, keep=1)
    assert await dead_ids(journal) == ["d6"]


async def test_redelivered_moves_dead_letters_back_to_pending(journal: Any) -> None:
    a = await accept(journal, "p", "a")
    b = await accept(journal, "p", "b")
    await accept(journal, "p", "c")
    await dead_letter(journal, "p", a)
    await dead_letter(journal, "p", b)
    assert await pending_ids(journal) == ["c"]
    await journal.append(E("p", EntryType.REDELIVERED, {"event_ids": ["b", "a", "ghost"]}))
    assert await journal.dead_letters("p") == []
    # redelivered events go to the back of the queue, in the order they were named
    assert await pending_ids(journal) == ["c", "b", "a"]
    assert (await journal.pending_events("p"))[1:] == [b, a]


async def test_redelivered_only_touches_named_dead_letters(journal: Any) -> None:
    for i in range(3):
        await dead_letter(journal, "p", {"event_id": f"d{i}"})
    await dead_letter(journal, "q", {"event_id": "d1"})
    await journal.append(E("p", EntryType.REDELIVERED, {"event_ids": ["d1"]}))
    assert await dead_ids(journal) == ["d0", "d2"]
    assert await pending_ids(journal) == ["d1"]
    assert await dead_ids(journal, "q") == ["d1"]
    assert await pending_ids(journal, "q") == []


async def test_dead_letters_cleared(journal: Any) -> None:
    for i in range(4):
        await dead_letter(journal, "p", {"event_id": f"d{i}"})
    await dead_letter(journal, "q", {"event_id": "q0"})
    await journal.append(E("p", EntryType.DEAD_LETTERS_CLEARED, {"event_ids": ["d1", "d3", "x"]}))
    assert await dead_ids(journal) == ["d0", "d2"]
    await journal.append(E("p", EntryType.DEAD_LETTERS_CLEARED, {}))
    assert await journal.dead_letters("p") == []
    assert await dead_ids(journal, "q") == ["q0"]  # other processes keep theirs
    assert await journal.pending_events("p") == []  # clearing does not redeliver


# -- open runs ------------------------------------------------------------------------------------
async def test_open_runs_follow_the_run_lifecycle(journal: Any) -> None:
    assert await journal.open_runs("p") == []
    s1 = await journal.append(E("p", EntryType.RUN_STARTED, {"event_id": "e1", "attempt": 2},
                                run_id="r1"))
    s2 = await journal.append(E("p", EntryType.RUN_STARTED, {"event_id": "e2"}, run_id="r2"))
    assert await journal.open_runs("p") == [
        OpenRun("r1", "e1", 2, "running", s1.seq),
        OpenRun("r2", "e2", 1, "running", s2.seq),  # attempt defaults to 1
    ]
    await journal.append(E("p", EntryType.RUN_WAITING, {}, run_id="r1"))
    assert [(r.run_id, r.state) for r in await journal.open_runs("p")] == [
        ("r1", "waiting"), ("r2", "running")]
    await journal.append(E("p", EntryType.RECONCILED, {}, run_id="r1"))
    assert [(r.run_id, r.state) for r in await journal.open_runs("p")] == [
        ("r1", "running"), ("r2", "running")]
    await journal.append(E("p", EntryType.RUN_WAITING, {}, run_id="r2"))
    await journal.append(E("p", EntryType.RUN_FINISHED, {"event_id": "e1"}, run_id="r1"))
    assert await journal.open_runs("p") == [OpenRun("r2", "e2", 1, "waiting", s2.seq)]
    await journal.append(E("p", EntryType.RUN_FINISHED,
                           {"event_id": "e2", "event_done": True}, run_id="r2"))
    assert await journal.open_runs("p") == []


async def test_open_runs_are_per_process_and_ignore_unknown_runs(journal: Any) -> None:
    await journal.append(E("p", EntryType.RUN_STARTED, {"event_id": "e"}, run_id="r"))
    await journal.append(E("q", EntryType.RUN_WAITING, {}, run_id="r"))
    await journal.append(E("q", EntryType.RUN_FINISHED, {"event_id": "e"}, run_id="r"))
    await journal.append(E("p", EntryType.RUN_WAITING, {}, run_id="ghost"))
    await journal.append(E("p", EntryType.RECONCILED, {}, run_id="ghost"))
    assert await journal.open_runs("p") == [OpenRun("r", "e", 1, "running", 1)]
    assert await journal.open_runs("q") == []


# -- bad input ----------------------------------------------------------------------------------
def serialisation_errors(j: Any) -> tuple[type[BaseException], ...]:
    """SQLite and PostgreSQL must raise JournalError; the memory journal may also raise json's
    own errors."""
    if isinstance(j, SQLiteJournal | PostgresJournal):
        return (JournalError,)
    return (JournalError, TypeError, ValueError)


NOT_JSON = {
    "object": {"x": object()},
    "set": {"x": {1, 2}},
    "bytes": {"x": b"raw"},
    "non-str-key": {("a", "b"): 1},
    "nan": {"x": math.nan},  # SQLite refuses it (allow_nan=False); not valid JSON
}


@pytest.mark.parametrize("what", list(NOT_JSON))
async def test_non_json_data_raises_and_writes_nothing(journal: Any, what: str) -> None:
    await journal.append(E("p", "note"))
    errors = serialisation_errors(journal)
    with pytest.raises(errors):
        await journal.append(E("p", "note", NOT_JSON[what]))
    with pytest.raises(errors):
        await journal.append(E("q", "note", NOT_JSON[what]))
    assert keys(await journal.read(ReadFilter())) == [("p", 1)]
    assert await journal.processes() == ["p"]
    assert (await journal.append(E("p", "note"))).seq == 2  # no seq was used up


async def test_non_json_attachment_raises_and_writes_nothing(journal: Any) -> None:
    errors = serialisation_errors(journal)
    with pytest.raises(errors):
        await journal.append(E("p", EntryType.EVENT_ACCEPTED, {"event_id": "e"}),
                             attachment={"event_id": "e", "bad": object()})
    assert await journal.read(ReadFilter()) == []
    assert await journal.pending_events("p") == []
    assert await journal.processes() == []
    assert (await journal.append(E("p", "note"))).seq == 1


# -- what both backends should agree on (found while writing this suite) ---------------------------
async def test_the_log_is_a_snapshot_taken_at_append(journal: Any) -> None:
    entry = E("p", "note", {"n": 1, "inner": {"k": "v"}})
    await journal.append(entry)
    entry.data["n"] = 2
    entry.data["inner"]["k"] = "changed"
    [stored] = await journal.read(ReadFilter())
    assert stored.data == {"n": 1, "inner": {"k": "v"}}


async def test_index_reads_return_copies(journal: Any) -> None:
    await accept(journal, "p", "e")
    await dead_letter(journal, "p", {"event_id": "d", "payload": {"n": 1}})
    (await journal.pending_events("p"))[0]["payload"]["mutated"] = True
    (await journal.dead_letters("p"))[0].event["payload"]["n"] = 99
    assert (await journal.pending_events("p"))[0] == {"event_id": "e", "payload": {}}
    assert (await journal.dead_letters("p"))[0].event == {"event_id": "d", "payload": {"n": 1}}


async def test_append_never_acknowledges_an_entry_it_did_not_write(journal: Any) -> None:
    """An entry for a process named "" must either be refused or be stored; SQLite's flush()
    marker is an entry with process "", so the writer silently drops such entries."""
    try:
        entry = await journal.append(E("", "note"))
    except (JournalError, ValueError):
        return
    assert keys(await journal.read(ReadFilter(process=""))) == [("", entry.seq)]
    assert ("", entry.seq, "note") in await visible(journal)


MALFORMED = {
    # event_accepted needs the event as its attachment
    "accepted-without-attachment": (E("p", EntryType.EVENT_ACCEPTED, {"event_id": "e"}), None),
    # redelivered needs event_ids
    "redelivered-without-event_ids": (E("p", EntryType.REDELIVERED, {}), None),
    # dead_lettered needs event_id
    "dead_lettered-without-event_id": (E("p", EntryType.DEAD_LETTERED, {"reason": "r"}),
                                       {"event_id": "e"}),
    # run_started needs a run_id on the entry
    "run_started-without-run_id": (E("p", EntryType.RUN_STARTED, {"event_id": "e"}), None),
}


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_a_malformed_entry_only_fails_its_own_append(journal: Any, case: str) -> None:
    """A caller's malformed entry is that caller's problem: it must not be half-written, fail
    other callers' entries committed alongside it, or stop the journal accepting later ones."""
    bad, attachment = MALFORMED[case]
    innocent = journal.submit(E("other", "note"))  # queued in the same batch as the bad entry
    try:
        await journal.append(bad, attachment=attachment)
        refused = False
    except Exception:
        refused = True
    await innocent
    assert (await journal.append(E("other", "note"))).seq == 2
    assert ("other", 1, "note") in await visible(journal)
    if refused:
        assert await journal.read(ReadFilter(process="p")) == []


async def test_appending_the_same_entry_twice_does_not_break_the_journal(journal: Any) -> None:
    entry = E("p", "note")
    await journal.append(entry)
    with contextlib.suppress(Exception):
        await journal.append(entry)  # a retry with the same entry_id
    assert (await journal.append(E("q", "note"))).seq == 1


# -- concurrency ----------------------------------------------------------------------------------
async def test_concurrent_producers_get_contiguous_seqs(journal: Any) -> None:
    producers, each, names = 50, 40, 5
    got: dict[int, list[tuple[str, int]]] = {}

    async def produce(i: int) -> None:
        process = f"p{i % names}"
        mine = got.setdefault(i, [])
        for n in range(each):
            entry = await journal.append(E(process, "note", {"producer": i, "n": n}))
            mine.append((process, entry.seq))

    await asyncio.gather(*(produce(i) for i in range(producers)))
    all_seqs = [k for mine in got.values() for k in mine]
    assert len(all_seqs) == producers * each
    assert len(set(all_seqs)) == len(all_seqs)  # distinct
    for p in range(names):
        seqs = sorted(s for process, s in all_seqs if process == f"p{p}")
        assert seqs == list(range(1, producers // names * each + 1))  # contiguous
        stored = await journal.read(ReadFilter(process=f"p{p}"))
        assert [e.seq for e in stored] == seqs
    for mine in got.values():  # each producer's own appends got increasing seqs
        assert [s for _, s in mine] == sorted(s for _, s in mine)
        assert [e for e, _ in mine] == [mine[0][0]] * each
    if isinstance(journal, SQLiteJournal | PostgresJournal):
        assert len(await visible(journal)) == producers * each
        assert journal.committed == producers * each
        # group commit: many appends share one transaction
        assert journal.batches <= producers * each // 10, journal.batches


# -- SQLite only ----------------------------------------------------------------------------------
@pytest.fixture
async def sqlite_journal(tmp_path: Path) -> AsyncIterator[SQLiteJournal]:
    j = SQLiteJournal(tmp_path / "j.db")
    await j.open()
    try:
        yield j
    finally:
        await j.close()


async def test_sqlite_file_is_wal_with_synchronous_full(sqlite_journal: SQLiteJournal) -> None:
    await sqlite_journal.append(E("p"))
    with closing(sqlite3.connect(sqlite_journal.path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # synchronous is per connection: ask the journal's writer connection
    writer = sqlite_journal._writer
    assert writer is not None
    assert writer.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


async def write_everything(j: Any) -> None:
    """A bit of everything: plain entries, checkpoints and every index."""
    for i in range(3):
        await accept(j, "p", f"e{i}", n=i)
    await j.append(E("p", EntryType.RUN_STARTED, {"event_id": "e0", "attempt": 1}, run_id="r0"))
    await j.append(E("p", EntryType.RUN_STARTED, {"event_id": "e1", "attempt": 2}, run_id="r1"))
    await j.append(E("p", EntryType.RUN_WAITING, {}, run_id="r1"))
    await j.append(E("p", EntryType.CHECKPOINT, {"state": "mid"}))
    await dead_letter(j, "p", {"event_id": "e2", "payload": {"n": 2}}, reason="bad")
    await j.append(E("q", "note", {"q": True}, run_id="rq"))


async def snapshot(j: Any) -> dict[str, Any]:
    return {
        "log": [e.to_dict() for e in await j.read(ReadFilter())],
        "processes": await j.processes(),
        "checkpoint": {p: (c.to_dict() if (c := await j.last_checkpoint(p)) else None)
                       for p in ("p", "q")},
        "pending": {p: await j.pending_events(p) for p in ("p", "q")},
        "dead": {p: await j.dead_letters(p) for p in ("p", "q")},
        "runs": {p: await j.open_runs(p) for p in ("p", "q")},
    }


async def test_sqlite_reopen_keeps_everything_and_continues_seq(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    first = SQLiteJournal(path)
    await first.open()
    await write_everything(first)
    before = await snapshot(first)
    await first.close()

    second = SQLiteJournal(path)
    await second.open()
    try:
        assert second.damage is None
        assert await snapshot(second) == before
        assert before["runs"]["p"] != [] and before["pending"]["p"] != []
        assert (await second.append(E("p"))).seq == len(
            [e for e in before["log"] if e["process"] == "p"]) + 1
        assert (await second.append(E("q"))).seq == 2
        assert (await second.append(E("new"))).seq == 1
    finally:
        await second.close()


async def test_sqlite_reopen_after_submit_only_keeps_what_close_drained(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    first = SQLiteJournal(path)
    await first.open()
    futures = [first.submit(E("p", "note", {"i": i})) for i in range(20)]
    await first.close()  # close drains the queue
    assert all(f.done() and f.exception() is None for f in futures)
    second = SQLiteJournal(path)
    await second.open()
    try:
        assert [e.data["i"] for e in await second.read(ReadFilter())] == list(range(20))
        assert (await second.append(E("p"))).seq == 21
    finally:
        await second.close()


async def test_sqlite_refuses_appends_after_close(sqlite_journal: SQLiteJournal) -> None:
    await sqlite_journal.close()
    with pytest.raises(JournalError):
        sqlite_journal.submit(E("p"))
    with pytest.raises(JournalError):
        await sqlite_journal.append(E("p"))


async def test_sqlite_open_is_idempotent_and_the_same_object_reopens(tmp_path: Path) -> None:
    j = SQLiteJournal(tmp_path / "j.db")
    await j.open()
    try:
        await j.append(E("p"))
        await j.open()  # already open: nothing happens
        assert (await j.append(E("p"))).seq == 2
        await j.close()
        await j.close()  # closing twice is harmless
        await j.open()  # reopen after close
        assert [e.seq for e in await j.read(ReadFilter(process="p"))] == [1, 2]
        assert (await j.append(E("p"))).seq == 3
        assert on_disk(j.path) == [("p", 1, "note"), ("p", 2, "note"), ("p", 3, "note")]
    finally:
        await j.close()


GARBAGE = {
    "garbage": b"this is not a database at all\n" * 200,
    "sqlite-header-then-garbage": b"SQLite format 3\x00" + b"\xde\xad\xbe\xef" * 1024,
}


def write_bytes(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def read_bytes(path: Path) -> bytes:
    return path.read_bytes()


def names_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize("kind", list(GARBAGE))
async def test_sqlite_damaged_file_is_moved_aside_on_request(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "j.db"
    garbage = GARBAGE[kind]
    write_bytes(path, garbage)
    reported: list[DamagedJournal] = []
    j = SQLiteJournal(path, start_fresh=True, on_damage=reported.append)
    await j.open()
    try:
        assert isinstance(j.damage, DamagedJournal)
        assert reported == [j.damage]
        moved = j.damage.moved_to
        assert moved is not None
        assert ".damaged-" in moved.name
        assert moved.parent == tmp_path
        assert read_bytes(moved) == garbage  # never deleted, never altered
        assert str(path) in str(j.damage)
        assert [kept.path for kept in j.left_behind] == [moved]  # said, until dealt with
        # a fresh journal opened in its place
        assert await j.read(ReadFilter()) == []
        assert (await j.append(E("p"))).seq == 1
        assert on_disk(path) == [("p", 1, "note")]
    finally:
        await j.close()


async def test_sqlite_newer_schema_is_refused_even_to_start_fresh(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    j = SQLiteJournal(path)
    await j.open()
    await j.append(E("p"))
    await j.close()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE meta SET value='999' WHERE key='schema_version'")
        conn.commit()
    before = read_bytes(path)
    for fresh in (False, True):
        again = SQLiteJournal(path, start_fresh=fresh)
        with pytest.raises(DamagedJournal, match="written by a newer promptui") as info:
            await again.open()
        assert "never an older one" in str(info.value) and "salvage" not in str(info.value)
    assert read_bytes(path) == before and names_in(tmp_path) == ["j.db"]


@pytest.mark.parametrize("kind", list(GARBAGE))
@pytest.mark.parametrize("strict", [False, True])
async def test_sqlite_damage_is_refused_and_the_file_left_alone(tmp_path: Path, kind: str,
                                                                strict: bool) -> None:
    path = tmp_path / "j.db"
    garbage = GARBAGE[kind]
    write_bytes(path, garbage)
    reported: list[DamagedJournal] = []
    # The default; recover_on_start: strict wins over start_fresh.
    j = SQLiteJournal(path, strict=strict, start_fresh=strict, on_damage=reported.append)
    with pytest.raises(DamagedJournal) as info:
        await j.open()
    assert isinstance(info.value, JournalError)
    assert info.value.path == path
    assert info.value.moved_to is None
    assert f"'promptui journal salvage {path}'" in str(info.value)
    assert read_bytes(path) == garbage
    assert names_in(tmp_path) == ["j.db"]
    assert reported == []
    assert j.damage is None


async def test_sqlite_altered_row_is_reported_corrupt(sqlite_journal: SQLiteJournal) -> None:
    await sqlite_journal.append(E("p", "note", {"amount": 10}))
    await sqlite_journal.append(E("p", EntryType.CHECKPOINT, {"state": "ok"}))
    assert len(await sqlite_journal.read(ReadFilter())) == 2
    with closing(sqlite3.connect(sqlite_journal.path)) as conn:
        conn.execute("""UPDATE entries SET data='{"amount":1000000}' WHERE seq=1""")
        conn.execute("""UPDATE entries SET data='{"state":"forged"}' WHERE seq=2""")
        conn.commit()
    with pytest.raises(JournalError, match="corrupt"):
        await sqlite_journal.read(ReadFilter())
    with pytest.raises(JournalError, match="corrupt"):
        await sqlite_journal.read(ReadFilter(process="p", limit=1))
    with pytest.raises(JournalError, match="corrupt"):
        await sqlite_journal.last_checkpoint("p")


# -- the delivery index (a sender's delivery id, kept with its event_accepted entry) --------------
DAY = 24 * 3600.0


async def accept_delivery(j: Any, process: str, event_id: str, key: Any, *,
                          at: float | None = None) -> JournalEntry:
    event = {"event_id": event_id, "payload": {}, "metadata": {"delivery_key": key}}
    entry = E(process, EntryType.EVENT_ACCEPTED, {"event_id": event_id})
    if at is not None:
        entry.timestamp = at
    return await j.append(entry, attachment=event)


async def test_delivery_index_keeps_the_first_event_of_each_delivery(journal: Any) -> None:
    assert await journal.delivery_event("p", "/gh#d1") is None
    await accept_delivery(journal, "p", "e1", "/gh#d1")
    await accept_delivery(journal, "p", "e2", "/gh#d2")
    await accept_delivery(journal, "p", "e3", "/gh#d1")  # accepted again: the first one stays
    assert await journal.delivery_event("p", "/gh#d1") == "e1"
    assert await journal.delivery_event("p", "/gh#d2") == "e2"
    assert await journal.delivery_event("q", "/gh#d1") is None  # per process
    assert await journal.delivery_event("p", "/other#d1") is None
    # the index is beside the pending events, not instead of them
    assert await pending_ids(journal) == ["e1", "e2", "e3"]


async def test_events_without_a_usable_delivery_key_are_accepted_and_not_indexed(
        journal: Any) -> None:
    await accept(journal, "p", "plain")
    for n, key in enumerate([None, 7, "", "k" * 1001, ["a"]]):
        await accept_delivery(journal, "p", f"odd{n}", key)
    assert len(await pending_ids(journal)) == 6
    for key in ["", "k" * 1001, "7", "a"]:
        assert await journal.delivery_event("p", key) is None


async def test_delivery_index_forgets_deliveries_older_than_a_week(journal: Any) -> None:
    now = time.time()
    await accept_delivery(journal, "p", "old", "k-old", at=now - 8 * DAY)
    await accept_delivery(journal, "p", "recent", "k-recent", at=now - 6 * DAY)
    assert await journal.delivery_event("p", "k-old") is None  # past the keep window
    assert await journal.delivery_event("p", "k-recent") == "recent"
    # a new acceptance prunes what has aged out; a delivery key reused after that is new
    await accept_delivery(journal, "p", "again", "k-old", at=now)
    assert await journal.delivery_event("p", "k-old") == "again"
    query = "SELECT delivery_key, event_id FROM deliveries ORDER BY delivery_key"
    if isinstance(journal, SQLiteJournal):
        with closing(sqlite3.connect(journal.path)) as conn:
            rows = conn.execute(query).fetchall()
        assert rows == [("k-old", "again"), ("k-recent", "recent")]
    if isinstance(journal, PostgresJournal):
        with psycopg.connect(journal._dsn) as pg:
            assert pg.execute(query).fetchall() == [("k-old", "again"), ("k-recent", "recent")]


async def test_a_refused_event_accepted_entry_indexes_no_delivery(journal: Any) -> None:
    """"Seen" is never true for an event that was not durably accepted."""
    with pytest.raises(serialisation_errors(journal)):
        await journal.append(E("p", EntryType.EVENT_ACCEPTED, {"event_id": "e"}), attachment={
            "event_id": "e", "payload": {"x": math.inf}, "metadata": {"delivery_key": "k"}})
    with pytest.raises(JournalError):  # no event id: refused before it takes a seq
        await journal.append(E("p", EntryType.EVENT_ACCEPTED, {}),
                             attachment={"metadata": {"delivery_key": "k"}})
    assert await journal.delivery_event("p", "k") is None
    assert await journal.read(ReadFilter()) == []


async def test_sqlite_delivery_and_event_commit_in_one_transaction(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit that fails after its rows are written leaves neither the event nor its
    delivery: the index can never say "seen" for an event that is not in the journal."""
    from runtime_core.journal.sqlite import commit as sqlite_commit

    j = SQLiteJournal(tmp_path / "j.db")
    await j.open()
    try:
        def fail(point: str) -> None:
            if point == "group_commit":
                raise RuntimeError("power cut before COMMIT")

        monkeypatch.setattr(sqlite_commit.crashpoints, "reached", fail)
        with pytest.raises(JournalError):
            await accept_delivery(j, "p", "e1", "k1")
    finally:
        await j.close()
    with closing(sqlite3.connect(tmp_path / "j.db")) as conn:
        assert conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0] == 0
    monkeypatch.undo()
    again = SQLiteJournal(tmp_path / "j.db")
    await again.open()
    try:
        assert await again.delivery_event("p", "k1") is None
        await accept_delivery(again, "p", "e1", "k1")
        assert await again.delivery_event("p", "k1") == "e1"
    finally:
        await again.close()


async def test_sqlite_delivery_index_survives_a_reopen(tmp_path: Path) -> None:
    j = SQLiteJournal(tmp_path / "j.db")
    await j.open()
    await accept_delivery(j, "p", "e1", "/gh#d1")
    await j.close()
    again = SQLiteJournal(tmp_path / "j.db")
    await again.open()
    try:
        assert await again.delivery_event("p", "/gh#d1") == "e1"
    finally:
        await again.close()


async def test_sqlite_a_schema_1_journal_opens_and_gains_the_delivery_index(
        tmp_path: Path) -> None:
    """A journal written before the delivery index (schema 1) still opens, passes the start
    checks, keeps everything, and gets the new table by migration."""
    from runtime_core.journal.sqlite.check import find_damage
    from runtime_core.journal.sqlite.schema import MIGRATIONS, SCHEMA_VERSION

    path = tmp_path / "old.db"
    with closing(sqlite3.connect(path)) as conn:  # exactly what version 1 created
        conn.execute("PRAGMA journal_mode=WAL")
        for statement in MIGRATIONS[1]:
            conn.execute(statement)
        conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
        conn.commit()
    j = SQLiteJournal(path)
    await j.open()
    await accept(j, "p", "e0")
    await j.close()
    with closing(sqlite3.connect(path)) as conn:  # back to a version 1 file with an entry
        conn.execute("DROP TABLE deliveries")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
        conn.commit()
    assert find_damage(path) == []
    again = SQLiteJournal(path, strict=True)
    await again.open()
    try:
        assert again.damage is None
        assert await pending_ids(again) == ["e0"]
        await accept_delivery(again, "p", "e1", "k1")
        assert await again.delivery_event("p", "k1") == "e1"
    finally:
        await again.close()
    with closing(sqlite3.connect(path)) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION),)
    assert find_damage(path) == []
