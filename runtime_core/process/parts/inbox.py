"""The operator inbox as a part: messages and questions shown in the next run's prompt; a
question wakes the agent with an ``inbox`` event and is answered from its reply."""

from __future__ import annotations

import asyncio

from runtime_core.governance.inbox import Inbox
from runtime_core.lifecycle import ProcessState as S
from runtime_core.process.core import Part, PartStatus, ProcessCore
from runtime_core.process.parts.actions import PartActions
from runtime_core.runs.run import Run, RunState
from runtime_core.triggers.base import TriggerEvent


class InboxPart(Part):
    key = "inbox"

    def __init__(self, core: ProcessCore, actions: PartActions) -> None:
        self.core = core
        self.actions = actions
        self.inbox = Inbox(core.config.inbox, core.clock)

    def report(self, into: PartStatus) -> None:
        into.inbox = dict(self.inbox.status())

    def prompt_line(self) -> str | None:
        return self.inbox.prompt_block()

    async def after_run(self, run: Run) -> None:
        if run.state is RunState.SUCCEEDED:
            self.inbox.after_run(run.reply)

    async def close(self) -> None:
        self.inbox.clear()

    def _open(self) -> Inbox:
        state = self.core.state
        if state in (S.STOPPED, S.STOPPING, S.FAILED):
            raise RuntimeError(f"process {self.core.name!r} is {state.value}: start it first")
        return self.inbox

    def send(self, content: str, *, message_type: str, priority: str, sender_id: str | None,
             ttl: float | None) -> str:
        message = self._open().add(content, message_type=message_type, priority=priority,
                                   sender_id=sender_id, ttl=ttl)
        return message.message_id

    async def ask(self, content: str, *, sender_id: str | None,
                  timeout: float) -> str:  # noqa: ASYNC109  (the spec API)
        message = self._open().add(content, message_type="question", priority="high",
                                   sender_id=sender_id, ttl=timeout + 60)
        assert message.answer is not None
        await self.actions.injector.inject(TriggerEvent("inbox", "inbox", {
            "question": content, "question_id": message.message_id}))
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(message.answer)
        except TimeoutError:
            raise TimeoutError(f"process {self.core.name!r} did not answer within "
                               f"{timeout:g} s") from None
