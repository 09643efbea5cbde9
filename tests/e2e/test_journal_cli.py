"""``promptui logs`` / ``journal export`` / ``journal verify`` on real journal files, and what a
process does with a journal file it cannot read."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from runtime_core import AgentProcess, ProcessConfig, ProcessState, TriggerEvent
from runtime_core.journal import DamagedJournal
from tests.helpers.cli import promptui_command, run_promptui
from tests.helpers.polling import wait_for


async def make_journal(path: Path, name: str = "demo", events: int = 3) -> None:
    config = ProcessConfig(model={"turns": [{"reply": "hi"}]},
                           journal={"level": "checkpoint", "path": str(path)})
    async with AgentProcess(name, config) as process:
        target = process.invocation_count + events  # a reused journal recovers the count
        for i in range(events):
            await process.inject(TriggerEvent("t", "manual", {"i": i}))
        await wait_for(lambda: process.invocation_count == target)


@pytest.mark.slow
async def test_logs_shows_recent_entries_and_filters(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    await make_journal(db)
    out = run_promptui("logs", "demo", "-n", "4", "-j", str(db))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 4
    seqs = [int(line.split()[0]) for line in lines]
    assert seqs == sorted(seqs)
    # A clean stop ends with its checkpoint, then the STOPPED transition (the spec's order)
    last_two = run_promptui("logs", "demo", "-n", "2", "--json", "-j", str(db))
    tail = [json.loads(line) for line in last_two.stdout.splitlines()]
    assert [row["entry_type"] for row in tail] == ["checkpoint", "state_transition"]
    assert tail[1]["data"]["to_state"] == "stopped"
    finished = run_promptui("logs", "demo", "--type", "run_finished", "--json", "-j", str(db))
    rows = [json.loads(line) for line in finished.stdout.splitlines()]
    assert len(rows) == 3 and {r["entry_type"] for r in rows} == {"run_finished"}
    assert rows[0]["entry_id"] == f"demo:{rows[0]['seq']}"


@pytest.mark.slow
async def test_logs_errors_name_the_fix(tmp_path: Path) -> None:
    out = run_promptui("logs", "demo", "-j", str(tmp_path / "missing.db"))
    assert out.returncode == 2 and "no journal at" in out.stderr
    db = tmp_path / "j.db"
    await make_journal(db)
    out = run_promptui("logs", "other", "-j", str(db))
    assert out.returncode == 2 and "processes: demo" in out.stderr


@pytest.mark.slow
async def test_logs_follow_really_follows(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    await make_journal(db, events=1)
    follower = subprocess.Popen([*promptui_command(), "logs", "demo", "-n", "1", "-f", "-j",
                                 str(db), "--type", "run_finished"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert follower.stdout is not None
        first = follower.stdout.readline()
        assert "run_finished" in first
        await make_journal(db, events=2)  # a new process object appends to the same journal
        seen = [follower.stdout.readline(), follower.stdout.readline()]
        assert all("run_finished" in line for line in seen)
        assert int(seen[-1].split()[0]) > int(first.split()[0])
    finally:
        follower.kill()
        follower.wait(10)


@pytest.mark.slow
async def test_export_writes_every_entry_as_json_lines(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    await make_journal(db, events=5)
    out = run_promptui("journal", "export", "demo", "-j", str(db))
    assert out.returncode == 0
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))
    assert sum(r["entry_type"] == "event_accepted" for r in rows) == 5


@pytest.mark.slow
async def test_verify_reports_sound_and_damaged_journals(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    await make_journal(db)
    ok = run_promptui("journal", "verify", "-j", str(db))
    assert ok.returncode == 0 and "is sound" in ok.stdout
    conn = sqlite3.connect(db)
    conn.execute("UPDATE entries SET data = '{\"tampered\":1}' WHERE process='demo' AND seq=5")
    conn.execute("DELETE FROM entries WHERE process='demo' AND seq=9")
    conn.commit()
    conn.close()
    bad = run_promptui("journal", "verify", "-j", str(db))
    assert bad.returncode == 1
    assert "entry demo:5" in bad.stdout and "checksum" in bad.stdout
    assert "breaks at entry demo:10" in bad.stdout
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all")
    out = run_promptui("journal", "verify", "-j", str(garbage))
    assert out.returncode == 1 and "not an SQLite journal" in out.stdout


async def test_an_unreadable_journal_refuses_the_start_naming_the_salvage(tmp_path: Path
                                                                         ) -> None:
    db = tmp_path / "j.db"
    db.write_bytes(b"garbage that must not be deleted")
    for setting in ({}, {"recover_on_start": "strict"}):
        config = ProcessConfig(journal={"level": "checkpoint", "path": str(db), **setting})
        process = AgentProcess("p", config)
        with pytest.raises(DamagedJournal, match="cannot be read") as refused:
            await process.start()
        assert f"'promptui journal salvage {db}'" in str(refused.value)
        assert process.state is ProcessState.FAILED
    assert db.read_bytes() == b"garbage that must not be deleted"
    assert not list(tmp_path.glob("*.damaged-*"))


async def test_on_damage_start_fresh_moves_it_aside_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    db.write_bytes(b"garbage that must not be deleted")
    config = ProcessConfig(journal={"level": "checkpoint", "path": str(db),
                                    "on_damage": "start_fresh"})
    process = AgentProcess("p", config)
    sub = process.notifier.subscribe(kinds=["journal.damaged"])
    await process.start()
    assert process.state is ProcessState.RUNNING
    damaged = sub.drain()
    assert len(damaged) == 1 and damaged[0].severity == "critical"
    moved = Path(damaged[0].to_dict()["moved_to"])
    assert ".damaged-" in moved.name and moved.read_bytes() == b"garbage that must not be deleted"
    [left] = process.status()["journal_left_behind"]
    assert f"left behind at {moved}" in left and "promptui journal salvage" in left
    await process.close()


@pytest.mark.slow
def test_cli_module_is_importable_without_a_terminal() -> None:
    out = subprocess.run([sys.executable, "-c", "import promptui.cli"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
