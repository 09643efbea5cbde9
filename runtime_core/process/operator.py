"""What an operator answers for runs that wait: a write whose outcome is unknown is reconciled
(applied, not applied, failed); a reply waiting for completion evidence gets evidence, goes back
to the model with a note, or fails; an MCP server's question (elicitation) is accepted with the
values its form asks for, declined or cancelled. Each answer is journaled before it takes
effect; a finished run is never reopened."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

from runtime_core.delivery.dead_letters import DeadLetter
from runtime_core.process.core import ProcessCore
from runtime_core.process.journaling import ProcessJournal
from runtime_core.runs import evidence
from runtime_core.runs.recovery import RecoveredRun, stored_letter
from runtime_core.runs.run import RunState

SETTLE_WAIT = 10.0  # seconds an answer waits to be journaled and sent before returning


class Operator:
    def __init__(self, core: ProcessCore, journal: ProcessJournal) -> None:
        self.core = core
        self.journal = journal

    async def redeliver(self, event_ids: Iterable[str] | None) -> int:
        """Re-queue dead letters in order, as many as fit: those the process lists and the
        older ones only the journal still keeps."""
        core, delivery = self.core, self.core.delivery
        wanted = None if event_ids is None else list(event_ids)
        stored: list[DeadLetter] = []
        listed = len(delivery.dead_letters)
        if core.journal is not None and delivery.dead_letter_total > listed:
            older = delivery.dead_letter_total - listed
            stored = [stored_letter(d) for d in await core.journal.dead_letters(
                core.name, limit=older)]
        moved = delivery.redeliver(wanted, stored)
        if moved and core.journal is not None:
            # The journal's list is what readers page through: once this returns, a reader
            # must not see the letters it moved as still dead.
            await core.journal.flush()
        return moved

    async def reconcile(self, run_id: str, outcome: str, *, result: Any, note: str,
                        actor: str) -> None:
        core = self.core
        if core.waiting.get(run_id).rebuild.waiting_evidence:
            raise ValueError(f"run {run_id} waits for completion evidence, not for a write to "
                             "be reconciled: supply_evidence(), return_to_model() or "
                             "fail_waiting_run()")
        decision = core.waiting.decision(run_id, outcome, result, note, actor)
        if core.recorder is not None:  # a run parked live may belong to an unjournaled one
            await core.recorder.reconciled(run_id, decision)
        settled = core.waiting.settle(run_id, decision)
        if outcome == "failed":
            self.journal.finish_failed(settled)
            self.journal.checkpoint_soon()
            return
        self._continue(settled)

    async def answer(self, run_id: str, decide: str, data: Any = None, *, kind: str = "",
                     links: list[str] | None = None, note: str = "", actor: str) -> None:
        """``decide``: "supplied" (``data`` is the evidence), "returned" or "failed"."""
        waiting = self._evidence_wait(run_id)
        if decide == "supplied":
            decision = evidence.supplied(waiting, data, kind=kind, links=links, note=note,
                                         actor=actor)
        elif decide == "returned":
            decision = evidence.returned(note, actor)
        else:
            decision = evidence.failed(note, actor)
        core = self.core
        if core.recorder is not None:
            await core.recorder.evidence(run_id, decision.data)
        core.waiting.pop(run_id)
        settled = evidence.apply(waiting, decision)
        if decision.data["action"] != "failed":
            self._continue(settled)
            return
        run = settled.run
        run.state = RunState.FAILED
        run.reason = "operator"
        run.error = f"an operator failed the run: {settled.rebuild.failed_by_operator}"
        self.journal.record_run_end(run, event_done=True)
        core.delivery.succeeded(run.event)  # settled by the operator: not a dead letter
        core.recent_runs.append(run)
        self.journal.checkpoint_soon()

    async def answer_question(self, run_id: str, action: str, content: Any, *,
                              actor: str) -> None:
        """Answer the MCP server's question ``run_id`` waits on: ``accept`` with values for
        its form (checked against it: FormError names each bad field), ``decline`` or
        ``cancel``. Returns once the answer is journaled and on its way to the server."""
        from runtime_core.runs.server_asks import checked_answer  # MCP's half loads with a server

        question = self.core.waiting.question(run_id)
        if not question.give(checked_answer(question, action, content), actor):
            raise ValueError(f"run {run_id}'s question was answered already")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SETTLE_WAIT):
                await question.settled.wait()

    def _evidence_wait(self, run_id: str) -> RecoveredRun:
        finished = next((r for r in self.core.recent_runs if r.run_id == run_id), None)
        if finished is not None:  # a terminal run is returned as it is, never reopened
            raise ValueError(f"run {run_id} is {finished.state.value}: a finished run is never "
                             "reopened")
        waiting = self.core.waiting.get(run_id)
        if not waiting.rebuild.waiting_evidence:
            raise ValueError(f"run {run_id} waits for a write to be reconciled, not for "
                             "evidence: use reconcile()")
        return waiting

    def _continue(self, settled: RecoveredRun) -> None:
        """The run goes back on the queue and continues from where it waited."""
        core = self.core
        event_id = settled.run.event.event_id
        core.resume[event_id] = settled
        if not core.delivery.offer(settled.run.event):
            core.resume.pop(event_id, None)
