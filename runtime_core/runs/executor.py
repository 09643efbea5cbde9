"""The run executor drives one run for one event, one step at a time.

Each cycle asks the model for one turn, then either takes its final reply or runs the requested
tools one after another (runs/tool_step.py). Budgets (elapsed seconds, model calls, tool calls,
output characters) are checked independently. A final reply completes the run only when the
profile's completion evaluator accepts its evidence; otherwise the run waits for an operator.
A write tool whose answer never came parks the run too (runs/unknown_write.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from functools import cached_property
from typing import Any

from runtime_core import crashpoints, tracing
from runtime_core.agent.attachments import ATTACHMENTS_KEY, Attachment
from runtime_core.agent.model import ModelRequest, ModelTurn, ToolCall, ToolSpec
from runtime_core.context import Message
from runtime_core.events import RunStep
from runtime_core.journal.provider import JournalError
from runtime_core.runs.completion import (
    MISSING_COMPLETION_EVIDENCE,
    CompletionConfig,
    CompletionEvidence,
    Verifier,
    evaluate,
    resolve_evaluator,
)
from runtime_core.runs.run import (
    FailureReason,
    ResumePoint,
    Run,
    RunFailure,
    RunState,
    StepRecord,
    assistant_tool_message,
    render_event_message,
    time_left,
)
from runtime_core.runs.services import RunServices
from runtime_core.runs.tool_step import ToolStep
from runtime_core.runs.unknown_write import WriteOutcomeUnknown, park


def _tool_message(call: ToolCall, observation: str,
                  attachments: list[Attachment] | None = None) -> Message:
    message: Message = {"role": "tool", "tool_call_id": call.call_id, "name": call.name,
                        "content": observation}
    if attachments:  # images and other binary content, for a model that accepts them
        message[ATTACHMENTS_KEY] = [a.to_message() for a in attachments]
    return message


def _cancelled(run: Run) -> None:
    run.state = RunState.CANCELLED
    run.reason = "cancelled"
    run.error = "run cancelled"
    run.finished_at = time.time()


class RunExecutor:
    """Drives runs for one process. Holds what every run needs; keeps no per-run state itself."""

    def __init__(self, services: RunServices) -> None:
        self.services = services
        given = services.completion
        # No profile: any final response completes the run, as before there were contracts.
        self.evaluator = resolve_evaluator(given.evaluator if given else "final_reply")
        allowed = services.allowed_tools
        self.allowed = None if allowed is None else frozenset(allowed)
        self._tool_step = ToolStep(services, self.allowed,
                                   Verifier(list(given.verifications) if given else []),
                                   self._emit_step)

    # Both made at their first use, not here: a start is ready sooner (building a pydantic
    # model's validator and each tool's JSON schema took ~7 ms of a ~25 ms start).
    @cached_property
    def completion(self) -> CompletionConfig:
        """The completion contract runs are held to (the profile's, or any final reply)."""
        return self.services.completion or CompletionConfig(evaluator="final_reply")

    @cached_property
    def specs(self) -> list[ToolSpec]:
        """The tools the model is offered (the allowed ones), with their JSON schemas."""
        return [t.spec() for name, t in self.services.tools.items()
                if self.allowed is None or name in self.allowed]

    @property
    def tools(self) -> Any:
        return self.services.tools

    def _emit_step(self, run: Run, step: StepRecord, usage: ModelTurn | None = None) -> None:
        notifier = self.services.notifier
        if notifier.has_listeners:
            notifier.emit(RunStep(process=self.services.process, run_id=run.run_id,
                                  step=step.index, step_kind=step.kind, name=step.name,
                                  detail=step.result[:200],
                                  input_tokens=0 if usage is None else usage.usage.input_tokens,
                                  output_tokens=0 if usage is None
                                  else usage.usage.output_tokens))

    def _initial_messages(self, run: Run, memory: str | None) -> tuple[list[Message], Message]:
        s = self.services
        messages: list[Message] = []
        instructions = s.instructions()
        if instructions:
            messages.append({"role": "system", "content": instructions})
        if len(s.context):
            state = json.dumps(s.context.state_snapshot(), default=str)
            messages.append({"role": "system", "content": f"[Context State] {state}"})
        for line in s.prompt_lines:  # budget left, mission, inbox: each when it has something
            text = line()
            if text:
                messages.append({"role": "system", "content": text})
        if memory:
            messages.append({"role": "system", "content": memory})
        messages.extend(s.conversation.messages())
        # The goal frozen in the run's identity is exactly what the model is given.
        goal = run.identity.goal if run.identity is not None else None
        user = {"role": "user", "content": goal or render_event_message(run.event, run.run_id)}
        messages.append(user)
        return messages, user

    async def execute(self, run: Run, resume: ResumePoint | None = None) -> Run:
        """Drive ``run`` to a terminal state (or to waiting for evidence). Cancellation marks
        it cancelled and re-raises.

        With ``resume`` the run continues after the steps it had made durable before a crash:
        completed tool calls are not executed again."""
        run.state = RunState.RUNNING
        run.started_at = time.time()
        started = asyncio.get_running_loop().time()
        try:
            memory = await self.services.memory_block(run.event) \
                if self.services.memory_block is not None else None
        except asyncio.CancelledError:
            _cancelled(run)
            raise
        messages, user_message = self._initial_messages(run, memory)
        base = len(messages)
        step, remaining, final = self._resume(run, messages, resume)
        run.last_step = step
        try:
            reply = final if final is not None else await self._loop(
                run, messages, started, step, remaining)
        except asyncio.CancelledError:
            _cancelled(run)
            raise
        except WriteOutcomeUnknown as parked:  # waits for an operator, as after a crash
            park(run, parked, messages[base:])
            return run
        except RunFailure as failure:
            run.state = RunState.FAILED
            run.reason = failure.reason.value
            run.error = self.services.redact(str(failure))
        else:
            if not self._conclude(run, self.services.redact(reply), messages[base:],
                                  user_message):
                return run  # waiting for completion evidence
        finally:
            # A write's result may still be committing: what the run writes next that waits
            # (its end, its waiting entry) follows it in the journal and is durable with it.
            self._tool_step.forget(run)
        run.finished_at = time.time()
        return run

    @staticmethod
    def _resume(run: Run, messages: list[Message], resume: ResumePoint | None
                ) -> tuple[int, list[ToolCall], str | None]:
        """Put back what a resumed run had made durable: its history, counters and artifacts.
        Returns the step to go on from, the tool calls left of its last turn, and a final
        reply to judge again (evidence was supplied) if there is one."""
        if resume is None:
            return 0, [], None
        messages.extend(resume.history)
        run.model_calls = resume.model_calls
        run.tool_calls = resume.tool_calls
        run.output_chars = resume.output_chars
        run.artifacts = list(resume.artifacts)
        final = None
        if resume.final_reply is not None and resume.note is None:
            final = resume.final_reply  # evidence was supplied: judge the reply again
        elif resume.final_reply is not None:  # sent back to the model with a note
            messages.append({"role": "assistant", "content": resume.final_reply})
            messages.append({"role": "user", "content": f"[Operator] {resume.note}"})
        return resume.step, list(resume.remaining), final

    def _conclude(self, run: Run, reply: str, history: list[Message],
                  user_message: Message) -> bool:
        """Judge a final reply: succeeded (True), or waiting for evidence (False)."""
        verdict = evaluate(self.evaluator, CompletionEvidence(
            run.run_id, reply, tuple(run.artifacts), self.completion))
        if not verdict.satisfied:  # a final reply is not success without its evidence
            run.state = RunState.WAITING
            run.waiting_reason = MISSING_COMPLETION_EVIDENCE
            run.missing_evidence = verdict.missing
            run.reply = reply
            run.pending = ResumePoint(history, run.last_step, run.model_calls, run.tool_calls,
                                      run.output_chars, [], list(run.artifacts),
                                      final_reply=reply)
            return False
        run.state = RunState.SUCCEEDED
        run.reply = reply
        run.missing_evidence = ""
        run.messages = [user_message, {"role": "assistant", "content": reply}]
        self.services.conversation.commit(run.messages)
        return True

    async def _tools(self, run: Run, messages: list[Message], started: float, step: int,
                     calls: list[ToolCall] | tuple[ToolCall, ...]) -> int:
        for index, call in enumerate(calls):
            step += 1
            run.last_step = step
            try:
                observation, attachments = await self._tool_step.run(run, call, step, started)
            except WriteOutcomeUnknown as parked:  # the turn's later calls run once reconciled
                parked.remaining = list(calls[index + 1:])
                raise
            messages.append(_tool_message(call, observation, attachments))
        return step

    async def _loop(self, run: Run, messages: list[Message], started: float, step: int,
                    remaining: list[ToolCall]) -> str:
        budget = self.services.budget
        step = await self._tools(run, messages, started, step, remaining)
        while True:
            if budget.max_model_calls is not None and run.model_calls >= budget.max_model_calls:
                raise RunFailure(FailureReason.BUDGET,
                                 f"model-call budget of {budget.max_model_calls} used up")
            guard = self.services.autonomy
            if guard is not None:
                refused = guard.before_model_call()
                if refused is not None:
                    raise RunFailure(FailureReason.BUDGET, refused.message())
            turn = await self._model_step(run, messages, started, step + 1)
            step += 1
            run.last_step = step
            if not turn.tool_calls:
                self._tool_step.check(run)  # a write's result known lost fails the run
                return turn.reply or ""
            messages.append(assistant_tool_message(turn.reply, turn.tool_calls))
            step = await self._tools(run, messages, started, step, turn.tool_calls)

    async def _model_step(self, run: Run, messages: list[Message], started: float,
                          step: int) -> ModelTurn:
        """One model turn as step ``step``: its usage is journaled before the history it
        produced, and counted against the output budget."""
        s = self.services
        request = ModelRequest(messages, self.specs, run.run_id, run.model_calls, run.event)
        t0 = time.perf_counter()
        turn = await self._call_model(request, started)
        run.model_calls += 1
        if s.recorder is not None:
            try:
                s.recorder.model_turn(run.run_id, step, run.model_calls - 1, turn, messages)
            except JournalError as exc:
                raise RunFailure(FailureReason.PERSISTENCE, str(exc)) from exc
            crashpoints.reached("model_turn")  # held or submitted: nothing waited for it
        run.output_chars += len(turn.reply or "") + sum(
            len(c.name) + len(json.dumps(c.args, default=str)) for c in turn.tool_calls)
        record = StepRecord(step, "model", name=getattr(s.model, "name", "model"),
                            result=(turn.reply or ", ".join(c.name for c in turn.tool_calls))[
                                :200],
                            duration_ms=(time.perf_counter() - t0) * 1000.0)
        run.steps.append(record)
        self._emit_step(run, record, turn)
        limit = s.budget.max_output_chars
        if limit is not None and run.output_chars > limit:
            raise RunFailure(FailureReason.BUDGET, f"output budget of {limit} characters used up")
        return turn

    async def _call_model(self, request: ModelRequest, started: float) -> ModelTurn:
        remaining = time_left(self.services.budget.max_seconds, started)
        with tracing.model_call_span(getattr(self.services.model, "name", "model")) as span:
            turn = await self._timed_call(request, remaining, span)
        return turn

    async def _timed_call(self, request: ModelRequest, remaining: float | None,
                          span: tracing.CallSpan) -> ModelTurn:
        try:
            async with asyncio.timeout(remaining):
                turn = await self.services.model.complete(request)
        except TimeoutError:
            raise RunFailure(
                FailureReason.BUDGET, f"elapsed budget of {self.services.budget.max_seconds:g} s"
                " used up waiting for the model") from None
        except RunFailure:
            raise
        except Exception as exc:
            raise RunFailure(FailureReason.MODEL, f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(turn, ModelTurn):
            raise RunFailure(FailureReason.MODEL,
                             f"model returned {type(turn).__name__}, not a ModelTurn")
        span.usage(turn.usage.input_tokens, turn.usage.output_tokens)
        return turn
