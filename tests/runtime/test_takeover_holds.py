"""The process's side of a takeover (issue 34): a write left open by an owner that stopped
beating is held (``not_applied`` refused until that owner's lease end plus the call's timeout,
saying until when), the hold lifts when the owner is seen gone; a lost lease cuts the runs in
flight at once; a tool reads its fencing token (None outside a cluster)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from runtime_core import AgentProcess, OutcomeUnknown, ProcessConfig, ToolContext, TriggerEvent
from runtime_core import tool as make_tool
from tests.helpers.polling import wait_for

SEEN: list[int | None] = []
STARTED = asyncio.Event()


async def write(item: str, ctx: ToolContext) -> str:
    SEEN.append(ctx.fencing_token)
    if item == "unknown":
        raise OutcomeUnknown("the ledger server did not answer")
    STARTED.set()
    await asyncio.Event().wait()  # a long call: cut from outside
    return "written"


def make_process(tmp_path: Path, budget: float | None = 90.0) -> AgentProcess:
    config = ProcessConfig(
        model={"provider": "scripted", "turns": [
            {"tool_calls": [{"name": "write", "args": {"item": "$payload.i"}}]},
            {"reply": "ok"}]},
        journal={"level": "checkpoint", "path": str(tmp_path / "journal.db")},
        run_budget={"max_seconds": budget}, trigger_delivery={"max_retries": 0})
    return AgentProcess("w", config, tools=[make_tool(write, effect="write")])


async def parked_run(process: AgentProcess) -> str:
    before = {run.run_id for run in process.waiting_runs()}
    await process.inject(TriggerEvent("test", "manual", {"i": "unknown"}))
    new = await wait_for(lambda: {r.run_id for r in process.waiting_runs()} - before or None,
                         what="a parked write")
    return str(next(iter(new)))


async def test_not_applied_waits_for_the_old_owner_and_lifts_when_it_is_gone(
        tmp_path: Path) -> None:
    process = make_process(tmp_path)
    await process.start()
    try:
        run_id = await parked_run(process)
        ended = time.time() - 1.0
        hold, held = process.takeover.hold_unknown_writes("n1", 3, ended)
        assert held == [run_id] and hold.until == pytest.approx(ended + 90.0)
        detail = process.waiting_detail(run_id)
        assert detail["previous_owner"] == "n1" and detail["previous_epoch"] == 3
        assert detail["previous_owner_may_write_until"] == pytest.approx(ended + 90.0, abs=0.01)
        with pytest.raises(ValueError, match=r"may still finish the write until .* UTC"):
            await process.reconcile(run_id, "not_applied")
        assert process.takeover.lift_write_holds("n2") == []  # another node's: no change
        assert process.takeover.lift_write_holds("n1") == [run_id]
        assert "previous_owner" not in process.waiting_detail(run_id)
        await process.reconcile(run_id, "not_applied")
        assert process.waiting_runs() == []
    finally:
        await process.close()


async def test_applied_and_failed_need_no_wait_and_the_hold_ends_by_itself(
        tmp_path: Path) -> None:
    process = make_process(tmp_path, budget=None)
    await process.start()
    try:
        first, second = await parked_run(process), await parked_run(process)
        hold, held = process.takeover.hold_unknown_writes("n1", 1, time.time())
        assert sorted(held) == sorted([first, second])
        assert hold.call_timeout_s == 300.0  # no elapsed budget: the documented bound
        await process.reconcile(first, "applied", result="written")
        await process.reconcile(second, "failed", note="checked: it failed")
        third = await parked_run(process)  # parked after the takeover: this node's own
        await process.reconcile(third, "not_applied")
    finally:
        await process.close()


async def test_a_lost_lease_cuts_the_runs_in_flight_at_once(tmp_path: Path) -> None:
    SEEN.clear()
    STARTED.clear()
    process = make_process(tmp_path)
    await process.start()
    try:
        await process.inject(TriggerEvent("test", "manual", {"i": "long"}))
        await asyncio.wait_for(STARTED.wait(), 10)
        assert process.active_runs()
        assert process.takeover.cut_runs_now() == 1
        await wait_for(lambda: not process.active_runs() or None, what="the run cut")
        assert SEEN == [None]  # not a cluster's journal: no fencing token
    finally:
        await process.close()
