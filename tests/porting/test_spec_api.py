"""The spec's API where ours differed (issue 35): the five rewind modes on every road (the
engine, the control plane, the HTTP routes, the CLI's list), ``apply_governance_config``,
``status()``'s ``dead_letter_count`` and ``trigger_count``, and a recovery that reports what a
checkpoint after every run would. The served roads (RemoteControl, the attached CLI) are in
test_spec_api_served.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from promptui.cli.rewind import MODES
from runtime_core import AgentProcess, ProcessConfig, ToolContext, TriggerEvent, tool
from runtime_core.api.server import create_app
from runtime_core.control import LocalControl
from runtime_core.journal.rewind_plan import RewindMode
from tests.helpers.polling import wait_for
from tests.helpers.recovery import abandon
from tests.helpers.rewinds import MODEL, book, booked_twice, books_runtime, what_mode_did

SPEC_MODES = ["both", "conversation_only", "code_only", "summarize", "cancel"]
TOKEN = "spec-api-test-token-0123456789"


def api(control: LocalControl) -> httpx.AsyncClient:
    app = create_app(control, token=TOKEN, start_processes=False)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                             base_url="http://127.0.0.1/api/v1",
                             headers={"Authorization": f"Bearer {TOKEN}"})


# -- rewind: one list of modes, the spec's --------------------------------------------------------
async def test_the_rewind_modes_are_the_spec_s_in_the_engine_the_api_and_the_cli() -> None:
    assert [m.value for m in RewindMode] == SPEC_MODES
    assert MODES.split(", ") == SPEC_MODES  # the CLI's --help
    schema = create_app(LocalControl(books_runtime()), token=TOKEN).openapi()
    plan = schema["paths"]["/api/v1/processes/{name}/rewind-plan"]["get"]
    (mode,) = [p for p in plan["parameters"] if p["name"] == "mode"]
    enum = schema["components"]["schemas"][mode["schema"]["$ref"].rsplit("/", 1)[-1]]["enum"]
    assert enum == SPEC_MODES
    body = schema["components"]["schemas"]["RewindBody"]["properties"]["mode"]
    assert body["$ref"] == mode["schema"]["$ref"]


@pytest.mark.parametrize("road", ["in process", "http"])
@pytest.mark.parametrize("mode", SPEC_MODES)
async def test_every_mode_plans_and_rewinds_on_every_road(mode: str, road: str) -> None:
    runtime = books_runtime()
    control = LocalControl(runtime)
    process = runtime.get_process("books")
    await runtime.start_all()
    try:
        target = await booked_twice(process)
        if road == "in process":
            plan = await control.rewind_plan("books", target, mode)
            assert plan.mode.value == mode
            result = await control.rewind("books", target, mode)
            assert result.plan.mode.value == mode
        else:
            async with api(control) as client:
                planned = await client.get("/processes/books/rewind-plan",
                                           params={"entry_id": target, "mode": mode})
                assert planned.status_code == 200, planned.text
                assert planned.json()["mode"] == mode
                done = await client.post("/processes/books/rewind",
                                         json={"entry_id": target, "mode": mode})
                assert done.status_code == 200, done.text
                assert done.json()["plan"]["mode"] == mode
        assert what_mode_did(process, messages_before=4) == mode
        assert process.state.value == "running"
    finally:
        await runtime.stop_all()


async def test_the_api_s_old_mode_names_are_refused_naming_the_spec_s() -> None:
    runtime = books_runtime()
    control = LocalControl(runtime)
    await runtime.start_all()
    try:
        target = await booked_twice(runtime.get_process("books"))
        async with api(control) as client:
            for old in ("conversation", "state"):
                refused = await client.get("/processes/books/rewind-plan",
                                           params={"entry_id": target, "mode": old})
                assert refused.status_code == 422
                assert "conversation_only" in refused.text and "code_only" in refused.text
    finally:
        await runtime.stop_all()


# -- apply_governance_config ---------------------------------------------------------------------
async def run_once(process: AgentProcess, invoice: str) -> None:
    """Inject one invoice and wait until it ran or was dead-lettered."""
    ran, dead = process.invocation_count, len(process.dead_letters)
    await process.inject(TriggerEvent("t", "manual", {"invoice": invoice}))
    await wait_for(lambda: process.invocation_count > ran or len(process.dead_letters) > dead,
                   what=f"the run of {invoice}")


def governed() -> AgentProcess:
    return AgentProcess("books", ProcessConfig(model=MODEL), tools=[book])


async def test_apply_governance_config_health_builds_retunes_and_drops_the_monitor() -> None:
    process = governed()
    await process.start()
    try:
        assert "health" not in process.status()
        process.config.health = process.config.health.model_copy(
            update={"enabled": True, "error_window": 20})
        process.apply_governance_config("health")  # the spec's behavioral-health example
        assert process.status()["health"]["is_healthy"] is True
        assert process.health_anomalies() == []
        process.config.health = process.config.health.model_copy(update={"error_window": 30})
        process.apply_governance_config("health")
        await run_once(process, "A-1")  # the monitor sees runs on the live process
        assert process.status()["health"]["is_healthy"] is True
        process.config.health = process.config.health.model_copy(update={"enabled": False})
        process.apply_governance_config("health")
        assert "health" not in process.status() and process.health_anomalies() is None
    finally:
        await process.stop()


async def test_apply_governance_config_budget_keeps_its_counters_and_guards_the_live_runs(
        ) -> None:
    process = governed()
    await process.start()
    try:
        process.config.budget = process.config.budget.model_validate(
            {"enabled": True, "max_runs_per_day": 5})
        process.apply_governance_config("budget")
        await run_once(process, "A-1")
        assert process.status()["budget"]["runs_per_day"] == 4
        # A new limit keeps the day's count: one run done, the limit now 1, the next refused.
        process.config.budget = process.config.budget.model_copy(
            update={"max_runs_per_day": 1})
        process.apply_governance_config("budget")
        await run_once(process, "A-2")
        assert [d["reason"] for d in process.dead_letters] == ["budget exceeded"]
        assert process.context.get("booked") == 1
        assert process.suspend_reason == "budget"  # on_exceeded: pause
        await process.resume()
        # The per-call checks reach the runs of the start already running.
        process.config.budget = process.config.budget.model_validate({
            "enabled": True, "max_irreversible_per_day": 0, "on_exceeded": "stop",
            "tool_costs": {"book": {"irreversible": True}}})
        process.apply_governance_config("budget")
        await run_once(process, "A-3")
        assert process.invocation_count == 2  # it ran ...
        assert process.context.get("booked") == 1  # ... without the call
        await wait_for(lambda: process.state.value == "stopped", what="on_exceeded: stop")
        await process.start()
        process.config.budget = process.config.budget.model_copy(update={"enabled": False})
        process.apply_governance_config("budget")
        assert "budget" not in process.status()
    finally:
        await process.stop()


async def test_apply_governance_config_mission_keeps_its_progress() -> None:
    process = governed()
    await process.start()
    try:
        process.config.mission = process.config.mission.model_validate(
            {"enabled": True, "objective": "book", "success_check": "state.booked >= 99",
             "auto_complete": False})
        process.apply_governance_config("mission")
        await run_once(process, "A-1")
        assert process.status()["mission_state"] == "active"
        process.config.mission = process.config.mission.model_copy(
            update={"success_check": "state.booked >= 2"})
        process.apply_governance_config("mission")
        await run_once(process, "A-2")
        assert process.status()["mission_state"] == "completed"
        assert process.checkpoint_state()["mission"]["invocations"] == 2  # progress kept
    finally:
        await process.stop()


def test_apply_governance_config_refuses_another_section_naming_the_ones_it_takes() -> None:
    process = governed()
    with pytest.raises(ValueError, match="'budget', 'health', 'mission'") as refused:
        process.apply_governance_config("secrets")
    assert "'secrets'" in str(refused.value) and "'books'" in str(refused.value)


# -- status(): dead_letter_count and trigger_count -------------------------------------------------
class Refuses:
    """A model whose every call fails: each event ends in the dead letters."""

    name = "refuses"

    async def complete(self, request: Any) -> Any:
        raise RuntimeError("the ledger is offline")


def failing(journal: Path | None) -> AgentProcess:
    return AgentProcess("flaky", ProcessConfig(
        journal={"level": "checkpoint", "path": str(journal)} if journal else {"level": "none"},
        trigger_delivery={"max_retries": 0, "dead_letter_size": 2},
        max_consecutive_failures=1000), model=Refuses())  # type: ignore[arg-type]


async def fail_five(process: AgentProcess, *, journaled: bool) -> None:
    for n in range(5):
        await process.inject(TriggerEvent("t", "manual", {"n": n}, event_id=f"ev-{n}"))
    # Without a journal the letters the list lets go are gone: the total is the list's.
    total = 5 if journaled else 2
    await wait_for(lambda: process.dead_letters and process.dead_letters[-1][
        "event"].event_id == "ev-4" and process.status()["dead_letter_total"] == total,
        what="5 dead letters")


@pytest.mark.parametrize("journaled", [True, False])
async def test_dead_letter_count_is_the_entries_in_dead_letters(tmp_path: Path,
                                                                journaled: bool) -> None:
    db = tmp_path / "journal.db" if journaled else None
    process = failing(db)
    await process.start()
    try:
        await fail_five(process, journaled=journaled)
        status = process.status()
        assert status["dead_letter_count"] == len(process.dead_letters) == 2
        assert [d["event"].event_id for d in process.dead_letters] == ["ev-3", "ev-4"]
    finally:
        await process.close()
    if db is None:
        return
    # A new process object on the journal lists the newest dead_letter_size letters; the
    # journal keeps all five (status' dead_letter_total, redelivery, the room's pages).
    again = failing(db)
    await again.start()
    try:
        status = again.status()
        assert status["dead_letter_count"] == len(again.dead_letters) == 2
        assert status["dead_letter_total"] == 5
        assert await again.redeliver_dead_letters(["ev-0"]) == 1  # only the journal held it
    finally:
        await again.close()


async def test_trigger_count_is_the_running_config_triggers() -> None:
    process = AgentProcess("watcher", ProcessConfig(triggers=[
        {"type": "interval", "seconds": 3600}, {"type": "interval", "seconds": 7200}]))
    assert process.status()["trigger_count"] == 0  # configured, not running
    await process.start()
    try:
        assert process.status()["trigger_count"] == 2
        await process.suspend()  # a suspended process's triggers run (their events queue)
        assert process.status()["trigger_count"] == 2
        await process.resume()
    finally:
        await process.stop()
    assert process.status()["trigger_count"] == 0
    assert len(process.status()["triggers"]) == 2  # the list still shows them, inactive
    assert not any(t["active"] for t in process.status()["triggers"])


# -- recovery: the same as with a checkpoint after every run ---------------------------------------
GATE = asyncio.Event()


async def bump(ctx: ToolContext) -> str:
    if ctx.get("counter", 0) >= 3:  # the fourth run waits: the crash comes in the middle
        await GATE.wait()
    ctx.set("counter", int(ctx.get("counter", 0)) + 1)
    return "bumped"


def counting(db: Path, every: int) -> AgentProcess:
    model = {"provider": "scripted", "turns": [{"tool_calls": [{"name": "bump", "args": {}}]},
                                               {"reply": "done"}]}
    return AgentProcess("counter", ProcessConfig.model_validate({
        "model": model, "context": {"initial_state": {"seed": 1}},
        "journal": {"level": "checkpoint", "path": str(db), "checkpoint_every": every}}),
        tools=[tool(bump, effect="read")])


async def recovered_after(db: Path, every: int, end: str) -> tuple[dict[str, Any], Any, Any]:
    process = counting(db, every)
    await process.start()
    for n in range(4 if end == "crash mid-run" else 3):
        await process.inject(TriggerEvent("t", "manual", {"n": n}))
    await wait_for(lambda: process.invocation_count == 3, what="three runs")
    if end == "crash mid-run":
        await wait_for(lambda: process.active_runs(), what="the fourth run")
    journal = process.journal
    assert journal is not None
    await journal.flush()
    if end == "stop":
        await process.close()
    else:
        await abandon(process)
        await journal.close()
    again = counting(db, every)
    await again.start()
    try:
        assert again.recovered is not None
        roles = [message["role"] for message in again.conversation.messages()]
        return dict(again.recovered), again.context.state_snapshot(), roles
    finally:
        GATE.set()
        await again.close()
        GATE.clear()


@pytest.mark.parametrize("end", ["stop", "crash", "crash mid-run"])
async def test_recovered_is_what_a_checkpoint_after_every_run_gives(tmp_path: Path,
                                                                    end: str) -> None:
    spec, spec_state, spec_conversation = await recovered_after(tmp_path / "a.db", 1, end)
    ours, our_state, our_conversation = await recovered_after(tmp_path / "b.db", 50, end)
    read = ours.pop("entries_read"), spec.pop("entries_read")
    assert ours == spec and our_state == spec_state and our_conversation == spec_conversation
    assert set(spec["context_keys"]) >= {"counter", "seed"}
    if end == "crash":  # ours read the three runs' entries; the spec's read none
        assert spec["entries_replayed"] == 0 and spec["last_entry_type"] == "checkpoint"
        assert read[0] > read[1] == 0
