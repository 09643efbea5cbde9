"""Elicitation and sampling against the reference server, not only our own: the npm registry's
``@modelcontextprotocol/server-everything`` (pinned), over stdio, through AgentProcess. Its
``trigger-elicitation-request`` asks a thirteen-field form (text, email, uri, date, integer,
number, single and multiple choices, titled and legacy enums) and is answered through the
control plane, from the room (Pilot) and with ``promptui answer``; ``trigger-url-elicitation``
asks to open a URL; ``trigger-sampling-request`` is answered by the process's scripted model.
The server offers these tools only to a client that declares the capabilities.

Skipped, with the reason, where node or npm is missing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button, Input

from promptui.screens.elicit_dialog import ElicitationDialog
from runtime_core import AgentProcess, AgentRuntime, TriggerEvent
from runtime_core.control import LocalControl, form_fields
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import ReadFilter
from tests.helpers.cli import run_promptui_async
from tests.helpers.elicitation import finished, tool_result, waiting_question
from tests.helpers.mcp import install
from tests.helpers.polling import until
from tests.helpers.room import make_app, notes, open_detail, running
from tests.helpers.serving import TOKEN, served

pytestmark = pytest.mark.slow

CONNECT = 60.0
ELICIT = {"tool_calls": [{"name": "trigger-elicitation-request", "args": {}}]}


@pytest.fixture(scope="module")
def everything() -> Path:
    return install().everything


def config(bin_path: Path, *turns: dict[str, Any], **server: Any) -> dict[str, Any]:
    return {"model": {"provider": "scripted", "turns": list(turns)},
            "servers": {"everything": {"command": str(bin_path), "args": ["stdio"],
                                       "timeout": CONNECT, **server}},
            "journal": {"level": "full", "backend": "memory"},
            "trigger_delivery": {"max_retries": 0}}


@asynccontextmanager
async def started(cfg: dict[str, Any]) -> AsyncIterator[tuple[AgentRuntime, AgentProcess]]:
    runtime = AgentRuntime()
    process = runtime.add_process("p", cfg)
    await runtime.start_all()
    try:
        yield runtime, process
    finally:
        await runtime.close()


async def test_its_form_is_answered_through_the_control_plane(everything: Path) -> None:
    async with started(config(everything, ELICIT, {"reply": "thanks"})) as (runtime, process):
        tools = process.tools()
        assert {"trigger-elicitation-request", "trigger-sampling-request",
                "trigger-url-elicitation"} <= set(tools)
        control = LocalControl(runtime)
        await process.inject(TriggerEvent("t", "manual", {}))
        run = await waiting_question(process, timeout=60)
        detail = await control.waiting_detail("p", run.run_id)
        fields = {f.name: f for f in form_fields(detail["requested_schema"])}
        assert len(fields) == 13 and fields["name"].required
        assert fields["titledSingleSelectEnum"].choices[0] == ("hero-1", "Superman")
        assert fields["legacyTitledEnum"].choices[1] == ("pet-2", "Dogs")
        assert fields["untitledMultipleSelectEnum"].kind == "multi"
        assert fields["titledMultipleSelectEnum"].choices[1] == ("fish-2", "Salmon")
        await control.answer_elicitation("p", run.run_id, "accept", content={
            "name": "Ann Example", "check": True, "email": "ann@example.com",
            "homepage": "https://example.com", "birthdate": "1990-02-03", "integer": 7,
            "number": 2.5, "untitledSingleSelectEnum": "Joey",
            "untitledMultipleSelectEnum": ["Piano", "Drums"],
            "titledSingleSelectEnum": "hero-3", "titledMultipleSelectEnum": ["fish-2"],
            "legacyTitledEnum": "pet-4"})
        done = await finished(process, timeout=60)
        result = tool_result(done, "trigger-elicitation-request")
        for line in ("User provided the requested information", "- Name: Ann Example",
                     "- Agreed to terms: true", "- Email: ann@example.com",
                     "- Favorite Integer: 7", "- Favorite Number: 2.5"):
            assert line in result, result
        assert done.state.value == "succeeded"
        assert process.journal is not None
        kinds = [e.entry_type for e in await process.journal.read(
            ReadFilter(process="p", run_id=done.run_id))]
        assert kinds.index(EntryType.ELICITATION_ASKED) < kinds.index(
            EntryType.ELICITATION_ANSWERED) < kinds.index(EntryType.TOOL_RESULT)


async def test_a_decline_and_a_url_question(everything: Path) -> None:
    url_call = {"tool_calls": [{"name": "trigger-url-elicitation",
                                "args": {"url": "https://example.com/consent"}}]}
    cfg = config(everything, ELICIT, url_call, {"reply": "done"})
    async with started(cfg) as (runtime, process):
        control = LocalControl(runtime)
        await process.inject(TriggerEvent("t", "manual", {}))
        run = await waiting_question(process, timeout=60)
        await control.answer_elicitation("p", run.run_id, "decline")
        await until_url_question(process)
        detail = await control.waiting_detail("p", run.run_id)
        assert detail["mode"] == "url" and detail["url"] == "https://example.com/consent"
        await control.answer_elicitation("p", run.run_id, "accept")
        done = await finished(process, timeout=60)
        assert "declined" in tool_result(done, "trigger-elicitation-request")
        assert '"action": "accept"' in tool_result(done, "trigger-url-elicitation")


async def until_url_question(process: AgentProcess) -> None:
    from tests.helpers.polling import wait_for

    def asked() -> bool:
        runs = process.waiting_runs()
        return bool(runs) and process.waiting_detail(runs[0].run_id).get("mode") == "url"

    await wait_for(asked, 60, "the URL question")


async def test_sampling_is_answered_by_the_scripted_model(everything: Path) -> None:
    sample = {"tool_calls": [{"name": "trigger-sampling-request",
                              "args": {"prompt": "say hi", "maxTokens": 20}}]}
    cfg = config(everything, sample, {"reply": "hi from the script"}, {"reply": "done"})
    async with started(cfg) as (_, process):
        await process.inject(TriggerEvent("t", "manual", {}))
        done = await finished(process, timeout=60)
        result = tool_result(done, "trigger-sampling-request")
        sampled = json.loads(result.split("LLM sampling result:", 1)[1])
        assert sampled["content"] == {"type": "text", "text": "hi from the script"}
        assert sampled["model"] == "scripted" and sampled["role"] == "assistant"
        assert done.model_calls == 3 and done.reply == "done"


async def test_its_form_is_answered_from_the_room(everything: Path) -> None:
    runtime = AgentRuntime()
    process = runtime.add_process("p", config(everything, ELICIT, {"reply": "thanks"}))
    app = make_app(runtime)
    async with running(app, size=(80, 24)) as pilot:
        await until(pilot, lambda: process.state.value == "running", timeout=60)
        await process.inject(TriggerEvent("t", "manual", {}))
        await until(pilot, lambda: bool(process.waiting_runs()), timeout=60)
        run_id = process.waiting_runs()[0].run_id
        screen = await open_detail(app, pilot, "p")
        await pilot.press("4")
        await until(pilot, lambda: screen.table("runs").keys[:1] == [run_id])
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ElicitationDialog))
        dialog = app.screen
        assert isinstance(dialog, ElicitationDialog) and len(dialog.fields) == 13
        assert app.focused is not None and app.focused.id == "cancel"
        # The defaults are filled in; only the name is left to type.
        assert dialog.query_one("#field-6", Input).value == "42"
        dialog.query_one("#field-0", Input).value = "Room Operator"
        dialog.query_one("#accept", Button).press()
        done = await finished(process, timeout=60)
        result = tool_result(done, "trigger-elicitation-request")
        assert "- Name: Room Operator" in result and "- Favorite Integer: 42" in result
        await until(pilot, lambda: f"run {run_id[:8]}: answer accepted" in notes(app))


async def test_its_form_is_answered_with_promptui_answer(everything: Path,
                                                         tmp_path: Path) -> None:
    runtime = AgentRuntime()
    process = runtime.add_process("p", config(everything, ELICIT, {"reply": "thanks"}))
    await runtime.start_all()
    async with served(runtime) as url:
        await process.inject(TriggerEvent("t", "manual", {}))
        run = await waiting_question(process, timeout=60)
        code, out, err = await run_promptui_async(
            "answer", "p", run.run_id[:8], "--accept", "name=Cli User", "--accept",
            "integer=9", "--accept", "untitledMultipleSelectEnum=Bass, Violin",
            "--accept", "titledSingleSelectEnum=Wonder Woman", "--url", url, "--token", TOKEN,
            cwd=tmp_path)
        assert code == 0, err
        assert "Your full, legal name" in out  # the question was shown
        done = await finished(process, timeout=60)
        result = tool_result(done, "trigger-elicitation-request")
        assert "- Name: Cli User" in result and "- Favorite Integer: 9" in result
        raw = json.loads(result.split("Raw result:", 1)[1])
        assert raw["content"]["untitledMultipleSelectEnum"] == ["Bass", "Violin"]
        assert raw["content"]["titledSingleSelectEnum"] == "hero-3"
