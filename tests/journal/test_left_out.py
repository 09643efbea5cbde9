"""What schema 6 leaves out of a run's entries (journal.left_out) reads back exactly: a
standard goal, an intent's idempotency key, a write's automatic action artifact; entries of the
older shape read the same, and a schema 5 file opens and reads its runs as they were."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runtime_core import TriggerEvent
from runtime_core.agent.model import ToolCall
from runtime_core.journal import SQLiteJournal
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.left_out import (
    ACTION,
    action_artifact,
    fence_tag,
    identity_of,
    leave_action_out,
    leave_goal_out,
)
from runtime_core.journal.provider import ReadFilter
from runtime_core.journal.replay import ReplayEngine, rebuild_run
from runtime_core.journal.sqlite.schema import SCHEMA_VERSION, checksum
from runtime_core.runs.run import render_event_message
from tests.helpers.durable_runs import run_workload, workload_process

AT = datetime(2026, 12, 7, 1, 2, 3, 456_000, tzinfo=UTC)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(), kids, max_size=3),
    max_leaves=8)


def started(goal: str, event_id: str) -> dict[str, Any]:
    return {"event_id": event_id, "attempt": 1,
            "identity": {"config_digest": "d1", "goal": goal}}


def stored(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as the journal gives it back (compact JSON, no NaN)."""
    return json.loads(json.dumps(data, separators=(",", ":"), ensure_ascii=False,
                                 allow_nan=False))


RUN_IDS = st.none() | st.just("run-imported") | st.text("0123456789abcdef", min_size=16,
                                                          max_size=16)


@given(payload=JSONISH | st.text(), trigger_id=st.text(max_size=12), late=st.integers(0, 90),
       run_id=RUN_IDS)
def test_a_goal_left_out_is_rendered_again_exactly(payload: Any, trigger_id: str,
                                                   late: int, run_id: str | None) -> None:
    event = TriggerEvent(trigger_id, "webhook", payload, timestamp=AT)
    goal = render_event_message(event, run_id)
    ts = (AT + timedelta(seconds=late)).timestamp()
    try:
        lean = stored(leave_goal_out(started(goal, event.event_id), ts, run_id))
    except ValueError:  # a payload with NaN: the goal text holds it, never JSON
        lean = leave_goal_out(started(goal, event.event_id), ts, run_id)
    assert identity_of(lean, ts, run_id) == {"config_digest": "d1", "goal": goal}
    parts = lean["identity"].get("goal_parts")
    if parts is not None:  # schema 9: the fence is the run's own, so its tag is left out
        assert ("tag" in parts) == (fence_tag(run_id) is None)


def test_a_run_fences_its_goal_with_its_own_id() -> None:
    event = TriggerEvent("t", "manual", {"a": 1}, timestamp=AT)
    assert "<untrusted-0123abcd>" in render_event_message(event, "0123abcd89ef4567")
    assert fence_tag("run-imported") is None and fence_tag("0123ABCD89EF4567") is None
    other = render_event_message(event, "run-imported")  # a tag of its own, random
    assert "<untrusted-" in other and other != render_event_message(event, "run-imported")


def test_a_goal_that_is_not_the_standard_rendering_is_kept() -> None:
    event = TriggerEvent("t", "manual", {"a": 1}, timestamp=AT)
    ts = AT.timestamp()
    standard = render_event_message(event)
    for goal in (standard[:-3], "do the thing", standard.replace("never follow", "follow")):
        data = started(goal, event.event_id)
        kept = leave_goal_out(data, ts)
        assert kept["identity"]["goal"] == goal and identity_of(kept, ts) == data["identity"]
    spaced = standard.replace('{"a": 1}', '{"a":1}')  # not json.dumps's: kept as text
    lean = leave_goal_out(started(spaced, event.event_id), ts)
    assert lean["identity"]["goal_parts"]["body"] == '{"a":1}'
    assert identity_of(lean, ts) == {"config_digest": "d1", "goal": spaced}
    lean = leave_goal_out(started(render_event_message(event), event.event_id), ts)
    assert lean["identity"]["goal_parts"] == {"trigger": "manual", "trigger_id": "t",
                                              "tag": lean["identity"]["goal_parts"]["tag"],
                                              "payload": {"a": 1}}


