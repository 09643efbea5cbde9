"""A scripted model reacts to what its tools answered (``on_result``), so the demo's
invoice-watcher tells the truth after a reconcile (issue 36, README step 4): told the booking
was not applied, it books again (a new write with its own idempotency key) and says so; the run
and the ledger agree."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runtime_core import AgentProcess, ProcessConfig, ToolContext, tool
from runtime_core.agent.model import ModelRequest
from runtime_core.agent.script import ScriptedModelSpec
from runtime_core.agent.scripted import ScriptedModel
from runtime_core.journal.entry import EntryType
from runtime_core.journal.memory import InMemoryJournal
from runtime_core.journal.replay import reconciled_observation
from runtime_core.manifest.loader import load_manifest
from runtime_core.runs.run import RunState
from runtime_core.triggers.base import TriggerEvent
from tests.helpers.polling import wait_for
from tests.helpers.recovery import abandon

DEMO = Path(__file__).resolve().parents[2] / "demo_manifests" / "invoice-watcher.agent"


class Books:
    """The demo's ledger: every booking with its idempotency key; ``gate`` holds a booking."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.gate: asyncio.Event | None = None

    def tools(self) -> list[Any]:
        async def read_invoice(path: str) -> str:
            return f"{path}: 120.00 EUR"

        async def record_invoice(path: str, ctx: ToolContext) -> str:
            if self.gate is not None:
                await self.gate.wait()
            self.lines.append(f"{ctx.idempotency_key} {path}")
            return f"booked {path}"

        return [tool(read_invoice, effect="read"), tool(record_invoice, effect="write")]


def demo_config() -> ProcessConfig:
    """The demo manifest's own script, with the ledger above for its tools."""
    return ProcessConfig(model=load_manifest(DEMO).config.model,
                         instructions="Book each invoice once.")


async def test_not_applied_books_again_and_the_run_says_so() -> None:
    journal, books = InMemoryJournal(), Books()
    books.gate = asyncio.Event()  # the booking hangs: the runtime dies in it
    first = AgentProcess("invoice-watcher", demo_config(), journal=journal, tools=books.tools())
    await first.start()
    await first.inject(TriggerEvent("t", "file_watch", {"path": "inv-7.json"}, event_id="e7"))
    await wait_for(lambda: any(e.entry_type == EntryType.TOOL_INTENT and
                               e.data.get("tool") == "record_invoice"
                               for e in journal._entries), what="the booking's intent")
    await abandon(first)
    books.gate = None
    second = AgentProcess("invoice-watcher", demo_config(), journal=journal,
                          tools=books.tools())
    await second.start()
    [waiting] = second.waiting_runs()
    await second.reconcile(waiting.run_id, "not_applied", note="not in the ledger")
    await wait_for(lambda: second.invocation_count == 1, what="the run to finish")
    run = second.recent_runs()[-1]
    assert run.state is RunState.SUCCEEDED
    assert "booked again" in run.reply
    assert len(books.lines) == 1 and books.lines[0].endswith(" inv-7.json")  # in the ledger
    assert not books.lines[0].startswith(f"{waiting.run_id}:2 ")  # its own idempotency key
    await second.stop()


def request(spec: ScriptedModelSpec, turn: int, results: list[str]) -> ModelRequest:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for index, text in enumerate(results):
        messages.append({"role": "assistant", "content": "",
                         "tool_calls": [{"id": f"c{index}", "name": "t", "args": {}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{index}", "content": text})
    return ModelRequest(messages=messages, tools=[], run_id="r", turn=turn,
                        event=TriggerEvent("t", "manual", {}))


async def test_on_result_switches_script_and_stays_there() -> None:
    spec = ScriptedModelSpec.model_validate({
        "turns": [{"tool_calls": [{"name": "a"}],
                   "on_result": [{"contains": "not applied:", "script": "again"}]},
                  {"reply": "first time"}],
        "scripts": {"again": [{"tool_calls": [{"name": "b"}]}, {"reply": "second time"}]}})
    model = ScriptedModel(spec)
    refused = reconciled_observation({"outcome": "not_applied"})
    assert (await model.complete(request(spec, 1, ["done"]))).reply == "first time"
    switched = await model.complete(request(spec, 1, [refused]))
    assert [c.name for c in switched.tool_calls] == ["b"]
    assert (await model.complete(request(spec, 2, [refused, "done"]))).reply == "second time"


def test_on_result_must_name_a_script() -> None:
    with pytest.raises(ValueError, match="on_result names script 'nope'"):
        ScriptedModelSpec.model_validate({"turns": [
            {"tool_calls": [{"name": "a"}], "on_result": [{"contains": "x", "script": "nope"}]},
            {"reply": "r"}]})
