"""``promptui incidents`` on a journal file a test wrote through real webhook requests: the JSON
listing, the table, and errors that name the fix."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from runtime_core import AgentProcess, ProcessConfig
from tests.helpers.cli import run_promptui
from tests.helpers.polling import wait_for

pytestmark = pytest.mark.slow


async def write_journal(path: Path) -> AgentProcess:
    config = ProcessConfig(
        model={"turns": [{"reply": "paged"}]},
        triggers=[{"type": "webhook", "webhook_port": 0, "webhook_path": "/alerts"}],
        incidents={"fingerprint": "payload.alert"},
        journal={"level": "checkpoint", "path": str(path)})
    async with AgentProcess("alerts", config) as process:
        url = f"http://127.0.0.1:{process.status()['triggers'][0]['port']}/alerts"
        async with httpx.AsyncClient(trust_env=False) as client:
            for payload in ({"alert": "disk full", "host": "db-1"},
                            {"alert": "disk full", "host": "db-2"}, {"alert": "cpu hot"}):
                assert (await client.post(url, json=payload)).status_code == 202
        await wait_for(lambda: process.invocation_count == 2)
        await wait_for(lambda: all(i.run_ids for i in process.incidents()))
        cpu = process.incidents()[1]
        await process.resolve_incident(cpu.incident_id, generation=1, version=cpu.version,
                                       note="cooled down")
    return process


async def test_incidents_json_lists_what_the_journal_holds(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    process = await write_journal(db)
    out = run_promptui("incidents", "--json", "--journal", str(db))
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [(r["process"], r["fingerprint_value"], r["state"]) for r in rows] == [
        ("alerts", "disk full", "open"), ("alerts", "cpu hot", "resolved")]
    disk, cpu = rows
    assert disk["occurrences"] == 2 and disk["generation"] == 1 and len(disk["run_ids"]) == 1
    assert [h["payload"]["host"] for h in disk["payload_history"]] == ["db-1", "db-2"]
    assert (cpu["resolved_by"], cpu["note"]) == ("operator", "cooled down")
    live = {i.incident_id: i.to_dict() for i in process.incidents()}
    assert all({k: v for k, v in row.items() if k != "process"} == live[row["incident_id"]]
               for row in rows)
    only = run_promptui("incidents", "--json", "-p", "alerts", "-j", str(db))
    assert json.loads(only.stdout) == rows


async def test_incidents_table_and_errors(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    await write_journal(db)
    table = run_promptui("incidents", "-j", str(db), "--wide")  # the tests pin COLUMNS=80
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert "fingerprint" in lines[0] and "occ" in lines[0]
    assert "open" in lines[1] and "disk full" in lines[1]
    assert "resolved" in lines[2] and "cpu hot" in lines[2]
    missing = run_promptui("incidents", "-j", str(tmp_path / "none.db"))
    assert missing.returncode == 2 and "no journal at" in missing.stderr
    other = run_promptui("incidents", "-p", "nope", "-j", str(db))
    assert other.returncode == 2 and "processes: alerts" in other.stderr