def run_entries(*, lean: bool) -> list[JournalEntry]:
    """One run of a write call, in schema 6's shape or in the older one."""
    call = ToolCall("book", {"ref": "r1"}, "c0")
    action = action_artifact("run1", 2, "book", {"ref": "r1"})
    declared = {"artifact_id": "run1:2:a0", "kind": "solution", "step": 2, "tool": "book",
                "data": {"n": 1}}
    intent = {"step": 2, "tool": "book", "call_id": "c0", "effect": "write",
              "args": {"ref": "r1"}}
    second = {**intent, "step": 4, "call_id": "c1"}
    if not lean:
        intent["idempotency_key"], second["idempotency_key"] = "run1:2", "run1:4"
    artifacts = [declared, action]
    result = {"step": 2, "tool": "book", "call_id": "c0", "ok": True, "result": "ok",
              "artifacts": leave_action_out(artifacts, "run1", 2, call.name, call.args)
              if lean else artifacts}
    usage = {"step": 1, "turn": 0, "tool_calls": [{"name": "book", "args": {"ref": "r1"},
                                                   "call_id": "c0"}]}
    again = {"step": 3, "turn": 1, "tool_calls": [{"name": "book", "args": {"ref": "r1"},
                                                   "call_id": "c1"}]}
    kinds = [(EntryType.RUN_STARTED, {"event_id": "e1", "identity": {"goal": "g"}}),
             (EntryType.MODEL_USAGE, usage), (EntryType.TOOL_INTENT, intent),
             (EntryType.TOOL_RESULT, result), (EntryType.MODEL_USAGE, again),
             (EntryType.TOOL_INTENT, second)]
    return [JournalEntry("p", kind, stored(data), run_id="run1", seq=n + 1)
            for n, (kind, data) in enumerate(kinds)]


def test_intents_and_results_of_both_shapes_rebuild_the_same_run() -> None:
    lean, old = rebuild_run(run_entries(lean=True)), rebuild_run(run_entries(lean=False))
    assert run_entries(lean=True)[3].data["artifacts"][1] == ACTION
    assert "idempotency_key" not in run_entries(lean=True)[2].data
    assert lean.artifacts == old.artifacts and len(lean.artifacts) == 2
    assert lean.artifacts[1] == action_artifact("run1", 2, "book", {"ref": "r1"})
    assert lean.unknown is not None and old.unknown is not None
    assert lean.unknown.idempotency_key == old.unknown.idempotency_key == "run1:4"


def test_an_action_artifact_that_differs_from_its_call_is_kept_whole() -> None:
    redacted = {**action_artifact("r", 2, "book", {"ref": "x"}), "data": {"args": {"ref": "*"}}}
    assert leave_action_out([redacted], "r", 2, "book", {"ref": "x"}) == [redacted]


def _as_schema_5(path: Path) -> None:
    """Rewrite ``path``'s run entries as schema 5 wrote them (goal, key and action artifact
    kept; checksums to match) and mark it schema 5."""
    with closing(sqlite3.connect(path)) as conn, conn:
        rows = conn.execute("SELECT seq, run_id, entry_type, ts, data FROM entries "
                            "WHERE run_id IS NOT NULL ORDER BY seq").fetchall()
        intents: dict[tuple[str, int], dict[str, Any]] = {}
        for seq, run_id, kind, ts, text in rows:
            data = json.loads(text)
            if kind == EntryType.RUN_STARTED:
                data["identity"] = identity_of(data, ts)
            elif kind == EntryType.TOOL_INTENT:
                data["idempotency_key"] = f"{run_id}:{data['step']}"
                intents[(run_id, data["step"])] = data
            elif kind == EntryType.TOOL_RESULT:
                data["artifacts"] = [action_artifact(run_id, data["step"], data["tool"],
                                                     intents[(run_id, data["step"])]["args"])
                                     if a == ACTION else a for a in data["artifacts"]]
            new = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
            conn.execute("UPDATE entries SET data = ?, crc = ? WHERE seq = ?",
                         (new, checksum(new), seq))
        conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")


async def _conversation(path: Path) -> tuple[list[Any], list[JournalEntry]]:
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        entries = await journal.read(ReadFilter(process="bench"))
        return await ReplayEngine(journal).conversation("bench", 0), entries
    finally:
        await journal.close()


async def test_a_schema_5_journal_opens_and_reads_its_runs_as_they_were(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await run_workload(path, 2)
    lean_talk, lean = await _conversation(path)
    _as_schema_5(path)
    old_talk, old = await _conversation(path)
    assert old_talk == lean_talk and lean_talk[0]["content"].startswith("[Trigger: manual]")
    assert [identity_of(e.data, e.timestamp) for e in old if e.run_id] == [
        identity_of(e.data, e.timestamp) for e in lean if e.run_id]
    process = workload_process(path)
    await process.start()
    try:
        assert process.conversation.messages() == old_talk
    finally:
        await process.stop()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
            == (str(SCHEMA_VERSION),)
