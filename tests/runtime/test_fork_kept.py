"""A fork survives a restart of its host (issue 36): its journal's ``forked`` entry names its
parent, and the next start_all (serve, run, the room) takes it back beside the parent, with
its name, id, state and what it ran, and without the parent's triggers unless it was forked
with them."""

from __future__ import annotations

from pathlib import Path

from runtime_core import AgentRuntime, ProcessConfig, TriggerEvent
from runtime_core.control import LocalControl
from tests.helpers.polling import wait_for


def runtime_on(journal: Path) -> tuple[AgentRuntime, LocalControl]:
    """A host's runtime: what the manifests declare (the parent only), over one journal."""
    runtime = AgentRuntime()
    runtime.add_process("alerts", ProcessConfig(
        model={"provider": "scripted", "turns": [{"reply": "Noted."}]},
        triggers=[{"type": "interval", "seconds": 3600}],
        journal={"level": "checkpoint", "backend": "sqlite", "path": str(journal)}))
    return runtime, LocalControl(runtime, name="t")


async def test_a_fork_is_back_after_a_restart(tmp_path: Path) -> None:
    journal = tmp_path / "j.db"
    runtime, control = runtime_on(journal)
    await control.start_all()
    parent = runtime.get_process("alerts")
    await parent.inject(TriggerEvent("t", "manual", {"n": 1}))
    await wait_for(lambda: parent.invocation_count == 1)
    entry = (await control.journal_entries("alerts", entry_type="event_accepted"))[-1]
    await control.fork("alerts", entry.entry_id, "alerts-retry")
    child = runtime.get_process("alerts-retry")
    child_id = child.process_id
    await child.inject(TriggerEvent("t", "manual", {"n": 2}))
    await wait_for(lambda: child.invocation_count == 1)
    await runtime.shutdown()

    runtime, control = runtime_on(journal)  # a restart: the manifests know no fork
    await control.start_all()
    names = [row.name for row in await control.list_processes()]
    assert names == ["alerts", "alerts-retry"]
    child = runtime.get_process("alerts-retry")
    assert child.state.value == "running" and child.process_id == child_id
    assert child.invocation_count == 1  # what it ran is its own, from its journal
    assert child.status()["trigger_count"] == 0  # forked without the parent's triggers
    timeline = await control.journal_entries("alerts-retry", entry_type="forked")
    assert len(timeline) == 1  # taken back, not forked again
    await runtime.shutdown()
