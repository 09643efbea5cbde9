"""Salvaging a damaged SQLite journal, in process: the page reader reads what SQLite reads,
the salvaged journal passes verify, and the rules that decide what may run again by itself
(tests/e2e/test_journal_salvage.py damages a journal a real runtime wrote).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from runtime_core.control import offline
from runtime_core.journal import EntryType, JournalEntry, SQLiteJournal
from runtime_core.journal.sqlite.rescue import EntryRow, Rescued, rescue
from runtime_core.journal.sqlite.salvage_plan import UNKNOWN_TAIL_STEPS, plan
from runtime_core.journal.sqlite.schema import checksum

P = "proc"


def event(event_id: str, size: int = 20) -> dict[str, Any]:
    return {"trigger_id": "t", "trigger_type": "manual", "payload": {"x": "y" * size},
            "event_id": event_id, "timestamp": "2026-01-01T00:00:00+00:00", "metadata": {}}


async def journal_with_everything(path: Path) -> None:
    """Entries of every size (some past a page: overflow chains), finished runs, queued
    events, a dead letter and an open run."""
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        for i in range(120):
            eid = f"e{i}"
            await journal.append(JournalEntry(P, EntryType.EVENT_ACCEPTED, {"event_id": eid},
                                              process_id="pid-1"), attachment=event(eid, i * 7))
            if i < 100:
                await journal.append(JournalEntry(P, EntryType.RUN_FINISHED, {
                    "event_id": eid, "state": "succeeded", "event_done": True,
                    "reply": "r" * (i * 60)}, process_id="pid-1", run_id=f"r{i}"))
        await journal.append(JournalEntry(P, EntryType.RUN_STARTED, {"event_id": "e100"},
                                          process_id="pid-1", run_id="open"))
        await journal.append(JournalEntry(P, EntryType.DEAD_LETTERED, {
            "event_id": "e101", "reason": "r", "error": "x", "attempts": 1},
            process_id="pid-1"), attachment=event("e101"))
    finally:
        await journal.close()


def sql_rows(path: Path) -> tuple[dict[tuple[str, int], str], set[str], set[str]]:
    with closing(sqlite3.connect(path)) as conn:
        entries = {(p, s): d for p, s, d in conn.execute(
            "SELECT process, seq, data FROM entries")}
        pending = {e for (e,) in conn.execute("SELECT event_id FROM pending")}
        runs = {r for (r,) in conn.execute("SELECT run_id FROM open_runs")}
    return entries, pending, runs


async def test_every_row_read_page_by_page_is_the_one_sqlite_reads(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await journal_with_everything(path)
    entries, pending, runs = sql_rows(path)
    assert max(len(d) for d in entries.values()) > 4096  # overflow pages are followed
    found = rescue(path)
    assert {(p, s): r.data for p, rows in found.entries.items()
            for s, r in rows.items()} == entries
    assert {e for _, e in found.pending} == pending
    assert {r for _, r in found.open_runs} == runs and len(found.dead) == 1
    assert found.heads == {P: len(entries)} and found.schema_readable
    assert {"entries", "pending", "open_runs", "dead_letters", "heads"} <= found.complete
    assert found.torn_entries == 0 and found.torn_cells == 0


async def test_a_sound_journal_is_salvaged_whole_and_the_copy_passes_verify(
        tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await journal_with_everything(path)
    before = path.read_bytes()
    report = offline.salvage(path)
    assert report.output.parent == tmp_path and ".salvaged-" in report.output.name
    assert report.verify_problems == [] and path.read_bytes() == before
    [p] = report.processes
    assert p.lost == [] and sorted(p.requeued) == [f"e{i}" for i in range(102, 120)]
    assert list(p.open_runs) == ["open"] and list(p.dead) == ["e101"] and p.waits == []
    assert sql_rows(report.output)[0] == {**sql_rows(path)[0], (P, p.head + 1): sql_rows(
        report.output)[0][(P, p.head + 1)]}  # the same entries, and one salvaged entry
    with pytest.raises(offline.JournalError, match="exists already"):
        offline.salvage(path, report.output)


async def test_a_cut_journal_keeps_every_entry_whose_bytes_are_left(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await journal_with_everything(path)
    entries = sql_rows(path)[0]
    data = path.read_bytes()
    for share in (0.5, 0.9, 0.99):
        cut = tmp_path / f"cut-{share}.db"
        cut.write_bytes(data[:int(len(data) * share)])
        report = offline.salvage(cut, tmp_path / f"out-{share}.db")
        assert report.verify_problems == [], report.verify_problems
        kept = sql_rows(report.output)[0]
        left = cut.read_bytes()
        for key, text in entries.items():
            if text.encode() in left:
                assert kept[key] == text, key
        [p] = report.processes
        assert p.lost_count == len(entries) - len(p.rows) and p.tail_known


# -- the rules --------------------------------------------------------------------------------
def row(seq: int, kind: str, run_id: str | None = None, **data: Any) -> EntryRow:
    text = offline_json(data)
    return EntryRow(seq, P, 1, seq, 0.0, kind, run_id, text, checksum(text), data)


def offline_json(data: dict[str, Any]) -> str:
    import json

    return json.dumps(data, separators=(",", ":"))


def rescued(rows: list[EntryRow], *, head: int | None = None, complete: set[str] | None = None,
            pending: tuple[str, ...] = (), open_runs: dict[str, tuple[str, int]] | None = None
            ) -> Rescued:
    """A damaged journal's rows: ``pending`` events queued (ord: their acceptance's seq),
    ``open_runs`` run -> (event, started seq)."""
    accepted = {r.fields["event_id"]: r.seq for r in rows
                if r.entry_type == EntryType.EVENT_ACCEPTED}
    out = Rescued(entries={P: {r.seq: r for r in rows}}, complete=complete or set())
    if head is not None:
        out.heads[P] = head
    for eid in pending:
        out.pending[(P, eid)] = (accepted.get(eid, 1) * 10_000, offline_json(event(eid)))
    for run_id, (eid, started) in (open_runs or {}).items():
        out.open_runs[(P, run_id)] = (eid, 1, "running", started)
    return out


def decide(found: Rescued) -> Any:
    [p] = plan(found, "j.db", iter(f"new{i}" for i in range(99)).__next__)
    return p


ALL = {"pending", "open_runs", "dead_letters"}


def test_a_queued_event_runs_again_when_nothing_says_it_started() -> None:
    rows = [row(1, EntryType.EVENT_ACCEPTED, event_id="a"), row(2, "note")]
    assert decide(rescued(rows, head=2, pending=("a",))).requeued == ["a"]  # nothing lost
    # Entries after it were lost, but the open runs table was read whole and has no run.
    assert decide(rescued(rows, head=9, complete=ALL, pending=("a",))).requeued == ["a"]


def test_a_queued_event_waits_when_a_run_of_it_may_hide_in_lost_entries() -> None:
    rows = [row(1, EntryType.EVENT_ACCEPTED, event_id="a"), row(2, "note")]
    for found in (rescued(rows, head=9, pending=("a",)),  # lost after it, table not read
                  rescued(rows, pending=("a",))):  # its end could not be read at all
        p = decide(found)
        assert p.requeued == [] and [(w.event_id, w.started) for w in p.waits] == [("a", 0)]
        assert "a run of it may have started and written" in p.waits[0].cause
        assert "reconcile" in p.waits[0].cause and "a" in p.queued


def test_an_open_run_the_entries_show_whole_is_kept_whatever_the_index_says() -> None:
    """The damage that once ran a write twice: the open runs index lost the row (the
    table reads fine), but the entries still start the run and never end it."""
    rows = [row(1, EntryType.EVENT_ACCEPTED, event_id="a"),
            row(2, EntryType.RUN_STARTED, "r", event_id="a"),
            row(3, EntryType.TOOL_INTENT, "r", step=1, effect="write")]
    p = decide(rescued(rows, head=3, complete=ALL, pending=("a",)))
    assert p.requeued == [] and p.waits == [] and p.open_runs == {"r": ("a", 1, "running", 2)}


def test_an_event_the_entries_finish_never_runs_again_though_the_queue_kept_it() -> None:
    rows = [row(1, EntryType.EVENT_ACCEPTED, event_id="a"),
            row(2, EntryType.RUN_FINISHED, "r", event_id="a", event_done=True)]
    p = decide(rescued(rows, head=2, complete=ALL, pending=("a",)))
    assert p.requeued == [] and p.waits == [] and "a" not in p.queued


def test_an_open_run_that_lost_entries_waits_past_every_step_it_may_have_made() -> None:
    rows = [row(1, EntryType.EVENT_ACCEPTED, event_id="a"),
            row(2, EntryType.RUN_STARTED, "r", event_id="a"),
            row(3, EntryType.TOOL_INTENT, "r", step=1, effect="write"),
            row(7, "note")]
    p = decide(rescued(rows, head=7, pending=("a",), open_runs={"r": ("a", 2)}))
    [wait] = p.waits
    assert (wait.run_id, wait.started, wait.step) == ("r", 2, 1 + 1 + 3)  # 4, 5, 6 were lost
    assert "entries of this run after proc:2 were lost" in wait.cause
    unknown_end = decide(rescued(rows, pending=("a",), open_runs={"r": ("a", 2)}))
    assert unknown_end.waits[0].step > UNKNOWN_TAIL_STEPS
    # Its start lost too: the salvage writes it again for the same run.
    lost_start = decide(rescued(rows[:1] + rows[3:], head=7, pending=("a",),
                                open_runs={"r": ("a", 2)}))
    assert [(w.run_id, w.started) for w in lost_start.waits] == [("r", 0)]


def test_an_unfinished_event_whose_payload_was_lost_waits_on_a_stand_in() -> None:
    rows = [row(1, EntryType.EVENT_ACCEPTED, event_id="a", trigger_id="hook"), row(2, "note")]
    p = decide(rescued(rows, head=2))  # the queue table could not be read
    assert p.payload_lost == ["a"] and [w.event_id for w in p.waits] == ["a"]
    assert "payload was lost" in p.waits[0].cause
    assert '"salvage":"payload lost"' in p.queued["a"][1] and '"hook"' in p.queued["a"][1]


def test_what_the_queue_no_longer_holds_was_settled_and_a_lost_dead_letter_is_named() -> None:
    rows = [row(1, EntryType.EVENT_ACCEPTED, event_id="a"),
            row(2, EntryType.EVENT_ACCEPTED, event_id="d"),
            row(3, EntryType.DEAD_LETTERED, event_id="d")]
    p = decide(rescued(rows, head=9, complete={"pending"}))
    assert p.settled_end_lost == ["a"] and p.dead_lost == ["d"] and not p.waits
    assert p.lost == [(4, 9)] and p.lost_count == 6


def test_what_retention_removed_is_not_lost() -> None:
    rows = [row(5, EntryType.EVENT_ACCEPTED, event_id="a"), row(6, "note"), row(8, "note")]
    found = rescued(rows, head=8, pending=("a",))
    found.retained[P] = (5, 4, 0.0)  # seqs 1 to 4 were removed on purpose
    p = decide(found)
    assert p.lost == [(7, 7)] and p.requeued == []  # 7, after "a", may hide a run of it
    found.retained[P] = (9, 8, 0.0)
    assert decide(found).lost == [] and decide(found).requeued == ["a"]


def test_a_salvaged_journal_with_lost_entries_passes_the_start_checks(tmp_path: Path) -> None:
    """The ``lost`` entries keep the seq chain whole, and a run started before them is not
    required in the open runs index (its end may be in them)."""
    rows = [row(1, EntryType.EVENT_ACCEPTED, event_id="a"),
            row(2, EntryType.RUN_STARTED, "r", event_id="a"), row(5, "note")]
    found = rescued(rows, head=6, complete=ALL)
    found.incarnations[1] = "pid-1"
    source = tmp_path / "damaged.db"
    source.write_bytes(b"")
    from runtime_core.journal.sqlite.salvage import SalvageReport, write_journal

    report = SalvageReport(source, tmp_path / "out.db", processes=[decide(found)])
    write_journal(report.output, found, report)
    assert offline.verify(report.output).ok, offline.verify(report.output).problems
    types = [e.entry_type for e in offline.read_entries(report.output, P)]
    assert types == ["event_accepted", "run_started", "lost", "lost", "note", "lost",
                     "salvaged"]


async def test_a_run_the_salvage_puts_to_wait_is_reconciled_like_any_other(
        tmp_path: Path) -> None:
    from runtime_core import AgentProcess, ProcessConfig
    from runtime_core.journal.sqlite.salvage import UNKNOWN_CALL, SalvageReport, write_journal
    from tests.helpers.polling import wait_for

    rows = [row(1, EntryType.EVENT_ACCEPTED, event_id="a"),
            row(2, EntryType.EVENT_ACCEPTED, event_id="b"), row(4, "note")]
    found = rescued(rows, head=4, pending=("a", "b"))  # 3 was lost: after both
    found.incarnations[1] = "pid-1"
    plan_ = decide(found)
    assert sorted(w.event_id for w in plan_.waits) == ["a", "b"]
    report = SalvageReport(tmp_path / "damaged.db", tmp_path / "out.db", processes=[plan_])
    write_journal(report.output, found, report)
    process = AgentProcess(P, ProcessConfig(model="echo", journal={
        "level": "checkpoint", "path": str(report.output)}))
    await process.start()
    try:
        waiting = {r.event.event_id: r.run_id for r in process.waiting_runs()}
        assert sorted(waiting) == ["a", "b"] and process.status()["queue_size"] == 0
        detail = process.waiting_detail(waiting["a"])
        assert detail["reason"] == "unknown_write_outcome" and detail["tool"] == UNKNOWN_CALL
        assert "salvaged from j.db" in detail["cause"]
        await process.reconcile(waiting["a"], "failed", note="checked: it never ran")
        await wait_for(lambda: [d["event"].event_id for d in process.dead_letters] == ["a"])
        assert [r.event.event_id for r in process.waiting_runs()] == ["b"]
    finally:
        await process.close()
