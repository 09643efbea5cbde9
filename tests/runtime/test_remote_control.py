"""RemoteControl against a real HTTP control API: the same answers as LocalControl, errors as
ControlError, events over SSE, and a server that goes away and comes back."""

from __future__ import annotations

from typing import Any

import pytest

from runtime_core import AgentRuntime, ProcessConfig, TriggerEvent
from runtime_core.control import ControlError, LocalControl, ReadOnlyError, RemoteControl
from runtime_core.events import RunFinished
from tests.helpers.polling import wait_for
from tests.helpers.ports import free_port
from tests.helpers.serving import TOKEN, served

pytestmark = pytest.mark.slow

FAIL = "boom: upstream said no"


def make_runtime(journal: str | None = None) -> AgentRuntime:
    runtime = AgentRuntime()
    runtime.add_process("worker", ProcessConfig(
        model={"provider": "scripted", "scripts": {"fail": [{"raise": FAIL}]},
               "turns": [{"reply": "done"}]},
        trigger_delivery={"max_retries": 0}, max_consecutive_failures=100,
        journal={"level": "checkpoint", "backend": "sqlite", "path": journal}
        if journal else {"level": "checkpoint", "backend": "memory"},
        health={"enabled": True}))
    return runtime


async def test_remote_reads_match_local_ones() -> None:
    runtime = make_runtime()
    async with served(runtime) as url:
        remote = RemoteControl(url, token=TOKEN)
        local = LocalControl(runtime, name="t")
        try:
            await remote.start_all()
            assert remote.name == f"t @ {url.removeprefix('http://')}"
            process = runtime.get_process("worker")
            await process.inject(TriggerEvent("t", "manual", {"n": 1}))
            await process.inject(TriggerEvent("t", "fail", {"n": 2}, event_id="dead-1"))
            await wait_for(lambda: len(process.dead_letters) == 1, what="a dead letter")
            await wait_for(lambda: not process.active_runs(), what="runs done")
            assert await remote.list_processes() == await local.list_processes()
            assert await remote.process_detail("worker") == await local.process_detail("worker")
            assert await remote.journal_entries("worker", limit=5) == \
                await local.journal_entries("worker", limit=5)
            newest = (await remote.journal_entries("worker", limit=1))[0].seq
            assert await remote.journal_entries("worker", after_seq=newest) == []
            entry = (await remote.journal_entries("worker", entry_type="event_accepted"))[-1]
            assert await remote.rewind_plan("worker", entry.entry_id) == \
                await local.rewind_plan("worker", entry.entry_id)
            assert [d.event_id for d in await remote.dead_letters("worker")] == ["dead-1"]
            assert await remote.health_anomalies("worker") == []
            status = await remote.process_status("worker")
            assert status["state"] == "running" and status["dead_letter_count"] == 1
        finally:
            await remote.close()


async def test_remote_commands_change_the_runtime() -> None:
    runtime = make_runtime()
    async with served(runtime) as url:
        remote = RemoteControl(url, token=TOKEN)
        try:
            process = runtime.get_process("worker")
            await wait_for(lambda: process.state.value == "running")
            await remote.suspend("worker")
            assert process.state.value == "suspended"
            await remote.resume("worker")
            assert process.state.value == "running"
            await remote.inject("worker", {"n": 1}, "fail")
            await wait_for(lambda: len(process.dead_letters) == 1, what="a dead letter")
            await remote.suspend("worker")
            assert await remote.redeliver("worker") == 1
            assert len(process.queued_events()) == 1
            await remote.resume("worker")
            await wait_for(lambda: len(process.dead_letters) == 1, what="dead again")
            assert await remote.clear_dead_letters("worker") == 1
            trigger = await remote.add_trigger("worker", {"type": "event", "event_type": "x.y"})
            assert any(t["id"] == trigger for t in process.status()["triggers"])
            await remote.remove_trigger("worker", trigger)
            assert not any(t["id"] == trigger for t in process.status()["triggers"])
            health = await remote.update_health("worker", {"error_window": 20})
            assert health["error_window"] == 20 == process.config.health.error_window
            await remote.stop("worker")
            assert process.state.value == "stopped"
            await remote.start("worker")
            assert process.state.value == "running"
            await remote.restart("worker")
            assert process.state.value == "running" and process.restart_count >= 0
        finally:
            await remote.close()


async def test_refusals_arrive_as_control_errors_with_their_code() -> None:
    runtime = make_runtime()
    async with served(runtime) as url:
        remote = RemoteControl(url, token=TOKEN)
        wrong = RemoteControl(url, token="not-the-token-at-all")
        try:
            with pytest.raises(ControlError, match="no process named 'ghost'") as missing:
                await remote.stop("ghost")
            assert missing.value.code == "PROCESS_NOT_FOUND"
            await wait_for(lambda: runtime.get_process("worker").state.value == "running")
            with pytest.raises(ControlError, match="only a suspended process") as refused:
                await remote.resume("worker")
            assert refused.value.code == "REFUSED"
            with pytest.raises(ControlError, match="error_window") as bad:
                await remote.update_health("worker", {"error_window": "many"})
            assert bad.value.code == "INVALID_CONFIG"
            with pytest.raises(ControlError, match="refused the token") as denied:
                await wrong.list_processes()
            assert denied.value.code == "UNAUTHORIZED"
        finally:
            await remote.close()
            await wrong.close()


async def test_a_read_only_server_refuses_commands_and_says_so() -> None:
    runtime = make_runtime()
    async with served(runtime, read_only=True) as url:
        remote = RemoteControl(url, token=TOKEN)
        try:
            await remote.start_all()
            assert remote.read_only
            assert [p.name for p in await remote.list_processes()] == ["worker"]
            with pytest.raises(ReadOnlyError):
                await remote.suspend("worker")
            assert runtime.get_process("worker").state.value == "running"
        finally:
            await remote.close()


async def test_events_stream_and_the_link_recovers_when_the_server_comes_back(
        tmp_path: Any) -> None:
    port = free_port()
    journal = str(tmp_path / "journal.db")
    remote: RemoteControl | None = None
    try:
        async with served(make_runtime(journal), port=port) as url:
            remote = RemoteControl(url, token=TOKEN)
            stream = remote.subscribe()
            await remote.start_all()
            await wait_for(lambda: remote is not None and remote._last_event_id != "",
                           what="the stream's hello")
            await remote.inject("worker", {"n": 1})
            seen: list[Any] = []
            await wait_for(lambda: any(isinstance(e, RunFinished)
                                         for e in seen + stream.drain()) or bool(
                seen.extend(stream.drain())), what="run.finished over SSE")
            rows = await remote.list_processes()
        # The server is gone: the room keeps its last view and says it is reconnecting.
        await wait_for(lambda: remote is not None and remote.link.startswith("reconnecting"),
                       what="the reconnecting state")
        assert await remote.list_processes() == rows
        with pytest.raises(ControlError, match="cannot reach the runtime") as gone:
            await remote.suspend("worker")
        assert gone.value.code == "UNREACHABLE"
        async with served(make_runtime(journal), port=port):  # back on the same address
            await wait_for(lambda: remote is not None and remote.link == "",
                           what="the link back")
            stream.drain()
            await remote.inject("worker", {"n": 2})
            got: list[Any] = []
            await wait_for(lambda: bool(got.extend(stream.drain())) or any(
                isinstance(e, RunFinished) for e in got), what="events after the reconnect")
            assert remote.reconnects >= 1
    finally:
        if remote is not None:
            await remote.close()
