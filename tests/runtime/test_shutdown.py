"""Shutting down for a service restart (what SIGTERM does to 'promptui serve'): unlike stop(),
nothing queued or in flight is dead-lettered; the next start on the same journal takes it all
back, in order, and runs each event once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from promptui.cli import app
from runtime_core import AgentRuntime, ProcessConfig, TriggerEvent, tool
from tests.helpers.polling import wait_for

calls: list[str] = []
gates: list[asyncio.Event] = []  # one per test: an Event belongs to the loop that waits on it


async def slow_lookup(key: str) -> str:
    calls.append(key)
    if key == "hold":
        await gates[-1].wait()
    return f"found {key}"


def runtime_on(journal: Path) -> AgentRuntime:
    runtime = AgentRuntime()
    runtime.add_process("worker", ProcessConfig(
        model={"turns": [{"tool_calls": [{"name": "slow_lookup",
                                          "args": {"key": "$payload.key"}}]},
                         {"reply": "done"}]},
        journal={"level": "checkpoint", "backend": "sqlite", "path": str(journal)}),
        tools=[tool(slow_lookup, effect="read")])
    return runtime


async def test_shutdown_leaves_queue_and_run_in_flight_to_the_next_start(tmp_path: Path
                                                                         ) -> None:
    journal = tmp_path / "journal.db"
    calls.clear()
    gates.append(asyncio.Event())
    first = runtime_on(journal)
    await first.start_all()
    process = first.get_process("worker")
    events = [TriggerEvent("t", "manual", {"key": key}, event_id=f"e-{key}")
              for key in ("hold", "a", "b", "c")]
    for event in events:
        assert await process.inject(event)
    await wait_for(lambda: calls == ["hold"], what="the first run inside its tool")
    counts = await first.shutdown()
    assert counts == {"worker": {"pending": 4, "dead_letters": 0}}
    assert process.state.value == "stopped"
    assert not await process.inject(TriggerEvent("t", "manual", {"key": "late"}))
    # The journal says where it was sealed; 'promptui status' without a server shows it.
    shown = CliRunner().invoke(app, ["status", "--json", "--journal", str(journal)])
    assert shown.exit_code == 0, shown.output
    [row] = json.loads(shown.stdout)["processes"]
    assert row["last_state"] == "shut down (4 pending)"

    gates[-1].set()  # a tool call from here on returns at once
    second = runtime_on(journal)
    await second.start_all()
    again = second.get_process("worker")
    try:
        await wait_for(lambda: sorted(r.event.event_id for r in again.recent_runs()
                                        if r.state.value == "succeeded")
                       == sorted(e.event_id for e in events), what="all four run")
        assert again.dead_letters == []
        assert calls[1:] == ["a", "b", "c"]  # the interrupted read is not called again (the
        # model is told it was interrupted), then the queue runs in its order
        finished: list[Any] = [r.event.event_id for r in again.recent_runs()]
        assert finished == [e.event_id for e in events]
    finally:
        await second.close()


async def test_stop_still_dead_letters_what_has_not_run(tmp_path: Path) -> None:
    calls.clear()
    gates.append(asyncio.Event())
    runtime = runtime_on(tmp_path / "journal.db")
    await runtime.start_all()
    process = runtime.get_process("worker")
    for key in ("hold", "a"):
        await process.inject(TriggerEvent("t", "manual", {"key": key}))
    await wait_for(lambda: calls == ["hold"], what="the first run inside its tool")
    await runtime.close()
    assert sorted(d["reason"] for d in process.dead_letters) == ["process stopped"] * 2
