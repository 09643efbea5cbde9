"""Elicitation and sampling through AgentProcess with a real MCP server (our asking server, over
stdio, and once over streamable HTTP): a server's question parks the run in ``waiting``
(reason ``elicitation``) until an operator answers through the control plane (accept with values
checked against the form, decline, cancel), the timeout answers cancel, a stop answers cancel;
sampling is answered by the process's scripted model, counted and journaled as a model turn."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from runtime_core import TriggerEvent
from runtime_core.control import ControlError
from runtime_core.journal import InMemoryJournal
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import ReadFilter
from runtime_core.journal.replay import rebuild_run
from tests.helpers.elicitation import (
    ANSWER,
    BOOK,
    CONNECT,
    config,
    finished,
    started,
    tool_result,
    waiting_question,
)
from tests.helpers.workers import ASKING_SERVER

SUMMARIZE = {"tool_calls": [{"name": "summarize", "args": {"text": "a very long text"}}]}


async def entries(journal: InMemoryJournal, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in await journal.read(ReadFilter(process="p", entry_type=kind))]


# -- elicitation ---------------------------------------------------------------------------------
@pytest.mark.slow
async def test_a_question_parks_the_run_until_an_operator_accepts() -> None:
    async with started(config(BOOK, {"reply": "booked"})) as (process, control, journal):
        await process.inject(TriggerEvent("t", "manual", {}))
        run = await waiting_question(process)
        # The waiting-run views show the question and its form, as for a reconciliation.
        assert process.status()["waiting_runs"] == 1
        views = await control.runs("p", state="waiting")
        assert [(v.run_id, v.waiting_reason) for v in views] == [(run.run_id, "elicitation")]
        detail = await control.waiting_detail("p", run.run_id)
        assert detail["reason"] == "elicitation" and detail["server"] == "asking"
        assert detail["tool"] == "book" and detail["message"].startswith("Booking LH123")
        schema = detail["requested_schema"]
        assert set(schema["properties"]) == {"name", "seats", "window", "meal"}
        assert schema["required"] == ["name", "seats"]
        assert detail["expires_at"] - detail["asked_at"] == pytest.approx(600.0)
        # Values that do not fit the form are refused, field by field; the run still waits.
        with pytest.raises(ControlError) as refused:
            await control.answer_elicitation("p", run.run_id, "accept",
                                             content={"name": "Ann", "seats": 12})
        assert refused.value.code == "INVALID_REQUEST" and "seats: at most 9" in str(
            refused.value)
        with pytest.raises(ControlError, match="seats: required"):
            await control.answer_elicitation("p", run.run_id, "accept", content={"name": "A"})
        with pytest.raises(ControlError, match="nothing to reconcile"):
            await control.reconcile("p", run.run_id, "applied")
        assert run.state.value == "waiting"

        await control.answer_elicitation("p", run.run_id, "accept", content=ANSWER)
        assert run.state.value in ("running", "succeeded")  # answered: it runs on at once
        done = await finished(process)
        assert done.state.value == "succeeded" and done.reply == "booked"
        assert tool_result(done, "book") == 'accept {"meal": "fish", "name": "Ann", ' \
            '"seats": 2, "window": false}'
        asked = await entries(journal, EntryType.ELICITATION_ASKED)
        answered = await entries(journal, EntryType.ELICITATION_ANSWERED)
        assert asked[0]["server"] == "asking" and asked[0]["requested_schema"] == schema
        assert answered == [{"server": "asking", "tool": "book", "step": 2, "action": "accept",
                             "content": ANSWER, "actor": "operator"}]
        assert [s.kind for s in done.steps] == ["model", "elicitation", "tool", "model"]
        with pytest.raises(ControlError, match="no run"):  # answered: nothing waits any more
            await control.answer_elicitation("p", run.run_id, "cancel")


@pytest.mark.slow
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_reach_the_server(action: str) -> None:
    async with started(config(BOOK, {"reply": "ok"})) as (process, control, journal):
        await process.inject(TriggerEvent("t", "manual", {}))
        run = await waiting_question(process)
        await control.answer_elicitation("p", run.run_id, action, content={"ignored": 1})
        done = await finished(process)
        assert tool_result(done, "book") == action
        answered = await entries(journal, EntryType.ELICITATION_ANSWERED)
        assert answered[0]["action"] == action and answered[0]["content"] is None


@pytest.mark.slow
async def test_an_unanswered_question_is_cancelled_at_its_timeout() -> None:
    cfg = config(BOOK, {"reply": "ok"}, elicitation_timeout=0.5)
    async with started(cfg) as (process, _, journal):
        await process.inject(TriggerEvent("t", "manual", {}))
        await waiting_question(process)
        done = await finished(process)
        assert tool_result(done, "book") == "cancel"
        answered = await entries(journal, EntryType.ELICITATION_ANSWERED)
        assert answered[0]["action"] == "cancel" and answered[0]["actor"] == "timeout"


@pytest.mark.slow
async def test_a_stop_answers_cancel_and_leaves_nothing_waiting() -> None:
    cfg = {**config(BOOK, {"reply": "ok"}), "drain_timeout": 20}
    async with started(cfg) as (process, _, journal):
        await process.inject(TriggerEvent("t", "manual", {}))
        await waiting_question(process)
        await asyncio.wait_for(process.stop(), 20)  # a draining stop must not wait for anyone
        assert process.waiting_runs() == []
        answered = await entries(journal, EntryType.ELICITATION_ANSWERED)
        assert answered[0]["action"] == "cancel"
        assert answered[0]["actor"] == "process stopping"
        done = process.recent_runs()[-1]
        assert tool_result(done, "book") == "cancel"  # the drain let the call finish


DECLARED = {"tool_calls": [{"name": "declared", "args": {}}]}


@pytest.mark.slow
@pytest.mark.parametrize(("off", "declared"), [
    ({}, {"elicitation": True, "sampling": True}),
    ({"elicitation": False}, {"elicitation": False, "sampling": True}),
    ({"sampling": False}, {"elicitation": True, "sampling": False})])
async def test_each_capability_is_declared_unless_turned_off(
        off: dict[str, bool], declared: dict[str, bool]) -> None:
    async with started(config(DECLARED, {"reply": "ok"}, **off)) as (process, _, _j):
        await process.inject(TriggerEvent("t", "manual", {}))
        assert json.loads(tool_result(await finished(process), "declared")) == declared


@pytest.mark.slow
async def test_elicitation_off_asks_nobody() -> None:
    async with started(config(BOOK, {"reply": "ok"}, elicitation=False)) as (process, _, j):
        await process.inject(TriggerEvent("t", "manual", {}))
        done = await finished(process)
        result = tool_result(done, "book")
        assert result.startswith("error:") and "elicitation" in result.lower()
        assert await entries(j, EntryType.ELICITATION_ASKED) == []
        assert process.waiting_runs() == []


@pytest.mark.slow
async def test_a_credential_field_is_never_journaled() -> None:
    from runtime_core.runs.server_asks import _journaled_content

    assert _journaled_content({"name": "Ann", "api_token": "s3cr3t-value"}) == {
        "name": "Ann", "api_token": "[redacted]"}


# -- sampling ------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_sampling_is_answered_by_the_process_model_and_counted() -> None:
    cfg = config(SUMMARIZE, {"reply": "five words, no more"}, {"reply": "summarised"})
    async with started(cfg) as (process, _, journal):
        await process.inject(TriggerEvent("t", "manual", {}))
        done = await finished(process)
        assert done.state.value == "succeeded" and done.reply == "summarised"
        assert tool_result(done, "summarize") == "scripted: five words, no more"
        assert done.model_calls == 3  # its own two turns and the server's one
        turns = await entries(journal, EntryType.MODEL_USAGE)
        sampled = [t for t in turns if t.get("sampling")]
        assert len(turns) == 3 and len(sampled) == 1
        assert sampled[0]["sampling"] == {"server": "asking", "tool": "summarize"}
        assert sampled[0]["reply"] == "five words, no more" and sampled[0]["step"] == 2
        assert sampled[0]["prompt"] == [
            {"role": "system", "content": "You summarise in five words."},
            {"role": "user", "content": "a very long text"}]
        assert [s.kind for s in done.steps] == ["model", "sampling", "tool", "model"]
        # Replay counts it against the budget and keeps it out of the run's history.
        rebuilt = rebuild_run(await journal.read(ReadFilter(process="p", run_id=done.run_id)))
        assert rebuilt.model_calls == 3
        assert all("five words" not in str(m.get("content")) for m in rebuilt.history
                   if m.get("role") == "assistant")


@pytest.mark.slow
async def test_sampling_past_the_model_call_budget_is_refused() -> None:
    cfg = {**config(SUMMARIZE, {"reply": "never played"}, {"reply": "x"}),
           "run_budget": {"max_model_calls": 1}}
    async with started(cfg) as (process, _, _journal):
        await process.inject(TriggerEvent("t", "manual", {}))
        done = await finished(process)
        result = tool_result(done, "summarize")
        assert result.startswith("error:") and "model-call budget of 1 is used up" in result
        assert done.model_calls == 1
        assert done.state.value == "failed" and done.reason == "budget"


@pytest.mark.slow
async def test_sampling_off_is_not_answered() -> None:
    async with started(config(SUMMARIZE, {"reply": "x"}, sampling=False)) as (process, _, j):
        await process.inject(TriggerEvent("t", "manual", {}))
        done = await finished(process)
        result = tool_result(done, "summarize")
        assert result.startswith("error:") and done.model_calls == 2
        assert not [t for t in await entries(j, EntryType.MODEL_USAGE) if t.get("sampling")]


# -- over streamable HTTP ------------------------------------------------------------------------
@asynccontextmanager
async def http_server() -> AsyncIterator[str]:
    proc = subprocess.Popen([sys.executable, str(ASKING_SERVER), "--http"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), CONNECT)
        assert line.startswith("LISTENING "), line
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.slow
async def test_over_http_a_question_and_a_sample_both_come_back() -> None:
    async with http_server() as url:
        cfg = config(BOOK, SUMMARIZE, {"reply": "sampled"}, {"reply": "done"})
        cfg["servers"] = {"asking": {"type": "http", "url": url, "timeout": CONNECT}}
        async with started(cfg) as (process, control, _):
            await process.inject(TriggerEvent("t", "manual", {}))
            run = await waiting_question(process)
            await control.answer_elicitation("p", run.run_id, "accept",
                                             content={"name": "Bo", "seats": 1})
            done = await finished(process)
            assert json.loads(tool_result(done, "book").removeprefix("accept "))["name"] == "Bo"
            assert tool_result(done, "summarize") == "scripted: sampled"
            assert done.reply == "done"


def test_a_servers_max_tokens_caps_the_anthropic_request() -> None:
    from runtime_core.agent.anthropic import AnthropicModel, AnthropicSettings
    from runtime_core.agent.model import ModelRequest

    model = AnthropicModel(AnthropicSettings("claude-test", max_tokens=2048))
    asked = ModelRequest([{"role": "user", "content": "hi"}], [], "r", 0,
                         TriggerEvent("t", "manual", {}), max_tokens=50)
    assert model.body(asked)["max_tokens"] == 50
    asked.max_tokens = None  # the run's own turns: the configured cap
    assert model.body(asked)["max_tokens"] == 2048
