"""``promptui journal import DIR``: a reference (promptise) FileJournal directory, written here
from the spec's and the reference notes' description (one ``<process>.jsonl`` per process, one
``JournalEntry.to_dict()`` a line, ``<process>.checkpoint.json`` beside it), comes into our
SQLite journal, and a process of the same name recovers where the reference left it."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime_core import AgentProcess, ProcessConfig, ToolContext, tool
from runtime_core.journal import EntryType, JournalEntry, ReadFilter, SQLiteJournal
from runtime_core.journal.reference.importer import (
    NothingToImport,
    import_reference,
    prepare_import,
)
from runtime_core.journal.reference.reader import read_reference
from tests.helpers.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
PID = "0b7c7d0e-1111-4222-8333-444455556666"
TODAY = datetime.now(UTC).replace(microsecond=0).isoformat()


class Lines:
    """A reference JSONL file being written, one entry a minute."""

    def __init__(self, process: str, day: str = "2025-03-01") -> None:
        self.process = process
        self.day = day
        self.lines: list[str] = []

    def entry(self, kind: str, data: dict[str, Any]) -> str:
        n = len(self.lines)
        return json.dumps({"entry_id": f"{self.process}-{n}", "process_id": self.process,
                           "timestamp": f"{self.day}T10:{n:02d}:00+00:00",
                           "entry_type": kind, "data": data})

    def add(self, kind: str, data: dict[str, Any]) -> int:
        self.lines.append(self.entry(kind, data))
        return len(self.lines)

    def raw(self, text: str) -> int:
        self.lines.append(text)
        return len(self.lines)

    def text(self, torn_tail: str = "") -> str:
        return "\n".join(self.lines) + "\n" + torn_tail


CHECKPOINT = {"context_state": {"invoices_processed": 40, "cursor": "a"},
              "lifecycle_state": "running", "invocation_count": 1,
              "conversation": [{"role": "user", "content": "invoice 1"},
                               {"role": "assistant", "content": "processed 1"}]}


def write_reference(folder: Path) -> dict[str, int]:
    """Three processes; returns the line numbers the tests look for."""
    folder.mkdir(parents=True, exist_ok=True)
    where: dict[str, int] = {}
    # invoice-watcher: the "full" level (trigger_event, invocation_start, tool calls).
    w = Lines("invoice-watcher")
    w.add("state_transition", {"from_state": "created", "to_state": "starting",
                               "reason": "start()", "process_id": PID})
    w.add("state_transition", {"from_state": "starting", "to_state": "running", "reason": "",
                               "process_id": PID})
    w.add("trigger_event", {"trigger_id": "cron-1", "trigger_type": "cron", "event_id": "ev-1",
                            "payload": {"n": 1}})
    w.add("invocation_start", {"invocation": 1, "event_id": "ev-1"})
    w.add("tool_call", {"tool": "lookup", "args": {"id": 1}})
    w.add("tool_result", {"tool": "lookup", "result": "found"})
    w.add("invocation_result", {"invocation": 1, "event_id": "ev-1", "trigger_type": "cron",
                                "duration_ms": 12, "response": "processed 1"})
    w.add("checkpoint", CHECKPOINT)
    w.add("context_update", {"key": "invoices_processed", "value": 41})
    where["corrupt"] = w.raw("this is not json {")
    w.add("trigger_event", {"trigger_id": "cron-1", "trigger_type": "cron", "event_id": "ev-2",
                            "payload": {"n": 2}})
    w.add("invocation_start", {"invocation": 2, "event_id": "ev-2"})
    w.add("error", {"event_id": "ev-2", "error_type": "ValueError", "error": "boom"})
    # The reference's bug: a torn write, then the next entry appended on the same line.
    torn = '{"entry_id": "torn", "process_id": "invoice-watcher", "entry_type": "context_upd'
    where["glued"] = w.raw(torn + w.entry("context_update", {"key": "cursor", "value": "b"}))
    w.add("mission_evaluation", {"achieved": False, "confidence": 0.4})
    where["unknown"] = w.add("custom_audit", {"x": 1})
    w.add("trigger_event", {"trigger_id": "hook", "trigger_type": "webhook", "event_id": "ev-3",
                            "payload": {"n": 3}})  # accepted, never started: queued
    w.add("trigger_event", {"trigger_id": "hook", "trigger_type": "webhook", "event_id": "ev-4",
                            "payload": {"n": 4}})
    w.add("invocation_start", {"invocation": 3, "event_id": "ev-4"})
    w.add("tool_call", {"tool": "send_invoice", "args": {"to": "acme"}})  # no result: a crash
    where["torn"] = len(w.lines) + 1
    (folder / "invoice-watcher.jsonl").write_text(w.text(
        '{"entry_id": "last", "process_id": "invoice-watcher", "entry_type": "tool_res'))
    (folder / "invoice-watcher.checkpoint.json").write_text(json.dumps(CHECKPOINT))
    # digest-bot: the "checkpoint" level (no trigger_event), budget and mission, a clean stop.
    d = Lines("digest-bot")
    d.add("state_transition", {"from_state": "created", "to_state": "starting", "reason": "",
                               "process_id": "pid-2"})
    d.add("state_transition", {"from_state": "starting", "to_state": "running", "reason": "",
                               "process_id": "pid-2"})
    for i in (1, 2, 3):
        d.add("invocation_result", {"invocation": i, "event_id": f"d-{i}",
                                    "trigger_type": "cron", "response": f"digest {i}"})
        d.add("checkpoint", {
            "context_state": {"digests": i}, "lifecycle_state": "running",
            "invocation_count": i,
            "conversation": [{"role": "user", "content": f"go {k}"} for k in range(1, i + 1)],
            "budget": {"daily_runs": i, "daily_tool_calls": 2 * i, "daily_cost": 0.5 * i,
                       "run_tool_calls": 0, "last_daily_reset": TODAY},
            "mission": {"state": "active", "invocation_count": i, "started_at_elapsed": 60.0,
                        "evaluations": [{"achieved": False, "confidence": 0.5,
                                         "reasoning": "not yet", "progress_summary": "",
                                         "timestamp": TODAY, "invocation_number": i,
                                         "source": "llm"}]}})
    d.add("state_transition", {"from_state": "running", "to_state": "stopping",
                               "reason": "stop()", "process_id": "pid-2"})
    d.add("state_transition", {"from_state": "stopping", "to_state": "stopped",
                               "reason": "stopped", "process_id": "pid-2"})
    (folder / "digest-bot.jsonl").write_text(d.text())
    # mailer: a dead letter recorded as an entry, and a stop with a write in flight.
    m = Lines("mailer")
    m.add("dead_letter", {"event": {"trigger_id": "hook", "trigger_type": "webhook",
                                    "event_id": "m-0", "payload": {"to": "x"}},
                          "reason": "queue full", "error": "", "attempts": 0,
                          "dead_lettered_at": "2025-03-01T09:00:00+00:00"})
    m.add("trigger_event", {"trigger_id": "hook", "trigger_type": "webhook", "event_id": "m-1",
                            "payload": {"to": "y"}})
    m.add("invocation_start", {"invocation": 1, "event_id": "m-1"})
    m.add("tool_call", {"tool": "send_mail", "args": {"to": "y"}})
    m.add("state_transition", {"from_state": "running", "to_state": "stopping",
                               "reason": "stop()", "process_id": "pid-3"})
    m.add("state_transition", {"from_state": "stopping", "to_state": "stopped",
                               "reason": "stopped", "process_id": "pid-3"})
    (folder / "mailer.jsonl").write_text(m.text())
    return where


class Outbox:
    """The outside world: a write tool that records every call."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def tools(self) -> list[Any]:
        async def send_invoice(to: str, ctx: ToolContext) -> str:
            self.sent.append(to)
            return f"sent to {to}"

        return [tool(send_invoice, effect="write")]


