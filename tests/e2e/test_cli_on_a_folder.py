"""``promptui journal verify``, ``logs``, ``status`` and ``journal export`` on a folder path, as
``serve --journal FOLDER`` takes it (issue 32): the journal a start keeps there (``journal.db``)
is read; a reference FileJournal folder not imported yet, or an empty folder, is a one-line
error, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from tests.helpers.cli import run_promptui
from tests.helpers.polling import wait_for

pytestmark = pytest.mark.slow

READS = (("journal", "verify"), ("logs", "demo"), ("status",), ("journal", "export", "demo"))


async def journal_in_folder(folder: Path, events: int = 2) -> None:
    """What a start given the folder as its journal path writes (``folder/journal.db``)."""
    config = ProcessConfig(model={"turns": [{"reply": "hi"}]},
                           journal={"level": "checkpoint", "path": str(folder)})
    async with AgentProcess("demo", config) as process:
        for i in range(events):
            await process.inject(TriggerEvent("t", "manual", {"i": i}))
        await wait_for(lambda: process.invocation_count == events)


def one_line_error(result: object) -> str:
    stderr = getattr(result, "stderr", "")
    assert "Traceback" not in stderr and "Error:" not in stderr.replace("error:", ""), stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), stderr
    return lines[0]


async def test_the_readers_read_the_journal_a_start_keeps_in_the_folder(
        tmp_path: Path) -> None:
    folder = tmp_path / "journal"
    await journal_in_folder(folder)
    assert (folder / "journal.db").is_file()
    verified = run_promptui("journal", "verify", "-j", str(folder))
    assert verified.returncode == 0, verified.stderr
    assert "demo:" in verified.stdout and "is sound" in verified.stdout
    logs = run_promptui("logs", "demo", "-n", "3", "-j", str(folder))
    assert logs.returncode == 0, logs.stderr
    assert len(logs.stdout.splitlines()) == 3
    status = run_promptui("status", "--json", "-j", str(folder))
    assert status.returncode == 0, status.stderr
    assert [row["name"] for row in json.loads(status.stdout)["processes"]] == ["demo"]
    exported = run_promptui("journal", "export", "demo", "-j", str(folder))
    assert exported.returncode == 0, exported.stderr
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert sum(row["entry_type"] == "run_finished" for row in rows) == 2


@pytest.mark.parametrize("command", READS, ids=lambda c: " ".join(c))
def test_a_reference_folder_not_imported_is_one_line_naming_the_import(
        tmp_path: Path, command: tuple[str, ...]) -> None:
    folder = tmp_path / "journal"  # promptise's FileJournal(base_path=...) directory
    folder.mkdir()
    entry = {"entry_id": "e1", "process_id": "demo", "timestamp": 1.0,
             "entry_type": "state_transition", "data": {"to_state": "running"}}
    (folder / "demo.jsonl").write_text(json.dumps(entry) + "\n")
    result = run_promptui(*command, "-j", str(folder))
    assert result.returncode == 2
    line = one_line_error(result)
    assert "reference FileJournal folder" in line
    assert f"promptui journal import {folder}" in line


@pytest.mark.parametrize("command", READS, ids=lambda c: " ".join(c))
def test_an_empty_folder_is_no_journal_there(tmp_path: Path, command: tuple[str, ...]) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    result = run_promptui(*command, "-j", str(folder))
    assert result.returncode != 0
    text = result.stdout + result.stderr
    assert "Traceback" not in text and "IsADirectoryError" not in text
    assert f"no journal at {folder / 'journal.db'}" in text
