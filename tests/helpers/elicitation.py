"""A process with our asking MCP server (tests/helpers/workers/asking_server.py over stdio),
whose ``book`` tool asks the operator a question before it answers: the process's config, the
process started in a runtime, and waits for its question and its run's end."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from runtime_core import AgentProcess, AgentRuntime
from runtime_core.control import LocalControl
from runtime_core.journal import InMemoryJournal
from runtime_core.runs.run import Run
from tests.helpers.polling import wait_for
from tests.helpers.workers import ASKING_SERVER

CONNECT = 20.0
BOOK = {"tool_calls": [{"name": "book", "args": {"flight": "LH123"}}]}
ANSWER = {"name": "Ann", "seats": 2, "meal": "fish"}


def asking_server(**extra: Any) -> dict[str, Any]:
    """The asking server over stdio, as a process's ``servers`` entry."""
    return {"command": "python", "args": [str(ASKING_SERVER)], "timeout": CONNECT, **extra}


def config(*turns: dict[str, Any], **server_extra: Any) -> dict[str, Any]:
    """A process with the scripted ``turns`` and the asking server (``server_extra``: more of
    its entry), journaled in memory, one attempt per event."""
    return {"model": {"provider": "scripted", "turns": list(turns)},
            "servers": {"asking": asking_server(**server_extra)},
            "journal": {"level": "full", "backend": "memory"},
            "trigger_delivery": {"max_retries": 0}}


@asynccontextmanager
async def started(cfg: dict[str, Any]) -> AsyncIterator[tuple[AgentProcess, LocalControl,
                                                               InMemoryJournal]]:
    runtime = AgentRuntime()
    process = runtime.add_process("p", cfg)
    control = LocalControl(runtime, name="t")
    await runtime.start_all()
    journal = process.journal
    assert isinstance(journal, InMemoryJournal)
    try:
        yield process, control, journal
    finally:
        await runtime.close()


async def waiting_question(process: AgentProcess, timeout: float = 30.0) -> Run:
    await wait_for(lambda: any(r.waiting_reason == "elicitation"
                               for r in process.waiting_runs()), timeout, "a server's question")
    return process.waiting_runs()[0]


async def finished(process: AgentProcess, count: int = 1, timeout: float = 30.0) -> Run:
    await wait_for(lambda: len(process.recent_runs()) >= count, timeout, "the run to finish")
    return process.recent_runs()[-1]


def tool_result(run: Run, tool: str) -> str:
    return next(s.result for s in run.steps if s.kind == "tool" and s.name == tool)