def config(journal: Path, **extra: Any) -> ProcessConfig:
    return ProcessConfig(model={"provider": "scripted", "turns": [{"reply": "done"}]},
                         journal={"level": "checkpoint", "path": str(journal)}, **extra)


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "promptui.cli", "journal", "import", *args],
                          cwd=cwd or ROOT, capture_output=True, text=True, timeout=120)


def entry_count(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0])


# -- the Python API, then a process recovers ------------------------------------------------
async def test_import_then_a_process_recovers_where_the_reference_left_it(
        tmp_path: Path) -> None:
    folder = tmp_path / "ref"
    where = write_reference(folder)
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    await journal.open()
    report = await import_reference(journal, folder)
    await journal.close()
    rows = {row.name: row for row in report.processes}
    assert {name: row.status for name, row in rows.items()} == {
        "digest-bot": "imported", "invoice-watcher": "imported", "mailer": "imported"}
    watcher = rows["invoice-watcher"]
    assert (watcher.checkpoints, watcher.dead_letters, watcher.queued_events,
            watcher.open_runs, watcher.waiting_writes) == (1, 1, 1, 1, 1)
    assert watcher.not_carried == {"mission_evaluation": 1, "custom_audit": 1}
    damaged = {(p.file, p.line, p.kind) for p in report.problems}
    assert {("invoice-watcher.jsonl", where["corrupt"], "corrupt"),
            ("invoice-watcher.jsonl", where["glued"], "glued"),
            ("invoice-watcher.jsonl", where["torn"], "torn"),
            ("invoice-watcher.jsonl", where["unknown"], "unknown_type")} <= damaged

    outbox = Outbox()
    process = AgentProcess("invoice-watcher", config(path), tools=outbox.tools())
    await process.start()
    recovered = process.recovered
    assert recovered is not None
    assert recovered["requeued_events"] == 1 and recovered["waiting_runs"] == 1
    # The state of the last checkpoint plus the updates after it (the glued line's included).
    assert process.context.get("invoices_processed") == 41
    assert process.context.get("cursor") == "b"
    assert process.conversation.messages()[:2] == CHECKPOINT["conversation"]
    # The failed event is a dead letter; the queued one runs once; the open write waits.
    assert [(d["event"].event_id, d["reason"]) for d in process.dead_letters] == [
        ("ev-2", "retries exhausted")]
    await wait_for(lambda: process.invocation_count == 2)
    assert [r.event.event_id for r in process.recent_runs()] == ["ev-3"]
    waiting = process.waiting_runs()
    assert [r.waiting_reason for r in waiting] == ["unknown_write_outcome"]
    detail = process.waiting_detail(waiting[0].run_id)
    assert detail["tool"] == "send_invoice" and detail["args"] == {"to": "acme"}
    assert detail["event_id"] == "ev-4"
    await asyncio.sleep(0.05)
    assert outbox.sent == []  # the write is never dispatched again blindly
    await process.stop()

    again = AgentProcess("invoice-watcher", config(path), tools=outbox.tools())
    await again.start()  # redelivered once: the second start has nothing left to run
    assert again.recovered is not None and again.recovered["requeued_events"] == 0
    assert again.invocation_count == 2 and len(again.waiting_runs()) == 1
    await again.stop()


