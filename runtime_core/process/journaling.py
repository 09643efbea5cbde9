"""What one process keeps in its journal beyond the runs' own steps: preparing the journal and
taking back what it holds on the first start, checkpoints, run ends, transitions and context
updates."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from runtime_core.agent.script import ModelPrice
from runtime_core.delivery.dead_letters import DeadLetterReason
from runtime_core.events import (
    ContextUpdated,
    JournalDamaged,
    ProcessRecovered,
    ProcessStateChanged,
)
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import open_for_writing
from runtime_core.journal.recorder import ProcessRecorder
from runtime_core.lifecycle import ProcessState as S
from runtime_core.lifecycle import ProcessTransition
from runtime_core.process.core import ProcessCore, SuspensionRecord
from runtime_core.runs.recovery import RecoveredRun, Recovery, recover_process
from runtime_core.runs.run import Run, RunState

if TYPE_CHECKING:
    from runtime_core.journal.sqlite.schema import DamagedJournal

log = logging.getLogger(__name__)


class ProcessJournal:
    """The process's journaling. It listens to the core's lifecycle and context from the
    start, and it is the one writer of ``core.invocation_count``: the count replay rebuilds
    from the journal (the last checkpoint's, plus the runs that succeeded after it)."""

    def __init__(self, core: ProcessCore) -> None:
        self.core = core
        self.prepared = False
        self.owns_journal = False  # made from the config here, so closed here too
        self.take_back_next = False  # a stop kept the queue: the next open takes it back
        core.lifecycle.add_listener(self.on_transition)
        core.context.add_listener(self.on_context_update)

    # -- the first start ---------------------------------------------------------------------
    async def open(self) -> None:
        """Open the journal: the first time, prepare it and take back what it holds for this
        name; later (after stop() or close()), reopen it without a second recovery, unless
        the stop kept the queue: then the queue is taken back from the journal again."""
        if self.prepared:
            if self.core.journal is not None:
                await open_for_writing(self.core.journal)
                if self.take_back_next:
                    await self._take_back_queue()
                    self.take_back_next = False
            return
        await self._prepare()
        self.prepared = True

    async def _take_back_queue(self) -> None:
        """After a stop that kept the queue (an operator's, a shutdown): what the journal
        holds as accepted and not finished becomes the queue, taken back by recovery's own
        code as a new process object would, in place of the copy kept in memory, so each kept
        event runs once. A run the stop cut short goes on from its durable steps, or waits
        for an operator (a write cut off); runs already waiting stay as they are."""
        core = self.core
        recorder, journal = core.recorder, core.journal
        if recorder is None or journal is None:
            return  # no journal: the queue kept in memory is all there is, and it stays
        recorder.sealed = False  # a shutdown sealed it; this start writes again
        if not core.config.journal.recover_on_start:
            return  # recovery is off: the queue kept in memory stays as it is
        recovery = await recover_process(journal, recorder, core.name,
                                         core.config.context.conversation_max_messages,
                                         core.config.trigger_delivery.dead_letter_size,
                                         core.config.context.initial_state)
        if recovery is None:
            return
        known = {run.run_id for run in core.waiting.runs()}
        core.delivery.replace_queue(recovery.queued)
        core.resume = dict(recovery.resumable)
        for waiting in recovery.waiting.values():
            if waiting.run.run_id not in known:
                core.waiting.add(waiting)
        for failed in recovery.failed:
            if failed.run.run_id not in known:
                self.finish_failed(failed)

    async def reopen_owned(self) -> None:
        """Reopen the process's own journal if a failed start closed it, so a stop() can
        journal its checkpoint; a journal given to the process is left as its giver left it."""
        if self.prepared and self.owns_journal and self.core.journal is not None:
            await open_for_writing(self.core.journal)

    async def release(self) -> None:
        """Close the journal the process made from its config (its connection threads would
        keep the interpreter alive); the next start opens it again. A journal passed in
        (``journal=``, an AgentRuntime's shared one) is closed by whoever passed it."""
        if self.owns_journal and self.core.journal is not None:
            await self.core.journal.close()

    async def _prepare(self) -> None:
        core = self.core
        cfg = core.config.journal
        if core.journal is None and cfg.level == "none":
            return
        if core.journal is None:  # made here, so closed here too (a retried first start
            self.owns_journal = True  # finds it made already: still ours)
            from runtime_core.journal.factory import make_journal  # the backend the config names

            core.journal = make_journal(cfg, self._on_damage)
        journal = core.journal
        await open_for_writing(journal)
        from runtime_core.journal.retention import retain  # builds a config at import

        retain(journal, core.name, cfg.retention, core.config.context)  # in the background
        level = cfg.level if cfg.level != "none" else "checkpoint"
        recorder = core.recorder = ProcessRecorder(journal, core.name, core.process_id, level)
        if core.secrets is not None:  # every entry is redacted before it is written
            recorder.redact = core.secrets.redact_any
        price = getattr(core.config.model, "price", None)  # a model spec's (agent/script.py)
        if isinstance(price, ModelPrice):
            recorder.price = price.cost
        core.delivery.recorder = recorder
        recover = bool(cfg.recover_on_start)
        if recover:
            recovery = await recover_process(journal, recorder, core.name,
                                             core.config.context.conversation_max_messages,
                                             core.config.trigger_delivery.dead_letter_size,
                                             core.config.context.initial_state)
            if recovery is not None:
                self._take_back(recovery)
        for part in core.parts:
            await part.journal_ready(journal, recorder, recover)
        # After recovery, which reports the state the journal last recorded.
        recorder.transition(S.CREATED.value, S.STARTING.value, "start()")

    def _take_back(self, recovery: Recovery) -> None:
        core = self.core
        state = dict(core.config.context.initial_state)
        state.update(recovery.context_state)
        core.context.replace_state(state)
        core.conversation.set_messages(recovery.conversation)
        core.invocation_count = recovery.invocation_count
        saved = recovery.checkpoint or {}
        core.suspension = SuspensionRecord.from_dict(saved.get("suspension"))
        for part in core.parts:  # the mission, the budget counters, the health history
            kept = saved.get(part.key)
            if isinstance(kept, dict) and part.restore(kept):
                flag = f"{part.key}_restored"
                if flag in recovery.summary:
                    recovery.summary[flag] = True
        core.delivery.restore(recovery.queued, recovery.dead, recovery.dead_total)
        core.resume = recovery.resumable
        for waiting in recovery.waiting.values():
            core.waiting.add(waiting)
        for failed in recovery.failed:
            self.finish_failed(failed)
        core.recovered = recovery.summary
        core.notifier.emit(ProcessRecovered(process=core.name, summary=dict(recovery.summary)))

    def _on_damage(self, damage: DamagedJournal) -> None:
        self.core.notifier.emit(JournalDamaged(
            process=self.core.name, path=str(damage.path), reason=damage.reason,
            moved_to=str(damage.moved_to or "")))

    # -- runs ------------------------------------------------------------------------------------
    def count_invocation(self) -> None:
        """A run succeeded (dispatch tells): one invocation more, journal or not."""
        self.core.invocation_count += 1

    def record_run_end(self, run: Run, *, event_done: bool) -> asyncio.Future[None] | None:
        """Submit the run's end; the future resolves once it is durable (None: not journaled).
        The outcome is reported to no one outside before that (see the recorder)."""
        recorder = self.core.recorder
        if recorder is None:
            return None
        try:
            return recorder.run_finished(run.run_id, run.event.event_id, run.state.value,
                                         run.reason, run.error, run.reply, event_done,
                                         run.messages)
        except Exception:  # the run's outcome is already decided; a journal fault is logged
            log.critical("process %s: could not journal the end of run %s", self.core.name,
                         run.run_id, exc_info=True)
            return None

    def finish_failed(self, failed: RecoveredRun) -> None:
        """A run an operator reconciled as failed: its event goes to the dead letters."""
        run = failed.run
        run.state = RunState.FAILED
        run.reason = "reconciled"
        run.error = f"an operator reconciled the write as failed: " \
                    f"{failed.rebuild.failed_by_operator}"
        self.record_run_end(run, event_done=False)
        self.core.delivery.dead_letter(run.event, DeadLetterReason.RETRIES_EXHAUSTED,
                                       f"{run.reason}: {run.error}", run.attempt)
        self.core.recent_runs.append(run)

    # -- checkpoints -------------------------------------------------------------------------------
    def checkpoint_state(self) -> dict[str, Any]:
        core = self.core
        state: dict[str, Any] = {
            "context_state": core.context.state_snapshot(),
            "lifecycle_state": core.state.value,
            "invocation_count": core.invocation_count,
            "consecutive_failures": core.consecutive_failures,
            "restart_count": core.restart_count,
        }
        if core.suspension is not None and core.suspension.kept:  # kept by a restart
            state["suspension"] = core.suspension.as_dict()
        for part in core.parts:
            kept = part.snapshot()
            if kept is not None:
                state[part.key] = kept
        return state

    async def suspension_changed(self) -> None:
        """A kept suspension began or ended: a checkpoint says so, durable before this
        returns (a journal that cannot be written is logged: the suspension itself stands)."""
        if self.core.recorder is None:
            return
        self.checkpoint_soon()
        try:
            await self.flush()
        except Exception as exc:
            log.error("process %s: the suspension's checkpoint is not durable (%s): a restart "
                      "may not keep it", self.core.name, exc)

    def checkpoint_after_run(self) -> None:
        """A checkpoint every ``checkpoint_every`` runs, or once the entries since the last one
        pass ``checkpoint_entries``; after every run for a process whose parts keep state that a
        crash must not roll back (a day's budget, a mission, a health history). Recovery reads
        the last checkpoint and the tail after it, so the tail's bound is recovery's bound."""
        core = self.core
        recorder = core.recorder
        if recorder is None:
            return
        cfg = core.config.journal
        if (core.parts or recorder.runs_since_checkpoint + 1 >= cfg.checkpoint_every
                or recorder.entries_since_checkpoint >= cfg.checkpoint_entries):
            self.checkpoint_soon()
        else:
            recorder.runs_since_checkpoint += 1

    def checkpoint_soon(self) -> None:
        if self.core.recorder is not None:
            try:
                self.core.recorder.checkpoint(self.checkpoint_state())
            except Exception:
                log.critical("process %s: checkpoint failed", self.core.name, exc_info=True)

    async def checkpoint(self, *, durable: bool) -> None:
        if self.core.recorder is None:
            return
        self.checkpoint_soon()
        if durable:
            await self.flush()

    async def seal(self, kept: int) -> None:
        """A SHUTDOWN entry (``kept`` events pending), after which nothing is journaled."""
        recorder = self.core.recorder
        if recorder is not None and not recorder.sealed:
            await recorder.append(EntryType.SHUTDOWN, {"pending": kept})
            recorder.sealed = True

    async def flush(self) -> None:
        """Return once everything submitted so far is on disk."""
        if self.core.recorder is not None:
            await self.core.recorder.journal.flush()

    # -- listeners ---------------------------------------------------------------------------------
    def on_transition(self, record: ProcessTransition) -> None:
        core = self.core
        if core.recorder is not None:
            try:
                core.recorder.transition(record.from_state.value, record.to_state.value,
                                         record.reason)
            except Exception:
                log.critical("process %s: could not journal a transition", core.name,
                             exc_info=True)
        core.notifier.emit(ProcessStateChanged(
            process=core.name, from_state=record.from_state.value,
            to_state=record.to_state.value, reason=record.reason))

    def on_context_update(self, key: str, value: Any, source: str, record: bool) -> None:
        core = self.core
        if record and core.recorder is not None:
            core.recorder.context_update(key, value, source)
        if core.notifier.has_listeners:
            core.notifier.emit(ContextUpdated(process=core.name, key=key, source=source))
