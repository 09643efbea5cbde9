"""A dead letter of an accepted event is never silently evicted: the process lists the newest
``dead_letter_size``, the journal keeps every one until it is redelivered or cleared, and the
control plane (in process and over HTTP) and the CLI page through all of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime_core import AgentProcess, AgentRuntime, ProcessConfig, TriggerEvent
from runtime_core.agent.model import ModelRequest, ModelTurn
from runtime_core.control import LocalControl, RemoteControl
from tests.helpers.polling import wait_for
from tests.helpers.serving import TOKEN, served

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


class BrokenModel:
    name = "broken"

    async def complete(self, request: ModelRequest) -> ModelTurn:
        raise ConnectionError("the model is down")


def config(db: Path) -> ProcessConfig:
    return ProcessConfig(journal={"level": "checkpoint", "path": str(db)},
                         trigger_delivery={"max_retries": 0, "dead_letter_size": 5},
                         max_consecutive_failures=1000)


async def fail_events(process: AgentProcess, count: int) -> list[str]:
    ids = [f"ev-{n:02d}" for n in range(count)]
    for event_id in ids:
        assert await process.inject(TriggerEvent("t", "manual", {"n": event_id},
                                                 event_id=event_id))
    await wait_for(lambda: process.status()["dead_letter_total"] == count, timeout=20)
    return ids


async def test_the_journal_keeps_every_dead_letter_and_pages_through_them(
        tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    runtime = AgentRuntime()
    process = runtime.add_process("flaky", config(db), model=BrokenModel())
    control = LocalControl(runtime)
    await runtime.start_all()
    try:
        ids = await fail_events(process, 12)
        assert [d["event"].event_id for d in process.dead_letters] == ids[-5:]  # the newest
        every = await control.dead_letters("flaky")
        assert [d.event_id for d in every] == ids  # all twelve, oldest first
        page = await control.dead_letters("flaky", offset=10, limit=5)
        assert [d.event_id for d in page] == ids[10:]
        summary = next(s for s in await control.list_processes() if s.name == "flaky")
        assert summary.dead_letters == 12
    finally:
        await runtime.stop_all()
        await process.close()

    # A new runtime on the same journal: the count and the pages come back, and a letter only
    # the journal still keeps (the oldest) can be redelivered by its id.
    runtime = AgentRuntime()
    again = runtime.add_process("flaky", config(db), model=BrokenModel())
    control = LocalControl(runtime)
    await runtime.start_all()
    try:
        assert again.status()["dead_letter_total"] == 12
        assert len(again.dead_letters) == 5
        assert await control.redeliver("flaky", ["ev-00"]) == 1
        # it ran again, failed again: dead-lettered once more, now the newest
        await wait_for(lambda: again.dead_letters[-1]["event"].event_id == "ev-00"
                       and again.status()["dead_letter_total"] == 12, timeout=20)
        listed = [d.event_id for d in await control.dead_letters("flaky")]
        assert listed == [*ids[1:], "ev-00"]
        async with served(runtime) as url:
            remote = RemoteControl(url, token=TOKEN)
            try:
                pages = [await remote.dead_letters("flaky", offset=o, limit=5)
                         for o in (0, 5, 10)]
            finally:
                await remote.close()
        assert [d.event_id for p in pages for d in p] == listed
        assert await control.clear_dead_letters("flaky") == 12
        assert await control.dead_letters("flaky") == []
    finally:
        await runtime.stop_all()
        await again.close()


async def test_the_cli_lists_every_dead_letter_of_a_journal(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    process = AgentProcess("flaky", config(db), model=BrokenModel())
    await process.start()
    try:
        ids = await fail_events(process, 8)
    finally:
        await process.close()
    done = subprocess.run([sys.executable, "-m", "promptui.cli", "dead-letters", "flaky",
                           "--json", "--journal", str(db)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert [d["event_id"] for d in json.loads(done.stdout)] == ids