async def test_checkpoint_level_process_keeps_budget_mission_and_counts(tmp_path: Path
                                                                         ) -> None:
    folder = tmp_path / "ref"
    write_reference(folder)
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    await journal.open()
    await import_reference(journal, folder, only=["digest-bot"])
    assert await journal.processes() == ["digest-bot"]
    await journal.close()
    process = AgentProcess("digest-bot", config(
        path, budget={"enabled": True, "max_runs_per_day": 10},
        mission={"enabled": True, "objective": "digest", "success_check": "state.digests >= 99"}))
    await process.start()
    recovered = process.recovered
    assert recovered is not None
    assert recovered["lifecycle_state"] == "stopped"
    assert recovered["budget_restored"] and recovered["mission_restored"]
    assert process.invocation_count == 3 and process.context.get("digests") == 3
    assert process.status()["budget"]["runs_per_day"] == 7
    assert [m["content"] for m in process.conversation.messages()] == ["go 1", "go 2", "go 3"]
    assert process.dead_letters == [] and process.waiting_runs() == []
    await process.stop()


async def test_a_stop_dead_letters_what_was_in_flight(tmp_path: Path) -> None:
    folder = tmp_path / "ref"
    write_reference(folder)
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    await journal.open()
    await import_reference(journal, folder, only=["mailer"], rename={"mailer": "mailer-2"})
    await journal.close()
    process = AgentProcess("mailer-2", config(path))
    await process.start()
    letters = [(d["event"].event_id, d["reason"]) for d in process.dead_letters]
    assert letters == [("m-0", "queue full"), ("m-1", "process stopped")]
    assert "send_mail unfinished" in process.dead_letters[1]["error"]
    assert process.waiting_runs() == [] and process.invocation_count == 0
    await process.stop()


