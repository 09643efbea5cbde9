"""From an event to a run: what a worker does with each event it takes. Refuse it (payload scan,
budget, a user_prompt_submit hook: dead-lettered, not a failure), start a run (or continue one a
crash or an operator left half-way), then settle the event: succeeded, retried with backoff,
dead-lettered, or parked waiting for completion evidence or for a write to be reconciled."""

from __future__ import annotations

import asyncio
import logging

from runtime_core import crashpoints, tracing
from runtime_core.delivery.dead_letters import DeadLetterReason
from runtime_core.events import RunFinished, RunStarted
from runtime_core.governance.hooks import HookEvent
from runtime_core.governance.payload_scan import scan_payload
from runtime_core.journal.provider import JournalError
from runtime_core.process.core import ProcessCore
from runtime_core.process.journaling import ProcessJournal
from runtime_core.process.ports import RunOutcomes
from runtime_core.runs import evidence, unknown_write
from runtime_core.runs.recovery import UNKNOWN_WRITE_OUTCOME
from runtime_core.runs.run import ResumePoint, Run, RunState, render_event_message
from runtime_core.triggers.base import TriggerEvent

log = logging.getLogger(__name__)


class Dispatch:
    """What the workers run for each event (the port EventRunner). It reports each settled
    event to ``outcomes`` (the restart policy) and each success to the journal's count."""

    def __init__(self, core: ProcessCore, journal: ProcessJournal,
                 outcomes: RunOutcomes) -> None:
        self.core = core
        self.journal = journal
        self.outcomes = outcomes

    async def handle_event(self, event: TriggerEvent, attempt: int) -> None:
        core = self.core
        executor = core.executor
        assert executor is not None
        resume: ResumePoint | None = None
        recovered = core.resume.pop(event.event_id, None)
        if recovered is None and await self._refused(event, attempt):
            return
        first = recovered.run if recovered is not None else None
        with tracing.run_span(core.name, event.event_id, event.trigger_type, attempt,
                              resumes=(first.trace_id, first.span_id) if first is not None
                              and first.trace_id and first.span_id else None) as traced:
            if recovered is not None:  # a run a crash or an operator left half-way: go on
                run = recovered.run
                run.state = RunState.QUEUED
                resume = recovered.resume_point()
                run.trace_id = run.trace_id or traced.trace_id
                run.span_id = run.span_id or traced.span_id
            else:
                run = self._new_run(event, attempt, traced)
            traced.set("promptui.run.id", run.run_id)
            self._started(run)
            try:
                await executor.execute(run, resume)
            except asyncio.CancelledError:
                self._cancelled(run)
                raise
            traced.outcome(run.state.value, run.reason, run.error)
            if run.state is RunState.WAITING:  # no completion evidence, or a write unknown
                await self._park(run)
                return
            await self._settle(run, traced)

    async def _refused(self, event: TriggerEvent, attempt: int) -> bool:
        """Refused, not failed: dead-lettered with no retry and no failure counted."""
        core = self.core
        delivery_cfg = core.config.trigger_delivery
        if delivery_cfg.scan_payloads:
            flagged = scan_payload(event.payload, delivery_cfg.max_payload_chars)
            if flagged:
                core.delivery.dead_letter(event, DeadLetterReason.FLAGGED_BY_PAYLOAD_SCAN,
                                          ", ".join(flagged), attempt)
                return True
        for part in core.parts:  # the day's budget
            if await part.refuse_run(event, attempt):
                return True
        if core.hooks.any(HookEvent.USER_PROMPT_SUBMIT):
            verdict = await core.hooks.dispatch(HookEvent.USER_PROMPT_SUBMIT,
                                                {"event": event.to_dict()})
            if verdict.blocked:
                core.delivery.dead_letter(event, DeadLetterReason.BLOCKED_BY_HOOK,
                                          verdict.reason, attempt)
                return True
        return False

    def _new_run(self, event: TriggerEvent, attempt: int, traced: tracing.RunSpan) -> Run:
        core = self.core
        run = Run(core.name, event, attempt, trace_id=traced.trace_id, span_id=traced.span_id)
        if core.stamp is not None:  # frozen now: what this run executes
            run.identity = core.stamp.for_goal(render_event_message(event, run.run_id))
        if core.recorder is not None:
            core.recorder.run_started(run.run_id, event.event_id, attempt,
                                      run.identity.to_dict() if run.identity else None,
                                      trace_id=run.trace_id, span_id=run.span_id)
        return run

    def _started(self, run: Run) -> None:
        core = self.core
        core.inflight[run.run_id] = run
        for part in core.parts:  # an incident links its run; health starts a fresh window
            part.run_started(run)
        core.touch()
        if core.notifier.has_listeners:
            core.notifier.emit(RunStarted(process=core.name, run_id=run.run_id,
                                          event_id=run.event.event_id,
                                          trigger_type=run.event.trigger_type,
                                          attempt=run.attempt))

    def _cancelled(self, run: Run) -> None:
        delivery = self.core.delivery
        if delivery.cancel_reason is None:
            # A stop that keeps the queue: no end is journaled, so the run stays open and the
            # next start goes on from its durable steps (a write cut off waits for an
            # operator); its event keeps its place at the head of the queue.
            self.core.inflight.pop(run.run_id, None)
            delivery.put_back(run.event)
            self._emit_finished(run)
            return
        self.journal.record_run_end(run, event_done=False)
        error = "run cancelled"
        if run.write_in_flight:  # say so: redelivering blindly could repeat that write
            error += (f" while write tool {run.write_in_flight} was running; its outcome is "
                      "unknown, check before redelivering")
        delivery.dead_letter(run.event, delivery.cancel_reason, error, run.attempt)
        self._run_done(run)

    async def _settle(self, run: Run, traced: tracing.RunSpan) -> None:
        core = self.core
        succeeded = run.state is RunState.SUCCEEDED
        durable = self.journal.record_run_end(run, event_done=succeeded)
        traced.journal_commit(durable)
        crashpoints.reached("run_end_submitted")  # submitted: maybe not yet durable
        if crashpoints.armed("run_end") and core.recorder is not None:
            await core.recorder.journal.flush()  # the end is durable, its checkpoint is not
            crashpoints.reached("run_end")
        hooked = core.hooks.any(HookEvent.RUN_END)
        if hooked and durable is not None:  # the hook is outside: it hears a durable end
            await self._durable(run, durable)
        if succeeded:  # counted before RunFinished announces it (see _run_done)
            core.delivery.succeeded(run.event)
            self.journal.count_invocation()
            self.outcomes.run_succeeded()
        else:
            self._failed(run)
        self._run_done(run, durable)
        for part in core.parts:  # health, budget and mission act on the outcome
            await part.after_run(run)
        if hooked:
            await core.hooks.dispatch(HookEvent.RUN_END, {
                "run_id": run.run_id, "state": run.state.value, "reason": run.reason,
                "reply": run.reply})
        self.journal.checkpoint_after_run()

    async def _durable(self, run: Run, durable: asyncio.Future[None]) -> None:
        try:
            await asyncio.shield(durable)
        except JournalError:
            log.critical("process %s: the end of run %s is not durable", self.core.name,
                         run.run_id)

    def _announce(self, run: Run, durable: asyncio.Future[None]) -> None:
        if not durable.cancelled() and durable.exception() is not None:
            log.critical("process %s: the end of run %s is not durable: %s", self.core.name,
                         run.run_id, durable.exception())
        self._emit_finished(run)

    def _failed(self, run: Run) -> None:
        core = self.core
        delivery = core.config.trigger_delivery
        if run.attempt <= delivery.max_retries:
            delay = min(delivery.retry_backoff_max,
                        delivery.retry_backoff * 2 ** (run.attempt - 1))
            core.delivery.schedule_retry(run.event, delay, core.refusal,
                                         lambda: core.keeping_queue,
                                         error=f"{run.reason}: {run.error}")
            return
        error = f"{run.reason}: {run.error}"
        core.delivery.dead_letter(run.event, DeadLetterReason.RETRIES_EXHAUSTED, error,
                                  run.attempt)
        self.outcomes.run_given_up(error)  # one failure more in a row; at the max: FAILED

    def _run_done(self, run: Run, durable: asyncio.Future[None] | None = None) -> None:
        """Bookkeeping once a run ends; announced (RunFinished: the room, the API's stream,
        subscribers) after the counters it changed are updated and once its end is durable,
        the worker going on meanwhile (its next entries follow the end in the journal)."""
        core = self.core
        core.inflight.pop(run.run_id, None)
        core.recent_runs.append(run)
        core.touch()
        if durable is None or durable.done():
            self._emit_finished(run)
        else:
            durable.add_done_callback(lambda future: self._announce(run, future))

    def _emit_finished(self, run: Run) -> None:
        core = self.core
        if core.notifier.has_listeners:
            core.notifier.emit(RunFinished(
                process=core.name, run_id=run.run_id, event_id=run.event.event_id,
                state=run.state.value, reason=run.reason, error=run.error,
                reply=run.reply[:500], duration_ms=run.duration_ms))

    async def _park(self, run: Run) -> None:
        """The run waits for an operator: its event stays accepted, nothing is retried (a write
        whose outcome is unknown is never dispatched again). It is listed as waiting (with its
        detail) before the journal write is awaited, so no reader sees a waiting run it cannot
        open; an answer is journaled after this entry anyway."""
        core = self.core
        core.inflight.pop(run.run_id, None)
        if run.waiting_reason == UNKNOWN_WRITE_OUTCOME:
            waiting = unknown_write.parked(run)
            assert waiting.rebuild.unknown is not None
            step, tool = waiting.rebuild.unknown.step, waiting.rebuild.unknown.call.name
            entry = unknown_write.waiting_entry(run)
        else:
            waiting, step, tool = evidence.parked(run), run.last_step, ""
            entry = evidence.waiting_entry(run)
        core.waiting.add(waiting)
        if core.recorder is not None:
            try:
                await core.recorder.run_waiting(run.run_id, step, tool, run.waiting_reason,
                                                **entry)
            except JournalError:
                log.critical("process %s: could not journal that run %s waits (%s)",
                             core.name, run.run_id, run.waiting_reason, exc_info=True)
        self.journal.checkpoint_soon()
