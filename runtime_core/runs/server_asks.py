"""A process's answers to what its MCP servers ask during a tool call of a run.

Elicitation: the run waits (reason ``elicitation``) with the server's question and form, listed
with the other waiting runs, until an operator answers (accept with values, decline, cancel),
the server's ``elicitation_timeout`` passes (cancel), the process stops (cancel) or the server
goes away (its connection ends: cancel by "server went away", naming the server and why, while
the process runs on). The question and the answer are journaled; the answer is durable before
the server gets it. The tool call itself stays open meanwhile: the run goes back to running as
soon as the answer is sent.

Sampling: the process's own model answers, as one model call of the run (checked against and
counted in its model-call budget), journaled as a model turn marked ``sampling``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runtime_core.agent.mcp.asks import (
    Elicitation,
    ElicitationAnswer,
    Sampling,
    SamplingRefused,
    SamplingReply,
)
from runtime_core.agent.mcp.elicit_form import ACTIONS, check_content
from runtime_core.agent.model import ModelRequest, ModelTurn
from runtime_core.events import RunStep
from runtime_core.governance.redaction import REDACTED, is_credential_name
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import JournalError
from runtime_core.runs.run import Run, RunState, StepRecord
from runtime_core.runs.services import RunServices

ELICITATION = "elicitation"
CANCEL = ElicitationAnswer("cancel")
#: who "answered" a question whose request was cut off: the server's end, or this side's
SERVER_GONE = "server went away"
STOPPED = "process stopped"


@dataclass(eq=False)
class Question:
    """A server's question a run waits on, and how it gets answered."""

    run: Run
    ask: Elicitation
    asked_at: float = field(default_factory=time.time)
    answer: asyncio.Future[tuple[ElicitationAnswer, str]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    #: why the server went away, when its connection ended under this question
    server_gone: str | None = None

    def detail(self) -> dict[str, Any]:
        """What an operator needs to answer: the question, the form, who asks and until when."""
        ask = self.ask
        return {
            "run_id": self.run.run_id, "event_id": self.run.event.event_id,
            "reason": ELICITATION, "server": ask.server, "tool": ask.call.tool,
            "step": ask.call.step, "message": ask.message, "mode": ask.mode,
            "requested_schema": ask.schema, "url": ask.url, "asked_at": self.asked_at,
            "expires_at": self.asked_at + ask.timeout, "actions": list(ACTIONS),
        }

    def give(self, answer: ElicitationAnswer, actor: str) -> bool:
        """Answer it (the first answer wins); False when it was answered already."""
        if self.answer.done():
            return False
        self.answer.set_result((answer, actor))
        return True


def checked_answer(question: Question, action: str, content: Any) -> ElicitationAnswer:
    """An operator's answer checked against the question: ``accept`` with the form's values
    (FormError, a ValueError, naming each bad field), ``decline`` or ``cancel``."""
    if action not in ACTIONS:
        raise ValueError(f"action must be accept, decline or cancel, not {action!r}")
    if action != "accept":
        return ElicitationAnswer(action)
    if question.ask.mode != "form":  # a URL: accepting says the operator will open it
        return ElicitationAnswer("accept")
    return ElicitationAnswer("accept", check_content(question.ask.schema, content or {}))


def _journaled_content(content: dict[str, Any] | None) -> dict[str, Any] | None:
    """The values as the journal keeps them: a field named like a credential is hidden (the
    recorder hides the process's scoped secrets in the rest)."""
    if content is None:
        return None
    return {key: REDACTED if is_credential_name(key) else value
            for key, value in content.items()}


class RunAsks:
    """The process's :class:`~runtime_core.agent.mcp.asks.AskHandler`, set on every link."""

    def __init__(self, services: RunServices, questions: Any,
                 find_run: Callable[[str], Run | None]) -> None:
        self.s = services
        self.questions = questions  # WaitingRuns: ask(), forget()
        self.find_run = find_run
        self._locks: dict[str, asyncio.Lock] = {}
        self._open: set[Question] = set()  # asked, not settled yet

    def server_gone(self, server: str, reason: str) -> None:
        """``server``'s connection ended under its questions: each waiting now is settled as
        cut off by the server ("server went away") when its request is cancelled."""
        for question in self._open:
            if question.ask.server == server and question.server_gone is None:
                question.server_gone = reason

    # -- elicitation -------------------------------------------------------------------------
    async def elicit(self, ask: Elicitation) -> ElicitationAnswer:
        run = self.find_run(ask.call.run_id)
        if run is None:  # the run ended meanwhile: nobody to ask for
            return CANCEL
        lock = self._locks.setdefault(run.run_id, asyncio.Lock())
        try:
            async with lock:  # a second question of the same call waits for the first's answer
                return await self._elicit(run, ask)
        finally:
            if not lock.locked():
                self._locks.pop(run.run_id, None)

    async def _elicit(self, run: Run, ask: Elicitation) -> ElicitationAnswer:
        question = Question(run, ask)
        recorder = self.s.recorder
        if recorder is not None:
            try:  # the question is durable before anyone is asked
                await recorder.elicitation_asked(run.run_id, {
                    "server": ask.server, "tool": ask.call.tool, "step": ask.call.step,
                    "message": ask.message, "mode": ask.mode, "requested_schema": ask.schema,
                    "url": ask.url, "timeout": ask.timeout})
            except JournalError:
                return CANCEL  # nothing durable, nothing asked
        run.state = RunState.WAITING
        run.waiting_reason = ELICITATION
        self._open.add(question)
        self.questions.ask(question)
        try:
            try:
                async with asyncio.timeout(ask.timeout):
                    answer, actor = await asyncio.shield(question.answer)
            except TimeoutError:
                answer, actor = CANCEL, "timeout"
        except asyncio.CancelledError:  # the server went away, or the run or process did
            gone = question.server_gone
            self._settle(question, CANCEL, STOPPED if gone is None else SERVER_GONE,
                         durable=False, reason=None if gone is None else (
                             f"MCP server {ask.server!r} went away while its question "
                             f"waited ({gone}); the process runs on"))
            raise
        await self._settle_durably(question, answer, actor)
        return answer

    async def _settle_durably(self, question: Question, answer: ElicitationAnswer,
                              actor: str) -> None:
        recorder = self.s.recorder
        if recorder is not None:
            # A journal that cannot write says so itself (degraded); the server gets its answer.
            with contextlib.suppress(JournalError):
                await recorder.elicitation_answered(question.run.run_id,
                                                    self._answer_data(question, answer, actor))
        self._settle(question, answer, actor, durable=True)

    def _settle(self, question: Question, answer: ElicitationAnswer, actor: str, *,
                durable: bool, reason: str | None = None) -> None:
        run, ask = question.run, question.ask
        self._open.discard(question)
        self.questions.forget(run.run_id, question)
        if not durable and self.s.recorder is not None:
            data = self._answer_data(question, answer, actor)
            if reason is not None:
                data["reason"] = reason
            with contextlib.suppress(JournalError):
                self.s.recorder.submit(EntryType.ELICITATION_ANSWERED, data,
                                       run_id=run.run_id)
        if run.state is RunState.WAITING and run.waiting_reason == ELICITATION:
            run.state = RunState.RUNNING
            run.waiting_reason = ""
        text = f"{answer.action} by {actor}"
        record = StepRecord(ask.call.step, ELICITATION, name=ask.server,
                            args={"message": ask.message[:200]}, result=text,
                            ok=answer.action == "accept",
                            duration_ms=(time.time() - question.asked_at) * 1000.0)
        run.steps.append(record)
        self._emit(run, record)
        question.settled.set()

    @staticmethod
    def _answer_data(question: Question, answer: ElicitationAnswer, actor: str
                     ) -> dict[str, Any]:
        ask = question.ask
        return {"server": ask.server, "tool": ask.call.tool, "step": ask.call.step,
                "action": answer.action, "content": _journaled_content(answer.content),
                "actor": actor}

    # -- sampling ----------------------------------------------------------------------------
    async def sample(self, ask: Sampling) -> SamplingReply:
        s = self.s
        run = self.find_run(ask.call.run_id)
        if run is None:
            raise SamplingRefused("the run that called the tool has ended")
        limit = s.budget.max_model_calls
        if limit is not None and run.model_calls >= limit:
            raise SamplingRefused(f"the run's model-call budget of {limit} is used up")
        output = s.budget.max_output_chars
        if output is not None and run.output_chars >= output:
            raise SamplingRefused(f"the run's output budget of {output} characters is used up")
        if s.autonomy is not None:
            refused = s.autonomy.before_model_call()
            if refused is not None:
                raise SamplingRefused(f"budget limit {refused.limit} reached "
                                      f"(limit {refused.limit_value:g})")
        messages: list[dict[str, Any]] = []
        if ask.system_prompt:
            messages.append({"role": "system", "content": ask.system_prompt})
        messages.extend(ask.messages)
        request = ModelRequest(messages, [], run.run_id, run.model_calls, run.event,
                               max_tokens=ask.max_tokens)
        t0 = time.perf_counter()
        left = None if s.budget.max_seconds is None or run.started_at is None else \
            s.budget.max_seconds - (time.time() - run.started_at)
        try:
            async with asyncio.timeout(None if left is None else max(0.0, left)):
                turn = await s.model.complete(request)
        except TimeoutError:
            raise SamplingRefused(f"the run's elapsed budget of {s.budget.max_seconds:g} s "
                                  "is used up") from None
        except Exception as exc:
            raise SamplingRefused(f"the model failed: {type(exc).__name__}: "
                                  f"{s.redact(str(exc))}") from None
        if not isinstance(turn, ModelTurn) or (not turn.reply and turn.tool_calls):
            raise SamplingRefused("the model did not answer with text")
        reply = turn.reply or ""
        run.model_calls += 1
        run.output_chars += len(reply)
        if s.recorder is not None:
            try:
                s.recorder.sampling_turn(run.run_id, ask.call.step, run.model_calls - 1, turn,
                                         ask.server, ask.call.tool, messages)
            except JournalError as exc:
                raise SamplingRefused(f"the journal cannot record the turn: {exc}") from None
        name = getattr(s.model, "name", "model")
        record = StepRecord(ask.call.step, "sampling", name=f"{name} for {ask.server}",
                            result=reply[:200],
                            duration_ms=(time.perf_counter() - t0) * 1000.0)
        run.steps.append(record)
        self._emit(run, record)
        return SamplingReply(reply, name, "endTurn")

    def _emit(self, run: Run, step: StepRecord) -> None:
        notifier = self.s.notifier
        if notifier.has_listeners:
            notifier.emit(RunStep(process=self.s.process, run_id=run.run_id, step=step.index,
                                  step_kind=step.kind, name=step.name,
                                  detail=step.result[:200]))
