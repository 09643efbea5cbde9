"""The bytes a durable run costs on disk (issue 37), and the leaner entries of schema 5 read
like the older ones.

The workload is the issue's: an event, a model turn asking for one write tool call, the call,
a final reply. Schema 5 leaves out of a run's entries what a reader rebuilds: the messages of
a run's end (its goal is in its ``run_started``, its reply in the end itself), zero counts,
empty lists and maps.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from runtime_core import AgentProcess, TriggerEvent
from runtime_core.agent.tools import tool
from runtime_core.journal import SQLiteJournal
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import ReadFilter
from runtime_core.journal.replay import ReplayEngine
from runtime_core.journal.sqlite.schema import SCHEMA_VERSION, checksum
from tests.helpers.durable_runs import book, config, run_workload, used_bytes
from tests.helpers.polling import wait_for

#: Marginal bytes per run of this workload on SQLite: 1,507 measured with schema 6 (1,843
#: with schema 5, 2,349 with schema 4), plus 10%.
BYTES_PER_RUN_BOUND = 1_660

@pytest.mark.slow
async def test_a_run_costs_at_most_its_bound_in_bytes(tmp_path: Path) -> None:
    sizes = {}
    for runs in (100, 300):
        path = tmp_path / f"j{runs}.db"
        await run_workload(path, runs)
        sizes[runs] = used_bytes(path)
    per_run = (sizes[300] - sizes[100]) / 200
    assert per_run <= BYTES_PER_RUN_BOUND, f"{per_run:.0f} bytes per run"


def _rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn, conn:
        return conn.execute(sql, params).fetchall()


def _as_schema_4(path: Path) -> list[list[dict[str, Any]]]:
    """Rewrite ``path``'s run ends as schema 4 wrote them (the messages kept in each, the
    checksum to match) and mark it schema 4; return those messages, run by run."""
    goals = dict(_rows(  # a start of its own, or the one a first intent carries (schema 9)
        path, "SELECT run_id, coalesce(json_extract(data, '$.identity.goal'), "
              "json_extract(data, '$.started.identity.goal')) FROM entries "
              "WHERE entry_type = 'run_started' OR (entry_type = 'tool_intent' AND "
              "json_type(data, '$.started') = 'object')"))
    kept = []
    with closing(sqlite3.connect(path)) as conn, conn:
        for seq, run_id, text in conn.execute(
                "SELECT seq, run_id, data FROM entries WHERE entry_type = 'run_finished' "
                "ORDER BY seq").fetchall():
            data = json.loads(text)
            assert "messages" not in data  # schema 5 left them out
            data["messages"] = [{"role": "user", "content": goals[run_id]},
                                {"role": "assistant", "content": data["reply"]}]
            kept.append(data["messages"])
            new = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
            conn.execute("UPDATE entries SET data = ?, crc = ? WHERE seq = ?",
                         (new, checksum(new), seq))
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    return kept


async def test_a_schema_4_journal_opens_and_reads_its_conversation_with_new_runs(
        tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await run_workload(path, 2)
    old = _as_schema_4(path)
    process = AgentProcess("bench", config(path), tools=[tool(book, effect="write")])
    await process.start()
    assert process.conversation.messages() == old[0] + old[1]  # recovered from the old shape
    await process.inject(TriggerEvent("bench", "manual", {"ref": "inv-new"}))
    await wait_for(lambda: process.invocation_count == 3)
    now = process.conversation.messages()
    await process.stop()
    assert _rows(path, "SELECT value FROM meta WHERE key = 'schema_version'") == [
        (str(SCHEMA_VERSION),)]
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        ends = await journal.read(ReadFilter(process="bench", entry_type=EntryType.RUN_FINISHED))
        assert ["messages" in e.data for e in ends] == [True, True, False]
        conversation = await ReplayEngine(journal).conversation("bench", 0)
    finally:
        await journal.close()
    assert conversation == now and len(now) == 6
    assert now[:4] == old[0] + old[1] and now[4]["content"].startswith("[Trigger: manual]")
    assert now[5] == {"role": "assistant", "content": "booked"}


async def test_a_runs_entries_leave_out_what_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await run_workload(path, 1)
    data = {kind: json.loads(text) for kind, text in _rows(
        path, "SELECT entry_type, data FROM entries WHERE run_id IS NOT NULL")}
    usage_keys = {k for (t,) in _rows(path, "SELECT data FROM entries WHERE entry_type = "
                                            "'model_usage'") for k in json.loads(t)}
    assert "input_tokens" not in usage_keys  # the scripted model counts none
    assert "updates" not in data["tool_result"]
    assert "links" not in data["tool_result"]["artifacts"][0]
    assert "messages" not in data["run_finished"]
