"""Forking a process that has triggers: the fork starts without them unless asked; asked, a
trigger that cannot be served (its webhook path taken) is a CONFLICT that names it, and a fork
that fails leaves nothing behind: no process in the runtime, no journal entry under its name,
so the same name can be used again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from runtime_core import AgentProcess, AgentRuntime, TriggerEvent
from runtime_core.control import LocalControl, RemoteControl
from runtime_core.control.plane import ControlError
from runtime_core.journal.provider import ReadFilter
from runtime_core.triggers.registry import trigger_id_for
from tests.helpers.polling import wait_for
from tests.helpers.ports import free_port
from tests.helpers.serving import TOKEN, served


def hooked(port: int) -> dict[str, Any]:
    return {"model": {"provider": "scripted", "turns": [{"reply": "Noted."}]},
            "journal": {"level": "checkpoint", "backend": "memory"},
            "triggers": [{"type": "webhook", "webhook_host": "127.0.0.1",
                          "webhook_port": port, "webhook_path": "/alerts"},
                         {"type": "interval", "seconds": 3600}]}


@pytest.fixture
async def parent() -> AsyncIterator[tuple[LocalControl, AgentProcess, str]]:
    """A running process with a webhook on a fixed port, one run journaled: the control, the
    process and an entry to fork from."""
    runtime = AgentRuntime()
    process = runtime.add_process("alerts", hooked(free_port()))
    control = LocalControl(runtime, name="t")
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {"n": 1}))
    await wait_for(lambda: process.invocation_count == 1)
    entry = (await control.journal_entries("alerts", entry_type="event_accepted"))[-1]
    try:
        yield control, process, entry.entry_id
    finally:
        await runtime.close()


async def journaled(process: AgentProcess, name: str) -> int:
    assert process.journal is not None
    await process.journal.flush()
    return len(await process.journal.read(ReadFilter(process=name)))


async def test_a_fork_starts_without_the_parents_triggers(
        parent: tuple[LocalControl, AgentProcess, str]) -> None:
    control, process, entry_id = parent
    assert await control.fork("alerts", entry_id, "alerts-retry") == "alerts-retry"
    child = control.runtime.get_process("alerts-retry")
    assert child.state.value == "running"
    assert await control.triggers("alerts-retry") == []
    assert len(await control.triggers("alerts")) == 2  # the parent still serves its webhook
    port = process.status()["triggers"][0]["port"]
    async with httpx.AsyncClient(trust_env=False) as client:
        answer = await client.post(f"http://127.0.0.1:{port}/alerts", json={"n": 2})
    assert answer.status_code == 202


async def test_with_triggers_a_taken_webhook_is_a_conflict_and_nothing_is_left(
        parent: tuple[LocalControl, AgentProcess, str]) -> None:
    control, process, entry_id = parent
    webhook = trigger_id_for(process.config.triggers[0])
    with pytest.raises(ControlError) as refused:
        await control.fork("alerts", entry_id, "alerts-copy", with_triggers=True)
    assert refused.value.code == "CONFLICT"
    assert webhook in str(refused.value) and "/alerts" in str(refused.value)
    assert "alerts-copy" not in control.runtime.processes
    assert await journaled(process, "alerts-copy") == 0  # nothing journaled under its name
    assert process.state.value == "running" and len(await control.triggers("alerts")) == 2
    # Nothing was left behind: the same name forks, without the triggers.
    assert await control.fork("alerts", entry_id, "alerts-copy") == "alerts-copy"
    assert await journaled(process, "alerts-copy") >= 2  # forked, checkpoint


async def test_with_triggers_on_free_addresses_the_fork_serves_its_own() -> None:
    runtime = AgentRuntime()
    config = hooked(0)  # port 0: each webhook an ephemeral server of its own
    process = runtime.add_process("alerts", config)
    control = LocalControl(runtime, name="t")
    try:
        await process.start()
        await process.inject(TriggerEvent("t", "manual", {"n": 1}))
        await wait_for(lambda: process.invocation_count == 1)
        entry = (await control.journal_entries("alerts", entry_type="event_accepted"))[-1]
        await control.fork("alerts", entry.entry_id, "alerts-twin", with_triggers=True)
        twin = await control.triggers("alerts-twin")
        assert [t["type"] for t in twin] == ["webhook", "interval"]
        assert twin[0]["port"] != process.status()["triggers"][0]["port"]
    finally:
        await runtime.close()


async def test_a_fork_that_fails_to_start_is_removed(
        parent: tuple[LocalControl, AgentProcess, str], monkeypatch: pytest.MonkeyPatch) -> None:
    control, process, entry_id = parent
    start = AgentProcess.start

    async def failing(self: AgentProcess) -> None:
        if self.name == "alerts-broken":
            raise OSError("address in use")
        await start(self)

    monkeypatch.setattr(AgentProcess, "start", failing)
    with pytest.raises(ControlError, match="did not start and was removed: address in use"):
        await control.fork("alerts", entry_id, "alerts-broken")
    assert "alerts-broken" not in control.runtime.processes
    assert process.state.value == "running"


@pytest.mark.slow
async def test_the_api_and_remote_control_carry_with_triggers() -> None:
    runtime = AgentRuntime()
    process = runtime.add_process("alerts", hooked(free_port()))
    async with served(runtime) as url:
        await process.inject(TriggerEvent("t", "manual", {"n": 1}))
        await wait_for(lambda: process.invocation_count == 1)
        remote = RemoteControl(url, token=TOKEN)
        try:
            entry = (await remote.journal_entries("alerts", entry_type="event_accepted"))[-1]
            async with httpx.AsyncClient(base_url=f"{url}/api/v1", trust_env=False, headers={
                    "Authorization": f"Bearer {TOKEN}"}) as client:
                clash = await client.post("/processes/alerts/fork", json={
                    "entry_id": entry.entry_id, "new_name": "copy", "with_triggers": True})
            assert clash.status_code == 409, clash.text
            error = clash.json()["error"]
            assert error["code"] == "CONFLICT" and "webhook" in error["message"]
            assert "copy" not in runtime.processes
            with pytest.raises(ControlError) as refused:
                await remote.fork("alerts", entry.entry_id, "copy", with_triggers=True)
            assert refused.value.code == "CONFLICT"
            assert await remote.fork("alerts", entry.entry_id, "copy") == "copy"
            assert await remote.triggers("copy") == []
        finally:
            await remote.close()
