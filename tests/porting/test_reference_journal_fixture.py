"""A journal written by the real reference runtime (promptise 1.10.1, see
reference_journal/README.md) imports whole: the context, the invocation count, the conversation
(the reference's checkpoints wrap their state as ``{"state": ...}``), the dead letter, and the
run the crash cut short; from the JSONL file alone as well as with the checkpoint file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runtime_core import AgentProcess, ProcessConfig
from runtime_core.journal import SQLiteJournal
from runtime_core.journal.reference.importer import import_reference
from tests.helpers.cli import run_promptui
from tests.helpers.polling import wait_for

FIXTURE = Path(__file__).parent / "reference_journal"
NAME = "order-desk"
CHECKPOINT = json.loads((FIXTURE / f"{NAME}.checkpoint.json").read_text())


def copy_fixture(target: Path, *, with_checkpoint_file: bool) -> Path:
    target.mkdir()
    shutil.copy(FIXTURE / f"{NAME}.jsonl", target)
    if with_checkpoint_file:
        shutil.copy(FIXTURE / f"{NAME}.checkpoint.json", target)
    return target


def config(journal: Path) -> ProcessConfig:
    return ProcessConfig(model={"provider": "scripted", "turns": [{"reply": "Order A-5 done."}]},
                         journal={"level": "checkpoint", "path": str(journal)})


def test_the_fixture_is_what_the_reference_wrote() -> None:
    lines = [json.loads(line) for line in (FIXTURE / f"{NAME}.jsonl").read_text().splitlines()]
    checkpoints = [line["data"] for line in lines if line["entry_type"] == "checkpoint"]
    assert len(checkpoints) == 3 and all(set(c) == {"state"} for c in checkpoints)
    assert checkpoints[-1]["state"] == CHECKPOINT
    assert len(CHECKPOINT["conversation"]) == 6 and CHECKPOINT["invocation_count"] == 3
    assert lines[-1]["entry_type"] == "invocation_start"  # the crash cut the fifth run


@pytest.mark.parametrize("with_checkpoint_file", [True, False],
                         ids=["jsonl-and-checkpoint-file", "jsonl-only"])
async def test_a_reference_journal_imports_whole(tmp_path: Path, with_checkpoint_file: bool
                                                 ) -> None:
    source = copy_fixture(tmp_path / "ref", with_checkpoint_file=with_checkpoint_file)
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    await journal.open()
    report = await import_reference(journal, source)
    await journal.close()
    (row,) = report.processes
    assert row.status == "imported"
    assert "state" not in row.dropped_keys
    assert (row.checkpoints, row.dead_letters, row.conversation_messages) == (3, 1, 6)

    process = AgentProcess(NAME, config(path))
    await process.start()
    try:
        assert process.context.state_snapshot() == {"desk": "north", "orders_seen": 1}
        assert process.invocation_count >= 3
        messages = process.conversation.messages()
        assert messages[:6] == CHECKPOINT["conversation"]
        assert [d["reason"] for d in process.dead_letters] == ["retries exhausted"]
        # The run the crash cut short (its model had not answered) runs again, once.
        await wait_for(lambda: process.invocation_count == 4)
        assert process.conversation.messages()[-1]["content"] == "Order A-5 done."
    finally:
        await process.stop()


@pytest.mark.slow
def test_the_command_reports_the_conversation(tmp_path: Path) -> None:
    source = copy_fixture(tmp_path / "ref", with_checkpoint_file=False)
    done = run_promptui("journal", "import", str(source), "--journal",
                        str(tmp_path / "journal.db"), "--json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["processes"]
    assert row["conversation_messages"] == 6 and row["context_keys"] == ["desk", "orders_seen"]
    assert row["dead_letters"] == 1 and "state" not in row["dropped_keys"]