# -- the command line ----------------------------------------------------------------------
@pytest.mark.slow
def test_cli_dry_run_writes_nothing_then_imports_once(tmp_path: Path) -> None:
    folder = tmp_path / "ref"
    where = write_reference(folder)
    path = tmp_path / "j" / "journal.db"
    dry = cli(str(folder), "--journal", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "invoice-watcher: would import" in dry.stdout
    for line in ("corrupt", "glued", "torn"):
        assert f"invoice-watcher.jsonl:{where[line]}:" in dry.stdout
    assert "dead letters 1 · queued events 1 · runs in flight 1 (1 write(s) waiting" \
        in dry.stdout
    assert "Dry run: nothing written" in dry.stdout
    assert not path.exists() and not path.parent.exists()

    done = cli(str(folder), "--journal", str(path))
    assert done.returncode == 0, done.stderr
    assert len(re.findall(r"^[\w-]+: imported \d+ entries", done.stdout, re.M)) == 3
    written = entry_count(path)
    twice = cli(str(folder), "--journal", str(path))
    assert twice.returncode == 0, twice.stderr
    assert twice.stdout.count("already imported") == 3
    assert entry_count(path) == written  # nothing duplicated

    with (folder / "mailer.jsonl").open("a") as fh:  # the reference went on writing
        fh.write(Lines("mailer", "2025-03-02").entry("context_update",
                                                     {"key": "k", "value": 1}) + "\n")
    changed = cli(str(folder), "--journal", str(path))
    assert changed.returncode == 2
    assert "'mailer' was imported from a reference journal before" in changed.stderr
    assert "--as mailer=NEW_NAME" in changed.stderr and "Nothing was written" in changed.stderr
    assert entry_count(path) == written
    renamed = cli(str(folder), "--journal", str(path), "--only", "mailer",
                  "--as", "mailer=mailer-v2", "--json")
    assert renamed.returncode == 0, renamed.stderr
    rows = json.loads(renamed.stdout)["processes"]
    assert [(r["name"], r["source_name"], r["status"]) for r in rows] == [
        ("mailer-v2", "mailer", "imported")]


async def test_a_process_the_journal_has_is_refused_and_nothing_is_written(
        tmp_path: Path) -> None:
    folder = tmp_path / "ref"
    write_reference(folder)
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    await journal.open()
    await journal.append(JournalEntry("digest-bot", EntryType.STATE_TRANSITION,
                                      {"from_state": "created", "to_state": "starting"}))
    report = await import_reference(journal, folder)
    assert [(r.name, r.status) for r in report.refused] == [("digest-bot", "refused")]
    assert "already has a process named 'digest-bot'" in report.refused[0].message
    assert await journal.processes() == ["digest-bot"]  # the others were not written either
    assert len(await journal.read(ReadFilter(process="digest-bot"))) == 1
    await journal.close()


@pytest.mark.slow
async def test_a_journal_held_by_a_runtime_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ref"
    write_reference(folder)
    path = tmp_path / "journal.db"
    held = SQLiteJournal(path)
    await held.open()
    try:
        done = await asyncio.to_thread(cli, str(folder), "--journal", str(path))
    finally:
        await held.close()
    assert done.returncode == 2
    assert f"journal {path} is held by pid" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("make", ["missing", "file", "empty", "garbage", "ours"])
def test_not_a_reference_journal_exits_2_naming_what_was_expected(tmp_path: Path,
                                                                  make: str) -> None:
    target = tmp_path / "ref"
    if make == "file":
        target.write_text("hello")
    elif make == "empty":
        target.mkdir()
    elif make == "garbage":
        target.mkdir()
        (target / "p.jsonl").write_bytes(b"\x00\xff garbage\n{not json\n")
    elif make == "ours":
        target = tmp_path / "journal.db"
        target.write_bytes(b"SQLite format 3\x00")
    done = cli(str(target), "--journal", str(tmp_path / "out.db"))
    assert done.returncode == 2
    expected = "nothing to import" if make == "garbage" else "expected a reference FileJournal"
    assert expected in done.stderr
    assert not (tmp_path / "out.db").exists()


# -- the reader ----------------------------------------------------------------------------
def test_two_complete_entries_on_one_line_are_both_kept(tmp_path: Path) -> None:
    lines = Lines("p")
    one = lines.entry("context_update", {"key": "a", "value": 1})
    two = lines.entry("context_update", {"key": "b", "value": 2})
    (tmp_path / "p.jsonl").write_text(one + two + "\n")
    reference = read_reference(tmp_path)
    assert [e.body["key"] for e in reference.processes["p"].entries] == ["a", "b"]
    assert [(p.line, p.kind) for p in reference.problems] == [(1, "glued")]


async def test_a_checkpoint_file_the_jsonl_lacks_is_the_last_checkpoint(tmp_path: Path
                                                                        ) -> None:
    lines = Lines("p")
    lines.add("checkpoint", {"context_state": {"n": 1}, "lifecycle_state": "running"})
    (tmp_path / "p.jsonl").write_text(lines.text('{"entry_id": "x", "entry_type": "checkp'))
    (tmp_path / "p.checkpoint.json").write_text(json.dumps(
        {"context_state": {"n": 2}, "lifecycle_state": "running", "invocation_count": 5}))
    report, _ = await prepare_import(tmp_path)
    row = report.processes[0]
    assert row.checkpoints == 2 and row.context_keys == ["n"]
    last = [m.entry for m in row.mapped if m.entry.entry_type == EntryType.CHECKPOINT][-1]
    assert last.data["context_state"] == {"n": 2} and last.data["invocation_count"] == 5
    assert any(p.file == "p.checkpoint.json" and "imported as the last checkpoint" in p.message
               for p in report.problems)


KINDS = ["state_transition", "checkpoint", "context_update", "trigger_event",
         "invocation_start", "invocation_result", "error", "tool_call", "tool_result",
         "restart", "restart_exhausted", "secret_access", "dead_letter", "event_accepted",
         "mission_evaluation", "rewind", "made_up"]
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8)
                    | st.floats(allow_nan=False, allow_infinity=False),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
