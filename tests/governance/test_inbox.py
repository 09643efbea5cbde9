"""The operator inbox through AgentProcess: messages reach the next run's prompt, ask() wakes
the agent and returns its answer, limits and errors are clear."""

from __future__ import annotations

import pytest

from runtime_core import AgentProcess, ModelRequest, ModelTurn, ProcessConfig


class Reader:
    """A model that answers the first question it sees and records the system prompt."""

    name = "reader"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def complete(self, request: ModelRequest) -> ModelTurn:
        system = "\n".join(m["content"] for m in request.messages if m["role"] == "system")
        self.prompts.append(system)
        if "[QUESTION Q1" in system:
            return ModelTurn(reply="Checked. ANSWER Q1: all 12 services are up")
        return ModelTurn(reply="nothing asked")


async def test_messages_reach_the_prompt_and_ask_gets_an_answer() -> None:
    model = Reader()
    process = AgentProcess("p", ProcessConfig(inbox={"enabled": True}), model=model)
    await process.start()
    message_id = await process.send_message("Deploy freeze until 18:00", message_type="directive",
                                            priority="high", sender_id="alice")
    assert message_id.startswith("msg_")
    assert process.status()["inbox"]["pending_messages"] == 1
    answer = await process.ask("Are all services up?", sender_id="bob", timeout=5)
    assert answer == "all 12 services are up"
    assert "[HIGH DIRECTIVE from alice] Deploy freeze until 18:00" in model.prompts[-1]
    assert process.recent_runs()[-1].event.trigger_type == "inbox"
    assert process.status()["inbox"]["pending_messages"] == 0  # seen and answered
    await process.stop()


async def test_scripted_agents_can_answer_too() -> None:
    config = ProcessConfig(inbox={"enabled": True}, model={
        "provider": "scripted", "turns": [{"reply": "ok"}],
        "scripts": {"answer": [{"reply": "ANSWER Q1: yes"}]},
        "select": {"by_trigger_type": {"inbox": "answer"}}})
    process = AgentProcess("p", config)
    await process.start()
    assert await process.ask("Still alive?", timeout=5) == "yes"
    await process.stop()


async def test_unanswered_questions_time_out_and_errors_are_clear() -> None:
    process = AgentProcess("p", ProcessConfig(inbox={"enabled": True, "rate_limit_per_sender": 1}))
    await process.start()
    with pytest.raises(TimeoutError, match="did not answer"):
        await process.ask("echo never answers", timeout=0.3)
    await process.send_message("one", sender_id="carol")
    with pytest.raises(ValueError, match="rate limit exceeded"):
        await process.send_message("two", sender_id="carol")
    await process.stop()
    with pytest.raises(RuntimeError, match="is stopped"):
        await process.send_message("late")
    plain = AgentProcess("q", ProcessConfig())
    with pytest.raises(RuntimeError, match="no inbox"):
        await plain.send_message("hi")
