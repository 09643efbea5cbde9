"""Graceful drain: a stop that lets the runs in flight finish (up to a timeout) while it takes
no new event, then stops as before; a second stop cuts it short."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime_core import AgentProcess, AgentRuntime, JournalConfig, ProcessConfig, TriggerEvent
from runtime_core.agent.tools import tool
from runtime_core.journal import SQLiteJournal
from tests.helpers.events import record
from tests.helpers.polling import wait_for


def writer_config(journal: Path | None = None, **extra: Any) -> ProcessConfig:
    model = {"provider": "scripted", "turns": [
        {"tool_calls": [{"name": "slow_write", "args": {"ref": "$payload.ref"}}]},
        {"reply": "written"}]}
    if journal is not None:
        extra["journal"] = JournalConfig(level="checkpoint", path=str(journal))
    return ProcessConfig(model=model, **extra)


def slow_writer(ledger: list[str], seconds: float) -> Any:
    async def slow_write(ref: str) -> str:
        """A write that takes a while (a payment call, a deploy)."""
        await asyncio.sleep(seconds)
        ledger.append(ref)
        return f"wrote {ref}"

    return tool(slow_write, effect="write")


async def test_a_draining_stop_lets_the_run_in_flight_finish_and_refuses_new_events() -> None:
    ledger: list[str] = []
    process = AgentProcess("p", writer_config(), tools=[slow_writer(ledger, 0.5)])
    events = record(process)
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {"ref": "A"}))
    await process.inject(TriggerEvent("t", "manual", {"ref": "B"}))  # queued, never started
    await wait_for(lambda: len(process.active_runs()) == 1, what="the first run")

    stopping = asyncio.create_task(process.stop(drain_timeout=10))
    await wait_for(lambda: process.status().get("draining") is not None, what="draining")
    status = process.status()
    assert status["state"] == "stopping" and status["draining"]["runs_left"] == 1
    assert 0 < status["draining"]["seconds_left"] <= 10
    # A new event is refused while draining, never half-accepted.
    assert await process.inject(TriggerEvent("t", "manual", {"ref": "C"})) is False

    await stopping
    assert ledger == ["A"]  # the write in flight finished; nothing else started
    runs = process.recent_runs()
    assert [(r.event.payload["ref"], r.state.value) for r in runs] == [("A", "succeeded")]
    letters = {d["event"].payload["ref"]: d["reason"] for d in process.dead_letters}
    assert letters == {"B": "process stopped", "C": "process stopped"}
    assert process.status().get("draining") is None and process.state.value == "stopped"
    assert [e.kind for e in events if e.kind == "process.draining"] == ["process.draining"]


async def test_what_is_still_running_at_the_deadline_is_cancelled() -> None:
    ledger: list[str] = []
    process = AgentProcess("p", writer_config(), tools=[slow_writer(ledger, 30)])
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {"ref": "A"}))
    await wait_for(lambda: len(process.active_runs()) == 1)
    began = time.monotonic()
    await process.stop(drain_timeout=0.3)
    assert 0.25 <= time.monotonic() - began < 5
    assert ledger == [] and process.recent_runs()[-1].state.value == "cancelled"
    assert process.dead_letters[-1]["reason"] == "process stopped"


async def test_the_config_drain_timeout_is_the_default_and_a_second_stop_cuts_it() -> None:
    ledger: list[str] = []
    process = AgentProcess("p", writer_config(drain_timeout=60),
                           tools=[slow_writer(ledger, 30)])
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {"ref": "A"}))
    await wait_for(lambda: len(process.active_runs()) == 1)
    stopping = asyncio.create_task(process.stop())  # drains: the config says 60 s
    await wait_for(lambda: process.status().get("draining") is not None)
    began = time.monotonic()
    await process.stop(drain_timeout=0)  # an operator who will not wait
    await asyncio.wait_for(stopping, 5)
    assert time.monotonic() - began < 5 and process.state.value == "stopped"
    assert ledger == [] and process.recent_runs()[-1].state.value == "cancelled"


async def test_without_a_drain_stop_cancels_at_once_as_the_spec_says() -> None:
    ledger: list[str] = []
    process = AgentProcess("p", writer_config(), tools=[slow_writer(ledger, 30)])
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {"ref": "A"}))
    await wait_for(lambda: len(process.active_runs()) == 1)
    began = time.monotonic()
    await process.stop()
    assert time.monotonic() - began < 2 and ledger == []


async def test_a_negative_drain_is_refused() -> None:
    process = AgentProcess("p", writer_config(), tools=[slow_writer([], 0)])
    await process.start()
    with pytest.raises(ValueError, match="drain_timeout"):
        await process.stop(drain_timeout=-1)
    await process.stop()


async def test_a_webhook_answers_503_while_its_process_drains() -> None:
    ledger: list[str] = []
    config = writer_config(triggers=[{"type": "webhook", "webhook_host": "127.0.0.1",
                                      "webhook_port": 0, "webhook_path": "/hook"}])
    process = AgentProcess("p", config, tools=[slow_writer(ledger, 1.0)])
    await process.start()
    port = process.status()["triggers"][0]["port"]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        first = await client.post("/hook", json={"ref": "A"})
        assert first.status_code == 202
        await wait_for(lambda: len(process.active_runs()) == 1)
        stopping = asyncio.create_task(process.stop(drain_timeout=10))
        await wait_for(lambda: process.status().get("draining") is not None)
        refused = await client.post("/hook", json={"ref": "B"})
        assert refused.status_code == 503 and "Retry-After" in refused.headers
        assert "stopping" in refused.json()["message"]
        await stopping
    assert ledger == ["A"]


@pytest.mark.slow
async def test_a_draining_shutdown_leaves_nothing_to_reconcile(tmp_path: Path) -> None:
    """A service restart (SIGTERM) with a drain: the write in flight completes and is
    journaled, so the next start has no run waiting for an operator."""
    ledger: list[str] = []
    journal = tmp_path / "journal.db"
    runtime = AgentRuntime()
    runtime.add_process("p", writer_config(journal), tools=[slow_writer(ledger, 1.5)])
    await runtime.start_all()
    process = runtime.get_process("p")
    await process.inject(TriggerEvent("t", "manual", {"ref": "A"}))
    await process.inject(TriggerEvent("t", "manual", {"ref": "B"}))  # kept for the next start
    await wait_for(lambda: len(process.active_runs()) == 1)
    counts = await runtime.shutdown(drain_timeout=10)
    assert ledger == ["A"] and counts["p"]["pending"] == 1

    again = AgentRuntime()
    again.add_process("p", writer_config(journal), tools=[slow_writer(ledger, 0)])
    await again.start_all()
    resumed = again.get_process("p")
    assert resumed.waiting_runs() == []
    await wait_for(lambda: ledger == ["A", "B"], what="the kept event to run")
    await again.close()
    reader = SQLiteJournal(journal)
    await reader.open()
    try:
        assert await reader.open_runs("p") == []
    finally:
        await reader.close()
