"""One tool call of a run, in three parts: check it (policy, known tool, budgets, hooks,
arguments), invoke it (its intent durable first), then settle it (result, context updates and
artifacts in one journal entry; events and messages it sent delivered only if it succeeded).

A write's result is submitted without waiting (the next model turn overlaps its commit) and
waited for before anything outside hears of the write: a post_tool hook, the next call's
pre_tool hook, a message the tool sent. The run's next intent and its end wait for their own
commits, which follow it in the journal. A crash before it commits leaves the write open, as a
crash inside the tool does (the run waits with unknown_write_outcome).

A refusal or a raising tool is an observation for the model, never a failed run. A write whose
answer never came (``OutcomeUnknown``) is the exception: the run parks (runs/unknown_write.py)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from runtime_core import crashpoints, tracing
from runtime_core.agent.attachments import Attachment
from runtime_core.agent.model import ToolCall
from runtime_core.agent.tools import AgentTool, OutcomeUnknown, ToolContext
from runtime_core.events import ToolProgress
from runtime_core.journal.provider import JournalError
from runtime_core.runs.completion import Artifact, Verifier
from runtime_core.runs.progress import ProgressReporter
from runtime_core.runs.run import FailureReason, Run, RunFailure, StepRecord, time_left
from runtime_core.runs.services import RunServices
from runtime_core.runs.unknown_write import WriteOutcomeUnknown, interrupted_read, unknown_write

OBSERVATION_CHARS = 4000


def observation(text: str, limit: int = OBSERVATION_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 20] + " ...[truncated]"


def stringify(result: Any) -> str:
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, default=str)
    except (TypeError, ValueError):
        return repr(result)


class _Refused(Exception):
    """The call is not made; the message is the model's observation."""


