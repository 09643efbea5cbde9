"""Defaults that keep their word: a journal section with only a path journals (at checkpoint
level, the spec's default), and a process told to keep no conversation history sends the model
no earlier messages, not even those a restart restored; at most 0 messages means none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime_core import AgentProcess, JournalConfig, ProcessConfig, TriggerEvent
from runtime_core.agent.model import ModelRequest, ModelTurn
from tests.helpers.polling import wait_for


class Recorder:
    """Answers every request and keeps the messages it was sent."""

    name = "recorder"

    def __init__(self) -> None:
        self.requests: list[list[dict[str, Any]]] = []

    async def complete(self, request: ModelRequest) -> ModelTurn:
        self.requests.append([dict(m) for m in request.messages])
        return ModelTurn(reply=f"reply {len(self.requests)}")


def earlier(messages: list[dict[str, Any]]) -> list[str]:
    """The conversation sent before this run's own user message."""
    return [str(m["content"]) for m in messages[:-1] if m["role"] in ("user", "assistant")]


async def run_events(process: AgentProcess, count: int) -> None:
    start = process.invocation_count
    for n in range(count):
        await process.inject(TriggerEvent("t", "manual", {"n": n}))
    await wait_for(lambda: process.invocation_count == start + count)


def test_journal_defaults() -> None:
    assert JournalConfig().level == "checkpoint"
    assert JournalConfig(path="x.db").level == "checkpoint"
    assert ProcessConfig().journal.level == "none"  # no section, no journal
    assert ProcessConfig.model_validate({"journal": {"path": "x.db"}}).journal.level == \
        "checkpoint"


async def test_a_journal_section_with_only_a_path_journals(tmp_path: Path) -> None:
    config = ProcessConfig(journal={"path": str(tmp_path / "j.db")},
                           context={"initial_state": {"n": 0}})
    first = AgentProcess("pathonly", config, model=Recorder())
    await first.start()
    assert first.status()["journal_enabled"] is True
    await run_events(first, 1)
    await first.close()
    again = AgentProcess("pathonly", config, model=Recorder())
    await again.start()
    try:
        assert again.recovered is not None and again.recovered["invocation_count"] == 1
    finally:
        await again.close()


async def test_no_history_sends_no_earlier_messages_even_restored_ones(tmp_path: Path) -> None:
    journal = {"level": "checkpoint", "path": str(tmp_path / "j.db")}
    talker = Recorder()
    first = AgentProcess("chat", ProcessConfig(journal=journal), model=talker)
    await first.start()
    await run_events(first, 2)
    assert len(earlier(talker.requests[-1])) == 2  # history on: run 2 saw run 1's turn
    await first.close()

    quiet = Recorder()
    again = AgentProcess("chat", ProcessConfig(
        journal=journal, context={"conversation_history": False}), model=quiet)
    await again.start()
    try:
        assert again.recovered is not None and again.recovered["conversation_messages"] == 4
        await run_events(again, 2)
        assert [earlier(r) for r in quiet.requests] == [[], []]
        assert again.conversation.messages() == []
    finally:
        await again.close()


async def test_at_most_zero_messages_means_none() -> None:
    model = Recorder()
    process = AgentProcess("zero", ProcessConfig(context={"conversation_max_messages": 0}),
                           model=model)
    await process.start()
    try:
        await run_events(process, 3)
        assert [earlier(r) for r in model.requests] == [[], [], []]
        assert process.status()["conversation_messages"] == 0
    finally:
        await process.close()
