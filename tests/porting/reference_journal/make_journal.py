"""Writes the reference journal fixture beside this file with the real reference runtime.

Run with the reference installed in its own venv (never in promptui's):
    python -m venv /tmp/promptise-venv && /tmp/promptise-venv/bin/pip install promptise==1.10.1
    /tmp/promptise-venv/bin/python tests/porting/reference_journal/make_journal.py OUT_DIR

One process, ``order-desk``, journaled at the ``full`` level with a FileJournal: three runs that
succeed (the first writes the context with the ``update_state`` tool), one whose model raises
(an ``error`` entry: a dead letter, no retries), then a run that kills the interpreter with
``os._exit`` while the model is answering (mid-run: its ``trigger_event`` and
``invocation_start`` are journaled, its result never is). The exit status is 3.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from promptise.runtime import AgentProcess, ProcessConfig
from promptise.runtime.config import ContextConfig, JournalConfig
from promptise.runtime.triggers.base import TriggerEvent
from promptise.testing import ScriptedModel, ToolCall


class FailingModel(ScriptedModel):
    """The scripted model, except that a prompt saying FAIL raises and CRASH kills the process."""

    async def _agenerate(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
        last = str(messages[-1].content) if messages else ""
        if "CRASH" in last:
            os._exit(3)
        if "FAIL" in last:
            raise RuntimeError("the model is down (scripted failure)")
        return await super()._agenerate(messages, *args, **kwargs)


async def wait(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the reference process did not get there")
        await asyncio.sleep(0.05)


async def main(out: str) -> None:
    model = FailingModel([
        ToolCall("update_state", {"key": "orders_seen", "value": 1}),
        "Order A-1 recorded.",
        "Order A-2 recorded.",
        "Order A-3 recorded.",
    ])
    config = ProcessConfig(
        model=model,
        instructions="You keep the order desk.",
        context=ContextConfig(initial_state={"desk": "north"}, state_tool=True),
        journal=JournalConfig(level="full", backend="file", path=out),
    )
    process = AgentProcess("order-desk", config)
    await process.start()
    for n, text in enumerate(["order A-1", "order A-2", "order A-3"], 1):
        await process.inject(TriggerEvent(trigger_id="manual", trigger_type="manual",
                                          payload={"message": text}))
        await wait(lambda n=n: process.status()["invocation_count"] >= n)
    await process.inject(TriggerEvent(trigger_id="manual", trigger_type="manual",
                                      payload={"message": "FAIL order A-4"}))
    await wait(lambda: len(process.dead_letters) == 1)
    await process.inject(TriggerEvent(trigger_id="manual", trigger_type="manual",
                                      payload={"message": "CRASH order A-5"}))
    await asyncio.sleep(30)  # os._exit ends the process before this does
    raise SystemExit("the crash did not happen")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