FIELDS = st.sampled_from(["event_id", "key", "value", "tool", "args", "result", "to_state",
                          "context_state", "conversation", "budget", "mission", "event",
                          "attempts", "payload", "process_id", "response", "error"])
DATA = st.dictionaries(FIELDS, JSON | st.sampled_from(["e1", "e2", 1]), max_size=5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(blob=st.binary(max_size=400))
def test_byte_garbage_is_only_ever_reported(tmp_path: Path, blob: bytes) -> None:
    folder = tmp_path / "fuzz"
    folder.mkdir(exist_ok=True)
    good = Lines("p").entry("context_update", {"key": "k", "value": 1})
    (folder / "p.jsonl").write_bytes(blob + b"\n" + good.encode() + b"\n" + blob)
    (folder / "p.checkpoint.json").write_bytes(blob)
    reference = read_reference(folder)  # never raises
    count = (blob + b"\n" + good.encode() + b"\n" + blob).count(b"\n") + 1
    assert all(0 <= p.line <= count for p in reference.problems)
    assert any(e.body.get("key") == "k" for e in reference.processes["p"].entries)
    try:
        report, _ = asyncio.run(prepare_import(folder))
    except NothingToImport:
        return
    assert report.processes[0].entries >= 1


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(entries=st.lists(st.tuples(st.sampled_from(KINDS), DATA), max_size=25))
def test_any_sequence_of_entries_maps_to_entries_our_journal_accepts(
        tmp_path: Path, entries: list[tuple[str, dict[str, Any]]]) -> None:
    folder = tmp_path / "fuzz-entries"
    folder.mkdir(exist_ok=True)
    lines = Lines("p")
    for kind, data in entries:
        lines.add(kind, data)
    (folder / "p.jsonl").write_text(lines.text())
    try:
        report, _ = asyncio.run(prepare_import(folder))
    except NothingToImport:
        return
    assert not [p for p in report.problems if "left out" in p.message]
