"""The life of a process: start, stop, close, suspend and resume; the restart policy with its
backoff (and its counters: the failures in a row and the restarts); the heartbeat that suspends
an idle process and recycles or stops one at its maximum lifetime; and the teardown that leaves
nothing behind (workers, triggers, timers, servers)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Any

from runtime_core.delivery.dead_letters import DeadLetterReason
from runtime_core.events import (
    ProcessDraining,
    ProcessFailed,
    ProcessRestarted,
    ProcessStarted,
    ProcessStopped,
    RestartExhausted,
)
from runtime_core.governance.hooks import HookEvent
from runtime_core.journal.provider import JournalError
from runtime_core.lifecycle import ProcessState, StateError, config_field
from runtime_core.process.assembly import Assembly
from runtime_core.process.core import ProcessCore, SuspensionRecord
from runtime_core.process.journaling import ProcessJournal
from runtime_core.process.parts.actions import Escalations
from runtime_core.process.ports import EventRunner
from runtime_core.process.triggers import TriggerSet
from runtime_core.triggers.base import TriggerEvent

log = logging.getLogger(__name__)

S = ProcessState
MAX_RESTART_BACKOFF = 60.0
DOWN = (S.CREATED, S.STOPPED, S.FAILED)


class Supervisor:
    """Carries out every change of the process's state. The other parts ask it through the
    ports (process/ports.py): intake to wake it (Waker), dispatch to count a run's outcome
    (RunOutcomes), the optional parts to pause or stop it (SelfControl), rewinding to suspend
    it (Suspension). It is the one writer of ``core.consecutive_failures`` and
    ``core.restart_count``.

    Built before those parts, since they hold it; what it starts and stops (the assembly, the
    triggers, the runner its workers call) is built after them and handed in by ``attach``."""

    assembly: Assembly
    triggers: TriggerSet
    runner: EventRunner

    def __init__(self, core: ProcessCore, journal: ProcessJournal,
                 escalations: Escalations) -> None:
        self.core = core
        self.journal = journal
        self.escalations = escalations
        self.lock = asyncio.Lock()
        self._stopping = False
        self._background: set[asyncio.Task[Any]] = set()
        self._restart_task: asyncio.Task[None] | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._drain_cut = asyncio.Event()  # set: a drain (under way or about to be) ends now
        self._started = False  # this object started once: a start after a stop is an operator's

    def attach(self, assembly: Assembly, triggers: TriggerSet, runner: EventRunner) -> None:
        """Hand in what the process starts and stops: once, before the first start."""
        self.assembly = assembly
        self.triggers = triggers
        self.runner = runner

    # -- start and stop ----------------------------------------------------------------------
    async def start(self) -> None:
        core = self.core
        async with self.lock:
            state = core.state
            if state not in DOWN:
                raise StateError(state, S.STARTING, f"start() on process {core.name!r}")
            if state is S.FAILED:  # what the failed run left goes first: nothing runs twice
                await self.journal.reopen_owned()  # closed by a failed start
                await self._cancel_restart()
                await self._teardown(DeadLetterReason.PROCESS_FAILED, keep_queue=True)
            core.stop_requested = False
            core.consecutive_failures = 0
            self._drain_cut.clear()
            try:
                await self._start_locked(restart=False)
            except BaseException:  # FAILED, and nothing left running: a program that gives
                await self.journal.release()  # up on the process exits (stop() reopens it)
                raise

    def _drain_for(self, drain_timeout: float | None) -> float:
        """The drain asked for, else the config's, else none."""
        if drain_timeout is None:
            return self.core.config.drain_timeout or 0.0
        if drain_timeout < 0:
            raise ValueError(f"drain_timeout must be 0 or more seconds, not {drain_timeout}")
        return drain_timeout

    async def stop(self, drain_timeout: float | None = 0.0, *, keep_queue: bool = False,
                   shutdown: bool = False) -> None:
        """Stop: triggers, workers, servers. With ``drain_timeout`` the runs in flight may
        finish first (no new event starts, arriving ones are refused), up to that long.

        Then, by default (the spec's stop), what has not run is dead-lettered "process
        stopped". With ``keep_queue`` (every host's stop: serve, run, the room, an operator's)
        nothing is: the queue, the pending retries and the events of the runs cut short stay
        accepted in the journal, a cut run stays open there, and the next start takes them back
        from the journal (process/journaling.py), on this object or a new one, each once.
        ``shutdown``: the journal is sealed after a SHUTDOWN entry (see shutdown())."""
        drain_timeout = self._drain_for(drain_timeout)
        core = self.core
        core.stop_requested = True
        await self._cancel_restart()
        if core.state is S.CREATED:
            core.lifecycle.transition(S.STOPPED, reason="stop() before start")
            if not keep_queue:
                core.delivery.dead_letter_all(DeadLetterReason.PROCESS_STOPPED)
            return
        if self._stopping and drain_timeout <= 0:
            self.cut_drain()  # a stop now, while a draining stop waits for its runs
        if core.state is S.STOPPED or self._stopping:
            return
        if core.delivery.current_task_is_worker() and self.lock.locked():
            return  # a run stopping its own process while a restart holds the lock
        async with self.lock:
            if self.core.state in (S.STOPPED, S.CREATED):  # another task stopped it meanwhile
                return
            self._stopping = True
            core.keeping_queue = keep_queue
            try:
                await self.journal.reopen_owned()  # closed by a failed start
                await core.hooks.dispatch(HookEvent.SESSION_END, {"state": core.state.value})
                if core.state is not S.STOPPING:  # STOPPING here: a restart cut short by stop()
                    core.lifecycle.transition(S.STOPPING, reason="stop()" if drain_timeout <= 0
                                              else f"stop(): draining up to {drain_timeout:g} s")
                await self.drain(drain_timeout)
                if keep_queue:  # None: nothing is dead-lettered, a run cut short stays open
                    await self._teardown(None, keep_queue=True)
                else:
                    await self._teardown(DeadLetterReason.PROCESS_STOPPED, keep_queue=False)
                # The spec's order: the checkpoint, then the STOPPED transition after it (a
                # recovery replays that one entry), both durable before stop() returns.
                self.journal.checkpoint_soon()
                kept = core.delivery.queue_size
                core.lifecycle.transition(S.STOPPED, reason="stopped" if not keep_queue else
                                          f"stopped: {kept} queued event(s) kept")
                await self.journal.flush()
                if keep_queue:
                    self.journal.take_back_next = True
                    if shutdown:
                        await self.journal.seal(kept)
                core.started_at = None
                core.suspend_reason = None
                if core.suspension is not None and not core.suspension.kept:
                    core.suspension = None  # idle, a rewind, the spec's "manual": not kept
                for part in core.parts:
                    part.stopped()
            finally:
                self._stopping = False
                core.keeping_queue = False
                self._drain_cut.clear()
                # Last, and whatever happened: the process's own journal closes with its stop,
                # so a program that stops its processes exits; start() opens it again.
                await self.journal.release()
            if core.config.context.conversation_clear_on_stop:
                core.conversation.clear()
            core.notifier.emit(ProcessStopped(process=core.name, process_id=core.process_id))

    async def drain(self, seconds: float) -> None:
        """Let the runs in flight finish, up to ``seconds``: the gate is closed, so no
        queued event starts, and the state (STOPPING, or refusing for a shutdown) refuses
        arriving ones. What is still running afterwards is cancelled by the teardown."""
        core = self.core
        delivery = core.delivery
        delivery.close()
        runs = delivery.in_flight
        if seconds <= 0 or runs == 0 or delivery.current_task_is_worker():
            return
        core.drain_deadline = core.clock.monotonic() + seconds
        core.notifier.emit(ProcessDraining(process=core.name, process_id=core.process_id,
                                           runs=runs, timeout=seconds))
        log.info("process %s: draining: %d run(s) may finish, up to %g s", core.name, runs,
                 seconds)
        cut = self._drain_cut
        finished = asyncio.ensure_future(delivery.wait_runs_finished())
        ended = asyncio.ensure_future(cut.wait())
        try:
            await asyncio.wait((finished, ended), timeout=seconds,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            finished.cancel()
            ended.cancel()
            core.drain_deadline = None
        if delivery.in_flight:
            why = "the drain was cut short" if cut.is_set() else f"{seconds:g} s of draining"
            log.warning("process %s: %d run(s) still running after %s are cancelled",
                        core.name, delivery.in_flight, why)

    def cut_drain(self) -> None:
        """End a drain now (a second signal): the teardown cancels what still runs."""
        self._drain_cut.set()

    async def close(self, drain_timeout: float | None = 0.0) -> None:
        """stop(), then release what lives as long as the process object."""
        core = self.core
        await self.stop(drain_timeout)
        await self.escalations.wait()
        core.conversation.clear()
        for part in core.parts:  # secrets revoked, the inbox emptied, memory closed
            await part.close()
        await self.journal.release()  # stop() closed it already, unless stop() was skipped
        self.assembly.release()

    async def shutdown(self, drain_timeout: float | None = 0.0) -> dict[str, int]:
        """Close for a service restart (SIGTERM): a stop that keeps the queue (stop() with
        ``keep_queue``), then a SHUTDOWN entry, after which nothing more is journaled (a run
        still going cannot act on a step the journal lacks), then close(). The next start on
        the same journal takes back, in order, what was accepted and not finished, and goes on
        with the runs the stop cut short. Without a journal this is close(). Returns how many
        events were kept ("pending") and the dead letters the journal keeps."""
        core = self.core
        if core.recorder is None or core.journal is None or core.state is S.CREATED:
            await self.close(drain_timeout)  # nothing outlives the program: nothing is kept
            return {"pending": 0, "dead_letters": core.delivery.dead_letter_total}
        core.refusing_all = True  # an inject from here on is refused, never half-accepted
        core.keeping_queue = True  # what a pull trigger fires from here on is kept
        try:
            await self.stop(drain_timeout, keep_queue=True, shutdown=True)
            async with self.lock:  # a stop already under way (an operator's) ends first
                counts = {"pending": core.delivery.queue_size,
                          "dead_letters": core.delivery.dead_letter_total}
            await self.close()
        finally:
            core.refusing_all = False
            core.keeping_queue = False
        return counts

    async def suspend(self, reason: str) -> None:
        """One by health, budget or an operator is journaled and kept by the next start."""
        core = self.core
        if core.state is not S.RUNNING:
            raise StateError(core.state, S.SUSPENDED, f"suspend() on process {core.name!r}")
        core.delivery.close()
        core.suspend_reason = reason
        core.lifecycle.transition(S.SUSPENDED, reason=f"suspended: {reason}")
        core.suspension = SuspensionRecord(reason, reason, core.clock.time())
        if core.suspension.kept:
            await self.journal.suspension_changed()

    async def resume(self, reason: str) -> None:
        """The end of a kept suspension is journaled: a restart does not bring it back."""
        core = self.core
        if core.state is not S.SUSPENDED:
            raise StateError(core.state, S.RUNNING, f"resume() on process {core.name!r}")
        core.suspend_reason = None
        kept, core.suspension = core.suspension, None
        core.touch()
        core.lifecycle.transition(S.RUNNING, reason=f"resumed: {reason}")
        core.delivery.open()
        self._restart_heartbeat()  # the idle clock counts from the resume
        if kept is not None and kept.kept:
            await self.journal.suspension_changed()

    async def wake(self, why: str) -> None:
        """Resume a process suspended for being idle (an event arrived, a redelivery)."""
        if self.core.idle_suspended:
            await self.resume(why)

    async def pause(self, reason: str) -> None:
        """A suspension the process decides itself (health, budget): only when running."""
        if self.core.state is S.RUNNING:
            await self.suspend(reason)

    async def stop_on_purpose(self) -> None:
        """A stop the process decides itself (health, budget, mission, lifetime): never
        restarted. Run as its own task so it can cancel the worker that asked for it."""
        self._spawn(self.stop(), "stop")

    def _spawn(self, work: Awaitable[Any], what: str) -> None:
        task = asyncio.ensure_future(work)
        task.set_name(f"{self.core.name}-{what}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- internals -------------------------------------------------------------------------------
    async def _start_locked(self, *, restart: bool) -> None:
        core = self.core
        if self.journal.prepared:  # closed by the last stop: open it before STARTING is journaled
            with contextlib.suppress(Exception):  # a failure is raised again below, as FAILED
                await self.journal.open()
        core.lifecycle.transition(S.STARTING, reason="restart" if restart else "start()")
        try:
            with config_field("journal"):
                await self.journal.open()
            core.executor = await self.assembly.build()
            await self.triggers.start_all()
        except asyncio.CancelledError:
            await self.assembly.close_servers()
            raise
        except Exception as exc:
            await self.assembly.close_servers()
            core.lifecycle.transition(S.FAILED, reason=f"startup failed: {exc}",
                                      metadata={"error": str(exc)})
            core.notifier.emit(ProcessFailed(process=core.name, process_id=core.process_id,
                                             reason="startup failed", error=str(exc)[:500]))
            raise
        core.started_at = core.clock.monotonic()
        core.last_activity = core.started_at
        core.suspend_reason = None
        core.delivery.start_workers(core.config.concurrency, self.runner.handle_event)
        self._restart_heartbeat()
        core.lifecycle.transition(S.RUNNING, reason="started")
        kept = core.suspension if core.suspension is not None and core.suspension.kept else None
        if kept is not None and self._started and not restart:  # a start newer than the pause
            kept = core.suspension = None
            await self.journal.suspension_changed()
        self._started = True
        if kept is None:
            core.suspension = None
            core.delivery.open()
        else:  # health, budget or an operator suspended it: a restart does not undo that
            core.suspend_reason = kept.reason
            core.lifecycle.transition(S.SUSPENDED, reason=f"suspended: {kept.reason} (kept)")
        await core.hooks.dispatch(HookEvent.SESSION_START, {"restart": restart})
        core.notifier.emit(ProcessStarted(process=core.name, process_id=core.process_id,
                                          restart=restart))

    async def _teardown(self, reason: str | None, *, keep_queue: bool) -> None:
        """Stop triggers, workers and the heartbeat. Events that have not run are dead-lettered
        with ``reason``; with ``keep_queue`` the queue itself is kept for the next start.
        ``reason`` None: nothing is dead-lettered (a stop that keeps the queue): retries, held
        events and the events of cancelled runs go back on the queue."""
        delivery = self.core.delivery
        delivery.close()
        heartbeat = self._heartbeat_task
        if heartbeat is not None and heartbeat is not asyncio.current_task():
            heartbeat.cancel()
            await asyncio.gather(heartbeat, return_exceptions=True)
        self._heartbeat_task = None
        self.triggers.cancel_reason = reason or DeadLetterReason.PROCESS_STOPPED
        self.triggers.keep_in_hand = reason is None
        try:
            leftovers = await self.triggers.stop_all(keep_leftovers=True)
        finally:
            self.triggers.keep_in_hand = False
        await delivery.stop_workers(reason)
        if reason is None:
            delivery.keep_all()
        else:
            delivery.dead_letter_all(reason, include_queue=not keep_queue)
        for event in leftovers:
            if reason is None:
                await self._keep_leftover(event)
            elif keep_queue:
                delivery.offer(event)
            else:
                delivery.dead_letter(event, reason, "", 0)
        await self.assembly.close_servers()
        self.triggers.forget_dynamic()  # agent-added triggers do not outlive a stop

    async def _keep_leftover(self, event: TriggerEvent) -> None:
        """An event a trigger held but had not handed over: accepted now (journaled) and
        queued, so it is kept like the rest; dead-lettered if the journal refuses it."""
        core = self.core
        if core.recorder is not None:
            try:
                await core.recorder.event_accepted(event)
            except JournalError as exc:
                core.delivery.dead_letter(event, DeadLetterReason.PROCESS_STOPPED, str(exc), 0)
                return
        core.delivery.put_back(event, first=False)

    async def _cancel_restart(self) -> None:
        task = self._restart_task
        self._restart_task = None
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    # -- the restart policy ------------------------------------------------------------------------
    def run_succeeded(self) -> None:
        """A run succeeded: the failure streak and the restart count start over."""
        self.core.consecutive_failures = 0
        self.core.restart_count = 0

    def run_given_up(self, error: str) -> None:
        """An event dead-lettered after its last retry: at the configured number of failures
        in a row the process fails, and the restart policy takes over."""
        core = self.core
        core.consecutive_failures += 1
        if core.consecutive_failures >= core.config.max_consecutive_failures:
            self.enter_failed("max consecutive failures", error)

    def enter_failed(self, reason: str, error: str) -> None:
        core = self.core
        if core.state not in (S.RUNNING, S.SUSPENDED):
            return
        core.delivery.close()
        if self._heartbeat_task is not None:  # no idle or lifetime actions on a failed process
            self._heartbeat_task.cancel()
            self._heartbeat_task = None
        core.lifecycle.transition(S.FAILED, reason=reason, metadata={"error": error})
        core.delivery.dead_letter_all(DeadLetterReason.PROCESS_FAILED,
                                      why=f"not run: the process failed ({reason}: {error})")
        core.notifier.emit(ProcessFailed(process=core.name, process_id=core.process_id,
                                         reason=reason, error=error[:500]))
        if self.assembly.toolbox is not None:  # a failed process keeps no servers running
            self._spawn(self.assembly.close_servers(), "mcp-close")
        self._schedule_restart(reason)

    def _schedule_restart(self, reason: str) -> None:
        core = self.core
        config = core.config
        if config.restart_policy == "never" or core.stop_requested:
            return
        if core.restart_count >= config.max_restarts:
            if core.recorder is not None:
                core.recorder.restart_exhausted(reason, core.restart_count)
            core.notifier.emit(RestartExhausted(process=core.name, process_id=core.process_id,
                                                restarts=core.restart_count, reason=reason))
            return
        delay = min(config.restart_backoff * 2**core.restart_count, MAX_RESTART_BACKOFF)
        self._restart_task = asyncio.create_task(
            self._restart_after(delay, reason, counts=True), name=f"{core.name}-restart")

    async def _restart_after(self, delay: float, reason: str, *, counts: bool) -> None:
        core = self.core
        await core.clock.sleep(delay)
        if core.stop_requested:
            return
        async with self.lock:
            if core.stop_requested or core.state not in (S.FAILED, S.RUNNING, S.SUSPENDED):
                return
            if counts:
                core.restart_count += 1
            attempt = core.restart_count if counts else None
            if core.recorder is not None:
                core.recorder.restart(reason, attempt)
            core.notifier.emit(ProcessRestarted(
                process=core.name, process_id=core.process_id, reason=reason, attempt=attempt,
                max_restarts=core.config.max_restarts))
            if core.state is S.FAILED:
                await self._teardown(DeadLetterReason.PROCESS_RESTARTING, keep_queue=True)
            else:  # recycle: let runs in flight finish, keep the queue
                core.delivery.close()
                core.lifecycle.transition(S.STOPPING, reason="stopping for restart")
                await core.delivery.wait_runs_finished()
                await self._teardown(DeadLetterReason.PROCESS_RESTARTING, keep_queue=True)
                core.lifecycle.transition(S.STOPPED, reason="stopped for restart")
            core.consecutive_failures = 0
            try:
                await self._start_locked(restart=True)
            except Exception as exc:
                log.warning("process %s: restart attempt failed: %s", core.name, exc)
                self._schedule_restart(f"restart failed: {exc}")

    # -- the heartbeat: idle and lifetime ----------------------------------------------------------
    def _restart_heartbeat(self) -> None:
        task = self._heartbeat_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        self._heartbeat_task = asyncio.create_task(self._heartbeat(),
                                                   name=f"{self.core.name}-heartbeat")

    async def _heartbeat(self) -> None:
        core = self.core
        cfg, clock = core.config, core.clock
        while True:
            wait = cfg.heartbeat_interval
            now = clock.monotonic()
            if cfg.idle_timeout > 0 and core.state is S.RUNNING:
                if core.delivery.is_idle:
                    remaining = cfg.idle_timeout - (now - core.last_activity)
                    if remaining <= 0:
                        await self.suspend("idle")
                    else:
                        wait = min(wait, remaining)
                else:
                    wait = min(wait, cfg.idle_timeout)
            if cfg.max_lifetime > 0 and core.started_at is not None:
                age = now - core.started_at
                if age >= cfg.max_lifetime:
                    self._on_lifetime_reached()
                    return
                wait = min(wait, cfg.max_lifetime - age)
            await clock.sleep(wait)

    def _on_lifetime_reached(self) -> None:
        core = self.core
        if core.state not in (S.RUNNING, S.SUSPENDED):
            return
        if core.config.restart_policy == "always":
            self._restart_task = asyncio.create_task(
                self._restart_after(0.0, "max lifetime reached", counts=False),
                name=f"{core.name}-recycle")
        else:  # a stop on purpose: never restarted
            self._spawn(self.stop(), "lifetime-stop")