class ToolStep:
    def __init__(self, services: RunServices, allowed: frozenset[str] | None,
                 verifier: Verifier, emit_step: Callable[[Run, StepRecord], None]) -> None:
        self.s = services
        self.allowed = allowed
        self.verifier = verifier
        self.emit_step = emit_step
        #: run id -> the commit of its last write's result, not waited for yet.
        self._unsettled: dict[str, asyncio.Future[None]] = {}

    async def settled(self, run: Run) -> None:
        """Wait until ``run``'s last write result is durable: before anything outside (a
        hook, a message the tool sent) hears of that write. Its journal failing fails the run
        (persistence), as when the result was awaited in place."""
        durable = self._unsettled.pop(run.run_id, None)
        if durable is None:
            return
        try:
            await asyncio.shield(durable)
        except JournalError as exc:
            raise RunFailure(FailureReason.PERSISTENCE, str(exc)) from exc

    def _hooked(self, name: str) -> bool:
        if self.s.hooks is None:
            return False
        return self.s.hooked is None or self.s.hooked(name)

    def check(self, run: Run) -> None:
        """Fail ``run`` (persistence) if its last write's result is known not to be written
        (a failed or fenced journal), without waiting for it."""
        durable = self._unsettled.get(run.run_id)
        if durable is not None and durable.done() and not durable.cancelled():
            error = durable.exception()
            if isinstance(error, JournalError):
                raise RunFailure(FailureReason.PERSISTENCE, str(error)) from error

    def forget(self, run: Run) -> None:
        """``run`` has ended (its end or a waiting entry follows its results in the journal)."""
        self._unsettled.pop(run.run_id, None)

    async def run(self, run: Run, call: ToolCall, step: int, started: float
                  ) -> tuple[str, list[Attachment]]:
        """Run ``call`` as step ``step``; returns what the model reads back, and the binary
        content (images...) the tool returned with it."""
        with tracing.tool_call_span(call.name, call.call_id, step) as span:
            return await self._run(run, call, step, started, span)

    async def _run(self, run: Run, call: ToolCall, step: int, started: float,
                   span: tracing.CallSpan) -> tuple[str, list[Attachment]]:
        t0 = time.perf_counter()
        try:
            tool, args = await self._check(run, call, step)
        except _Refused as refused:
            span.set("promptui.tool.outcome", "refused")
            return self._refusal(run, call, step, t0, str(refused)), []
        span.set("promptui.tool.effect", tool.effect)
        span.set("promptui.tool.idempotency_key", f"{run.run_id}:{step}")
        run.tool_calls += 1
        if self.s.watch_tool_call is not None:
            await self.s.watch_tool_call(call.name, args)
        ctx = ToolContext(self.s.process, run.run_id, step, run.event,
                          self.s.context.state_snapshot(), secrets=self._secret_getter(),
                          fencing_token=self.s.fencing_token)
        reporter = ctx.on_progress = self._progress(run, call, step)
        try:
            ok, text = await self._invoke(run, call, step, started, tool, args, ctx)
        except WriteOutcomeUnknown as parked:  # shown on the run's steps; the run waits
            span.set("promptui.tool.outcome", "unknown")
            record = StepRecord(step, "tool", name=call.name, args=call.args, ok=False,
                                result=f"outcome unknown: {parked.unknown.cause}; the run "
                                "waits for an operator to reconcile it",
                                duration_ms=(time.perf_counter() - t0) * 1000.0)
            run.steps.append(record)
            self.emit_step(run, record)
            raise
        finally:
            reporter.close()
        text = await self._settle(run, call, step, t0, tool, args, ctx, ok, text)
        span.set("promptui.tool.outcome", "ok" if run.steps[-1].ok else "error")
        if not run.steps[-1].ok:
            span.failed("the tool call failed")
        return text, list(ctx.attachments) if ok else []

    def _progress(self, run: Run, call: ToolCall, step: int) -> ProgressReporter:
        """Progress of this call, shown on the running step in the room."""
        def make(progress: float, total: float | None, message: str) -> ToolProgress:
            return ToolProgress(process=self.s.process, run_id=run.run_id, step=step,
                                tool=call.name, progress=progress, total=total,
                                message=self.s.redact(message))
        return ProgressReporter(make, self.s.notifier.emit)

    async def _check(self, run: Run, call: ToolCall, step: int
                     ) -> tuple[AgentTool, dict[str, Any]]:
        tools = self.s.tools
        tool = tools.get(call.name)
        if self.allowed is not None and call.name not in self.allowed:
            raise _Refused(f"tool {call.name!r} refused by policy: not in allowed_tools")
        if tool is None:
            known = ", ".join(sorted(tools)) or "none"
            raise _Refused(f"unknown tool {call.name!r} (available: {known})")
        limit = self.s.budget.max_tool_calls
        if limit is not None and run.tool_calls >= limit:
            raise RunFailure(FailureReason.BUDGET, f"tool-call budget of {limit} used up")
        raw_args = call.args
        if self.s.hooks is not None:  # a pre_tool hook may block the call or rewrite its args
            if self._hooked("pre_tool"):  # outside: the last write's result durable first
                await self.settled(run)
            blocked, reason, data = await self.s.hooks(
                "pre_tool", {"tool": call.name, "args": dict(call.args), "run_id": run.run_id,
                             "step": step})
            if blocked:
                raise _Refused(f"tool {call.name!r} blocked by hook: {reason}")
            if isinstance(data.get("args"), dict):
                raw_args = data["args"]
        try:
            args = tool.validate_args(raw_args)
        except ValueError as exc:
            raise _Refused(str(exc)) from None
        if self.s.autonomy is not None:
            refused = self.s.autonomy.before_tool_call(call.name)
            if refused is not None:  # not executed: the model is told why
                raise _Refused(refused.message())
        return tool, args

    async def _invoke(self, run: Run, call: ToolCall, step: int, started: float,
                      tool: AgentTool, args: dict[str, Any], ctx: ToolContext
                      ) -> tuple[bool, str]:
        remaining = time_left(self.s.budget.max_seconds, started)
        recorder = self.s.recorder
        if recorder is not None:
            try:  # the intent is durable before any tool runs
                await recorder.tool_intent(run.run_id, step, call, tool.effect,
                                           tool.journal_info)
            except JournalError as exc:
                raise RunFailure(FailureReason.PERSISTENCE, str(exc)) from exc
            crashpoints.reached("tool_intent")
        if tool.effect == "write":
            run.write_in_flight = f"{call.name} ({ctx.idempotency_key})"
        try:
            async with asyncio.timeout(remaining):
                result = await tool.invoke(args, ctx)
        except TimeoutError:
            raise RunFailure(
                FailureReason.BUDGET, f"elapsed budget of {self.s.budget.max_seconds:g} s "
                f"used up in tool {call.name!r}") from None
        except OutcomeUnknown as exc:  # the call was cut off: a write may have taken effect
            cause = self.s.redact(str(exc) or type(exc).__name__)
            if tool.effect == "write":
                raise unknown_write(call, step, ctx.idempotency_key, tool.journal_info,
                                    cause) from None
            ok, text = False, interrupted_read(cause)
        except Exception as exc:  # a failing tool is an observation, not a failed run
            ok, text = False, f"error: {type(exc).__name__}: {exc}"
        else:
            ok, text = True, stringify(result)
        run.write_in_flight = ""  # not reached on cancellation: the write's outcome is unknown
        return ok, text

    async def _settle(self, run: Run, call: ToolCall, step: int, t0: float, tool: AgentTool,
                      args: dict[str, Any], ctx: ToolContext, ok: bool, text: str) -> str:
        secrets = self.s.secrets
        if secrets is not None:  # the model, the journal and the screen never see one
            text = secrets.redact(text)
            for name in ctx.secrets_used:
                secrets.notify_access(name)
        updates = ctx.updates if ok else {}
        for key in updates:
            if not self.s.context.is_writable(key):
                ok, text, updates = False, f"error: context key {key!r} is not writable", {}
                break
        artifacts = self._artifacts(run, step, call, tool.effect, ctx, text) if ok else []
        if self.s.recorder is not None:
            try:  # result, context updates and the artifacts it produced in one entry
                durable = self.s.recorder.tool_result(
                    run.run_id, step, call, tool.effect, observation(text), ok, updates,
                    [a.to_dict() for a in artifacts],
                    attachments=[a.to_journal() for a in ctx.attachments] if ok else None)
            except JournalError as exc:
                raise RunFailure(FailureReason.PERSISTENCE, str(exc)) from exc
            if durable is not None:  # a write's: waited for before the write is heard of
                self._unsettled[run.run_id] = durable
            crashpoints.reached("tool_returned")  # submitted: maybe not yet durable
            if crashpoints.armed("tool_result"):
                await self.settled(run)
            crashpoints.reached("tool_result")
        run.artifacts.extend(artifacts)
        for key, value in updates.items():
            self.s.context.put(key, value, source=f"tool:{call.name}", record=False)
        if self._hooked("post_tool") or (ok and ctx.outbox):
            await self.settled(run)
        if self.s.hooks is not None:
            await self.s.hooks("post_tool", {"tool": call.name, "args": args, "ok": ok,
                                             "result": observation(text), "run_id": run.run_id})
        if ok:
            self._deliver_outbox(ctx)
        record = StepRecord(step, "tool", name=call.name, args=call.args,
                            result=observation(text), ok=ok,
                            duration_ms=(time.perf_counter() - t0) * 1000.0)
        run.steps.append(record)
        self.emit_step(run, record)
        return record.result

    def _artifacts(self, run: Run, step: int, call: ToolCall, effect: str, ctx: ToolContext,
                   text: str) -> list[Artifact]:
        """The evidence a successful tool call produced: what it declared, an ``action`` for a
        write (its id is the idempotency key), and verifications the profile's rules make."""
        made = [Artifact(f"{run.run_id}:{step}:a{n}", kind, step, call.name,
                         self._redact_data(data), tuple(links))
                for n, (kind, data, links) in enumerate(ctx.artifacts)]
        if effect == "write":
            made.append(Artifact(ctx.idempotency_key, "action", step, call.name,
                                 self._redact_data({"args": call.args})))
        elif self.verifier:
            made.extend(self.verifier.artifacts_for(run.run_id, step, call.name, text,
                                                    run.artifacts))
        return made

    def _redact_data(self, data: Any) -> Any:
        if self.s.secrets is None:
            return data
        return json.loads(self.s.secrets.redact(json.dumps(data, default=str)))

    def _deliver_outbox(self, ctx: ToolContext) -> None:
        """Bus events and broker messages a tool sent: delivered only if the tool succeeded."""
        for channel, name, body in ctx.outbox:
            if channel == "event" and self.s.event_bus is not None:
                self.s.event_bus.emit(name, body, source=self.s.process)
            elif channel == "message" and self.s.broker is not None:
                self.s.broker.publish(name, body, sender=self.s.process)

    def _secret_getter(self) -> Callable[[str], str] | None:
        scope = self.s.secrets
        if scope is None:
            return None
        return lambda name: scope.get(name, notify=False)  # may run in a tool's thread

    def _refusal(self, run: Run, call: ToolCall, step: int, t0: float, message: str) -> str:
        record = StepRecord(step, "refused", name=call.name, args=call.args, result=message,
                            ok=False, duration_ms=(time.perf_counter() - t0) * 1000.0)
        run.steps.append(record)
        self.emit_step(run, record)
        if self.s.recorder is not None:
            try:
                self.s.recorder.tool_refused(run.run_id, step, call, message)
            except JournalError as exc:
                raise RunFailure(FailureReason.PERSISTENCE, str(exc)) from exc
        return message
