"""A write whose answer never came parks its run, through AgentProcess: the server died mid-call,
or the call timed out. The run waits with ``unknown_write_outcome`` exactly as after a crash (the
journal's run_waiting entry names the tool, arguments, idempotency key and cause), the call is
never sent again, and an operator settles it: in code, over the API, with ``promptui
reconcile``. A read cut off the same way is reported to the model as interrupted."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime_core import (
    AgentProcess,
    AgentRuntime,
    OutcomeUnknown,
    ProcessConfig,
    ToolContext,
    TriggerEvent,
    tool,
)
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import JournalProvider, ReadFilter
from runtime_core.runs.run import Run
from tests.helpers.cli import run_promptui_async as cli
from tests.helpers.mcp import flaky_env, lines
from tests.helpers.polling import wait_for
from tests.helpers.serving import TOKEN, served
from tests.helpers.workers import FLAKY_SERVER

pytestmark = pytest.mark.slow

WRITE = {"tool_calls": [{"name": "slow_record", "args": {"item": "x", "seconds": 30}}]}


def server(tmp: Path, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FLAKY_SERVER)], "env": flaky_env(tmp),
            "timeout": 30, **extra}


def process_config(tmp: Path, *turns: dict[str, Any], journal: bool = True,
                   **extra: Any) -> ProcessConfig:
    return ProcessConfig(
        model={"provider": "scripted", "turns": list(turns)},
        servers={"flaky": server(tmp, **extra)},
        **({"journal": {"level": "full", "path": str(tmp / "journal.db")}} if journal else {}))


async def server_pid(process: AgentProcess) -> int:
    ctx = ToolContext(process.name, "r", 1, TriggerEvent("t", "manual", {}), {})
    found = re.search(r"pid=(\d+)", str(await process.tools()["peek"].invoke({}, ctx)))
    assert found is not None
    return int(found.group(1))


async def parked(process: AgentProcess, timeout: float = 30) -> Run:
    await wait_for(lambda: len(process.waiting_runs()) == 1, timeout, "the run to wait")
    [run] = process.waiting_runs()
    return run


async def cut_off(process: AgentProcess, tmp: Path) -> Run:
    """Start a run whose write hangs, kill the server under it: the run parks."""
    await process.inject(TriggerEvent("t", "manual", {}, event_id="ev-1"))
    await wait_for(lambda: len(lines(tmp / "started.txt")) == 1, 30, "the write to start")
    os.kill(await server_pid(process), signal.SIGKILL)
    return await parked(process)


async def entries(journal: JournalProvider, kind: EntryType) -> list[dict[str, Any]]:
    return [e.data for e in await journal.read(ReadFilter(process="p", entry_type=kind))]


async def finished(process: AgentProcess, count: int = 1) -> Run:
    await wait_for(lambda: len(process.recent_runs()) >= count, 30, "the run to finish")
    return process.recent_runs()[-1]


async def test_a_write_cut_off_parks_the_run_and_applied_continues_it(tmp_path: Path) -> None:
    process = AgentProcess("p", process_config(tmp_path, WRITE, {"reply": "done"}))
    await process.start()
    journal = process.journal
    assert journal is not None
    try:
        run = await cut_off(process, tmp_path)
        assert run.waiting_reason == "unknown_write_outcome"
        key = f"{run.run_id}:2"
        detail = process.waiting_detail(run.run_id)
        assert detail["tool"] == "slow_record" and detail["idempotency_key"] == key
        assert detail["args"] == {"item": "x", "seconds": 30}
        assert detail["mcp_server"] == "flaky"
        assert "went away during 'slow_record'" in detail["cause"]
        # Listed as waiting first, then journaled (dispatch.py says why): wait for the entry.
        found: list[dict[str, Any]] = []

        async def journaled() -> bool:
            found[:] = await entries(journal, EntryType.RUN_WAITING)
            return bool(found)

        for _ in range(500):
            if await journaled():
                break
            await asyncio.sleep(0.01)
        [waiting] = found
        assert waiting["reason"] == "unknown_write_outcome" and waiting["tool"] == "slow_record"
        assert waiting["args"] == {"item": "x", "seconds": 30}
        assert waiting["idempotency_key"] == key and waiting["cause"] == detail["cause"]
        assert process.status_snapshot().waiting_runs == 1
        assert "outcome unknown" in run.steps[-1].result

        # The link comes back; the write is not sent again, the run does not go on by itself.
        await wait_for(lambda: process.status()["servers"][0]["connected"], 30, "reconnected")
        await asyncio.sleep(0.3)  # give a wrong re-dispatch the chance to show itself
        assert lines(tmp_path / "started.txt") == [f"{key} x"]
        assert len(await entries(journal, EntryType.TOOL_INTENT)) == 1
        assert process.waiting_runs() == [run]

        await process.reconcile(run.run_id, "applied", result="recorded x", note="checked")
        done = await finished(process)
        assert done.run_id == run.run_id and done.state.value == "succeeded", done.error
        assert done.reply == "done" and done.tool_calls == 1
        assert lines(tmp_path / "started.txt") == [f"{key} x"]
        [reconciled] = await entries(journal, EntryType.RECONCILED)
        assert reconciled["outcome"] == "applied" and reconciled["result"] == "recorded x"
    finally:
        await process.close()


async def test_not_applied_lets_the_model_decide_again(tmp_path: Path) -> None:
    process = AgentProcess("p", process_config(
        tmp_path, WRITE, {"tool_calls": [{"name": "record", "args": {"item": "again"}}]},
        {"reply": "recorded on the second try"}))
    await process.start()
    try:
        run = await cut_off(process, tmp_path)
        await wait_for(lambda: process.status()["servers"][0]["connected"], 30, "reconnected")
        await process.reconcile(run.run_id, "not_applied")
        done = await finished(process)
        assert done.state.value == "succeeded", done.error
        assert lines(tmp_path / "ledger.txt") == [f"{run.run_id}:4 again"]  # a new call
    finally:
        await process.close()


async def test_a_parked_run_still_waits_after_a_restart_and_can_be_failed(
        tmp_path: Path) -> None:
    first = AgentProcess("p", process_config(tmp_path, WRITE, {"reply": "done"}))
    await first.start()
    run = await cut_off(first, tmp_path)
    cause = first.waiting_detail(run.run_id)["cause"]
    await first.close()
    second = AgentProcess("p", process_config(tmp_path, WRITE, {"reply": "done"}))
    await second.start()
    try:
        [again] = second.waiting_runs()
        assert again.run_id == run.run_id and again.waiting_reason == "unknown_write_outcome"
        assert second.waiting_detail(run.run_id)["cause"] == cause  # read from the journal
        await asyncio.sleep(0.3)
        assert len(lines(tmp_path / "started.txt")) == 1  # recovery did not send it again
        await second.reconcile(run.run_id, "failed", note="the ledger has no such line")
        assert second.waiting_runs() == []
    finally:
        await second.close()


async def test_a_call_timeout_parks_a_write_and_interrupts_a_read(tmp_path: Path) -> None:
    process = AgentProcess("p", process_config(
        tmp_path,
        {"tool_calls": [{"name": "slow_peek", "args": {"seconds": 5}}]},
        {"tool_calls": [{"name": "slow_record", "args": {"item": "y", "seconds": 5}}]},
        {"reply": "done"}, call_timeout=0.5))
    await process.start()
    try:
        await process.inject(TriggerEvent("t", "manual", {}))
        run = await parked(process)
        read = next(s for s in run.steps if s.name == "slow_peek")
        assert not read.ok and read.result.startswith("interrupted: MCP server 'flaky' did not "
                                                      "answer 'slow_peek' within 0.5 s")
        assert read.result.endswith("call the tool again if you still need it")
        detail = process.waiting_detail(run.run_id)
        assert detail["tool"] == "slow_record" and "servers.flaky.call_timeout" in detail["cause"]
        await process.reconcile(run.run_id, "applied", result="recorded y")
        assert (await finished(process)).state.value == "succeeded"
    finally:
        await process.close()


async def test_any_tool_that_cannot_tell_its_outcome_parks_a_write() -> None:
    """Not only MCP: a Python write tool may raise OutcomeUnknown too; no journal needed."""
    calls: list[str] = []

    async def transfer(amount: int, ctx: ToolContext) -> str:
        calls.append(ctx.idempotency_key)
        raise OutcomeUnknown("the bank's gateway hung up after the request was sent")

    process = AgentProcess("p", ProcessConfig(model={"provider": "scripted", "turns": [
        {"tool_calls": [{"name": "transfer", "args": {"amount": 5}}]}, {"reply": "paid"}]}),
        tools=[tool(transfer, effect="write")])
    await process.start()
    try:
        await process.inject(TriggerEvent("t", "manual", {}))
        run = await parked(process)
        assert process.waiting_detail(run.run_id)["cause"] == (
            "the bank's gateway hung up after the request was sent")
        await process.reconcile(run.run_id, "applied", result="ok")
        assert (await finished(process)).reply == "paid"
        assert calls == [f"{run.run_id}:2"]
    finally:
        await process.close()


# -- settled from outside: the API and the command line ----------------------------------------

async def test_promptui_reconcile_and_the_api_settle_a_parked_write(tmp_path: Path) -> None:
    runtime = AgentRuntime()
    process = runtime.add_process("p", process_config(tmp_path, WRITE, {"reply": "done"}))
    await runtime.start_all()
    async with served(runtime) as url:
        run = await cut_off(process, tmp_path)
        where = ("--url", url, "--token", TOKEN)
        async with httpx.AsyncClient(base_url=f"{url}/api/v1",
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as api:
            answer = await api.get(f"/processes/p/runs/{run.run_id}/waiting")
            assert answer.status_code == 200, answer.text
            assert answer.json()["cause"].startswith("MCP server 'flaky' went away")
        # No terminal and no outcome: it shows the call and refuses to guess.
        code, out, err = await cli("reconcile", "p", run.run_id[:8], *where, cwd=tmp_path)
        assert code == 2 and "not asked, as stdin is not a terminal" in err, err
        assert "slow_record on MCP server flaky" in out and "why: MCP server 'flaky'" in out
        code, _, err = await cli("reconcile", "p", run.run_id[:8], "--not-applied",
                                 "--result", "x", *where, cwd=tmp_path)
        assert code == 2 and "--result goes with --applied" in err
        assert process.waiting_runs() != []

        code, out, err = await cli("reconcile", "p", run.run_id[:8], "--applied", "--result",
                                   '{"line": 1}', "--note", "seen in the ledger", *where,
                                   cwd=tmp_path)
        assert code == 0, err
        assert f"p: run {run.run_id[:8]} reconciled applied; it runs on" in out
        done = await finished(process)
        assert done.state.value == "succeeded"


async def test_the_call_timeout_does_not_run_while_the_operator_answers_a_question() -> None:
    """A server's question (elicitation) waits for the operator: that wait is bounded by
    elicitation_timeout, not by the call's call_timeout, so a slow operator parks nothing."""
    from tests.helpers.elicitation import ANSWER, BOOK, config, started, waiting_question

    async with started(config(BOOK, {"reply": "booked"}, call_timeout=1)) as (process, _, _j):
        await process.inject(TriggerEvent("t", "manual", {}))
        run = await waiting_question(process)
        await asyncio.sleep(1.5)  # longer than call_timeout: the operator takes their time
        await process.answer_elicitation(run.run_id, "accept", ANSWER)
        done = await finished(process)
        assert done.state.value == "succeeded" and done.reply == "booked", done.steps
        assert all("outcome unknown" not in s.result for s in done.steps)
