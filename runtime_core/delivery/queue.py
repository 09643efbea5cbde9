"""The per-process queue: workers that take events in arrival order, retries with backoff, dead
letters and redelivery.

Room in the queue is reserved before an event is journaled and acknowledged (``try_reserve`` /
``reserve``, then ``commit``), so an event a sender was told "accepted" always has its place: the
queue's capacity counts reserved slots, and a full queue refuses before anything is promised.

The queue never decides what a run means; the process hands it a handler that runs one event and
reports back through :meth:`Delivery.schedule_retry` and :meth:`Delivery.dead_letter`. Every
road to a dead letter goes through :meth:`Delivery.dead_letter`, which reports it only once the
journal has it (dead_letters.py: AwaitingCommit).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from runtime_core.clock import Clock
from runtime_core.delivery.dead_letters import (
    AwaitingCommit,
    DeadLetter,
    DeadLetterReason,
    add_history,
    last_error,
)
from runtime_core.events import EventDeadLettered, EventNotifier, QueueDepth
from runtime_core.journal.provider import JournalError
from runtime_core.triggers.base import TriggerEvent

if TYPE_CHECKING:
    from runtime_core.journal.recorder import ProcessRecorder

log = logging.getLogger(__name__)


EventHandler = Callable[[TriggerEvent, int], Awaitable[None]]


class Delivery:
    def __init__(
        self,
        *,
        process: str,
        maxsize: int,
        dead_letter_size: int,
        notifier: EventNotifier,
        clock: Clock,
    ) -> None:
        self.process = process
        self.notifier = notifier
        self.clock = clock
        self.capacity = maxsize
        # Unbounded: the capacity is enforced here, counting reservations, so an event that was
        # promised a place (or recovered from the journal) is never turned away by the queue.
        self._queue: asyncio.Queue[TriggerEvent] = asyncio.Queue()
        self._reserved = 0
        self._room = asyncio.Event()  # set when a slot may have come free
        self._dead: deque[DeadLetter] = deque(maxlen=dead_letter_size)  # the newest ones
        self.dead_letter_total = 0  # all of them: the journal keeps those the list let go
        self._awaiting = AwaitingCommit(process, self._publish)  # journaled, not yet durable
        self._attempts: dict[str, int] = {}
        self._retries: dict[str, tuple[TriggerEvent, asyncio.Task[None]]] = {}
        self._held: dict[int, TriggerEvent] = {}  # worker -> event taken but not yet running
        self._running: dict[int, TriggerEvent] = {}  # worker -> event whose run is in flight
        self._workers: dict[int, asyncio.Task[None]] = {}
        self._gate = asyncio.Event()
        #: Set while closed once the queue went to dead letters (a failure, a dead-lettering
        #: stop): the reason and error an event committed after that is dead-lettered with.
        self._emptied_as: tuple[str, str] | None = None
        self._no_runs = asyncio.Event()
        self._no_runs.set()
        #: Why the events of cancelled workers are dead-lettered (a stop's reason); None: a
        #: stop that keeps the queue, or a cancellation that is no stop at all, where they go
        #: back on it instead.
        self.cancel_reason: str | None = DeadLetterReason.PROCESS_STOPPED
        self.recorder: ProcessRecorder | None = None

    def _journal(self, action: Callable[[ProcessRecorder], None]) -> None:
        """Journal a dead-letter change; a failing journal is logged, never a lost event."""
        if self.recorder is None:
            return
        try:
            action(self.recorder)
        except JournalError:
            log.critical("process %s: could not journal a dead-letter change", self.process,
                         exc_info=True)

    def restore(self, queued: Iterable[TriggerEvent], dead: Iterable[DeadLetter],
                dead_total: int | None = None) -> None:
        """Put back what a journal recovered, without journaling it again: the newest dead
        letters (``dead_total`` counts all the journal keeps)."""
        count = 0
        for letter in dead:
            self._dead.append(letter)
            count += 1
        self.dead_letter_total = count if dead_total is None else dead_total
        for event in queued:  # accepted before the restart: each keeps its place, room or not
            self._queue.put_nowait(event)
        self._depth_changed()

    # -- introspection -------------------------------------------------------------------------
    @property
    def queue_size(self) -> int:
        """Events waiting to run: queued, plus those a suspended worker holds in its hand."""
        return self._queue.qsize() + len(self._held)

    @property
    def is_full(self) -> bool:
        """No room for another event: queued plus reserved slots reach the capacity."""
        return self._queue.qsize() + self._reserved >= self.capacity

    @property
    def pending_retries(self) -> int:
        return len(self._retries)

    @property
    def dead_letters(self) -> list[DeadLetter]:
        return list(self._dead)

    @property
    def in_flight(self) -> int:
        return len(self._running)

    @property
    def is_idle(self) -> bool:
        return not self._running and not self._held and self._queue.empty()

    def queued_events(self) -> list[TriggerEvent]:
        """Events that have not started, oldest first (held ones were taken first)."""
        held = [event for _, event in sorted(self._held.items())]
        return held + list(self._queue._queue)  # type: ignore[attr-defined]  # read-only peek

    def _depth_changed(self) -> None:
        if self.notifier.has_listeners:
            self.notifier.emit(
                QueueDepth(
                    process=self.process,
                    queued=self.queue_size,
                    pending_retries=len(self._retries),
                    dead_letters=len(self._dead),
                )
            )

    # -- intake: reserve a slot, journal the event, then commit it ------------------------------
    def try_reserve(self) -> bool:
        """Hold one slot for an event about to be accepted; False when the queue is full."""
        if self.is_full:
            return False
        self._reserved += 1
        return True

    async def reserve(self) -> None:
        """Wait for a slot and hold it: a pulling trigger slows down rather than drop events."""
        while not self.try_reserve():
            self._room.clear()
            await self._room.wait()

    def release(self) -> None:
        """Give back a reserved slot whose event was not accepted after all."""
        self._reserved -= 1
        self._freed()

    def commit(self, event: TriggerEvent) -> None:
        """Queue ``event`` into the slot reserved for it (it always fits). An event whose
        journaling ended after the queue went to dead letters (the process failed meanwhile)
        follows it there, as it would have had it arrived a moment sooner."""
        self._reserved -= 1
        if self._emptied_as is not None and not self._gate.is_set():
            reason, why = self._emptied_as
            self.dead_letter(event, reason, last_error(event) or why, 0)
            self._freed()
            return
        self._queue.put_nowait(event)
        self._depth_changed()

    def withdraw(self, event: TriggerEvent) -> bool:
        """Take ``event`` back off the queue (committed to its slot before its acceptance was
        durable, and that acceptance failed): its slot comes free. False when a worker has
        taken it already: its run fails at its first commit, as the acceptance did."""
        queued = self._take_queue()
        for other in queued:
            if other is not event:
                self._queue.put_nowait(other)
        if len(queued) == self._queue.qsize():
            return False
        self._freed()
        self._depth_changed()
        return True

    def _freed(self) -> None:
        self._room.set()

    def offer(self, event: TriggerEvent) -> bool:
        """Queue ``event`` now; a full queue dead-letters it ("queue full") and returns False."""
        if not self.try_reserve():
            self.dead_letter(event, DeadLetterReason.QUEUE_FULL, last_error(event),
                             self._attempts.get(event.event_id, 0))
            return False
        self.commit(event)
        return True

    # -- the gate: workers take events only while it is open (process RUNNING) -----------------
    def open(self) -> None:
        self._emptied_as = None
        self._gate.set()

    def close(self) -> None:
        self._gate.clear()

    # -- workers -------------------------------------------------------------------------------
    def start_workers(self, count: int, handler: EventHandler) -> None:
        # Until a stop says otherwise (stop_workers), a worker cancelled from outside (the
        # program's event loop torn down under a run: an exception out of asyncio.run()) is
        # a crash, not a stop: its run stays open in the journal and its event runs again at
        # the next start, instead of waiting in the dead letters as "process stopped".
        self.cancel_reason = None
        for index in range(count):
            if index not in self._workers or self._workers[index].done():
                self._workers[index] = asyncio.create_task(
                    self._worker(index, handler), name=f"{self.process}-worker-{index}"
                )

    async def _worker(self, index: int, handler: EventHandler) -> None:
        gate = self._gate
        queue = self._queue
        while True:
            await gate.wait()
            event = await queue.get()
            self._freed()
            self._held[index] = event
            try:
                if not gate.is_set():  # suspended after we took it: hold it, keep its place
                    self._depth_changed()
                    await gate.wait()
                if self._held.pop(index, None) is not event:
                    continue  # taken away while held (the process failed)
                attempt = self._attempts.get(event.event_id, 0) + 1
                self._attempts[event.event_id] = attempt
                self._running[index] = event
                self._no_runs.clear()
                self._depth_changed()
                await handler(event, attempt)
            except asyncio.CancelledError:
                held, reason = self._held.pop(index, None), self.cancel_reason
                if held is not None and reason is None:
                    self.put_back(held)  # it keeps its place for the next start
                elif held is not None and reason is not None:
                    self.dead_letter(held, reason, last_error(held),
                                     self._attempts.get(held.event_id, 0))
                raise
            finally:
                self._running.pop(index, None)
                if not self._running:
                    self._no_runs.set()
            if len(self._workers) > 1:
                # Let the other workers take their turn: a run that never awaited would
                # otherwise let this worker overtake events its siblings already hold.
                await asyncio.sleep(0)

    async def wait_runs_finished(self) -> None:
        """Wait until no run is in flight (used with the gate closed, for a graceful recycle)."""
        await self._no_runs.wait()


    def current_task_is_worker(self) -> bool:
        current = asyncio.current_task()
        return any(task is current for task in self._workers.values())

    def cut_runs(self) -> int:
        """Cancel every worker now, without waiting (see AgentProcess.cut_runs_now): the gate
        closes, the events they held go back on the queue; how many were running one."""
        self.cancel_reason = None
        self._gate.clear()
        current = asyncio.current_task()
        running = sum(1 for index, task in self._workers.items()
                      if index in self._running and task is not current)
        for task in self._workers.values():
            if task is not current:
                task.cancel()
        return running

    async def stop_workers(self, reason: str | None) -> None:
        """Cancel every worker (a running handler sees CancelledError) and wait for them.

        ``reason`` is the dead-letter reason for the events they held (None: they go back on
        the queue). A worker that calls this on its own process is left to finish by itself."""
        self.cancel_reason = reason
        self._gate.clear()
        current = asyncio.current_task()
        tasks = [t for t in self._workers.values() if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._workers = {i: t for i, t in self._workers.items() if t is current}

    # -- outcomes ------------------------------------------------------------------------------
    def succeeded(self, event: TriggerEvent) -> None:
        self._attempts.pop(event.event_id, None)

    def dead_letter(self, event: TriggerEvent, reason: str, error: str, attempts: int) -> None:
        """Dead-letter ``event``. With a journal, its entry is submitted now and the dead letter
        reported (the list, the counters, EventDeadLettered, QueueDepth) once it commits, the
        caller not waiting; if it never commits nothing reports it, and the event stays what
        the journal says (an accepted one is queued again by the next start or owner). Without
        a journal it is reported at once."""
        self._attempts.pop(event.event_id, None)
        at = datetime.now(UTC).isoformat()
        add_history(event, attempts, reason, error, at)  # before the journal keeps the event
        letter = DeadLetter(event, reason, error, attempts, at)
        recorder = self.recorder
        if recorder is None:
            self._publish(letter)
            return
        try:
            durable = recorder.dead_lettered(event, reason, error, attempts)
        except JournalError as exc:
            log.error("process %s: the dead letter of event %s (%s) cannot be journaled (%s): "
                      "it is not reported, and the journal keeps the event as it was",
                      self.process, event.event_id, reason, exc)
            durable = None
        if durable is None:  # not written (sealed, or refused): nothing to report
            self._depth_changed()
            return
        if self._awaiting.track(letter, durable):
            self._depth_changed()  # the queue changed; the dead letter shows once durable

    def _publish(self, letter: DeadLetter) -> None:
        """Report ``letter``: durable in the journal by now (or the process keeps none)."""
        if self.recorder is None and len(self._dead) == self._dead.maxlen:
            self.dead_letter_total -= 1  # no journal: the oldest one is gone for good
        self._dead.append(letter)
        self.dead_letter_total += 1
        if self.notifier.has_listeners:
            self.notifier.emit(EventDeadLettered(
                process=self.process, event_id=letter.event.event_id,
                trigger_type=letter.event.trigger_type, reason=letter.reason,
                error=letter.error, attempts=letter.attempts))
        self._depth_changed()

    def schedule_retry(self, event: TriggerEvent, delay: float,
                       can_accept: Callable[[], str | None],
                       keeping: Callable[[], bool] = lambda: False, error: str = "") -> None:
        """Put ``event`` back on the queue after ``delay``. ``can_accept`` returns a dead-letter
        reason when the process cannot take it any more; while ``keeping()`` (a host's stop
        that keeps the queue is draining) the retry goes back on the queue instead, behind the
        closed gate, and is kept with it. ``error``: why the attempt failed (its history)."""
        add_history(event, self._attempts.get(event.event_id, 0), "failed, retried", error,
                    datetime.now(UTC).isoformat())

        async def requeue() -> None:
            await self.clock.sleep(delay)
            self._retries.pop(event.event_id, None)
            refusal = can_accept()
            if refusal is not None and keeping():
                self.put_back(event, first=False)  # it had its place: kept, room or not
                return
            if refusal is not None:
                self.dead_letter(event, refusal, last_error(event),
                                 self._attempts.get(event.event_id, 0))
                return
            self.offer(event)  # a full queue dead-letters it (journaled, redeliverable)

        task = asyncio.create_task(requeue(), name=f"{self.process}-retry-{event.event_id[:8]}")
        self._retries[event.event_id] = (event, task)
        self._depth_changed()

    def dead_letter_all(self, reason: str, *, include_queue: bool = True, why: str = "") -> int:
        """Dead-letter what has not started running: pending retries, events held by suspended
        workers, then (unless ``include_queue`` is False) the queue in arrival order. Each
        letter's error is its own last attempt's, else ``why`` (what failed the process)."""
        count = 0

        def letter(event: TriggerEvent) -> None:
            self.dead_letter(event, reason, last_error(event) or why,
                             self._attempts.get(event.event_id, 0))

        for event, task in list(self._retries.values()):
            task.cancel()
            letter(event)
            count += 1
        self._retries.clear()
        for index, event in sorted(self._held.items()):
            del self._held[index]
            letter(event)
            count += 1
        if include_queue and not self._gate.is_set():
            self._emptied_as = (reason, why)
        while include_queue:
            try:
                event = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            letter(event)
            count += 1
        self._freed()
        return count

    def keep_all(self) -> int:
        """For a stop that keeps the queue: what has not started running (pending retries,
        events held by suspended workers) goes back on the queue, nothing is dead-lettered.
        Returns how many events the queue holds now."""
        for event, task in list(self._retries.values()):
            task.cancel()
            self._queue.put_nowait(event)
        self._retries.clear()
        for index, event in sorted(self._held.items(), reverse=True):
            del self._held[index]
            self.put_back(event)
        self._depth_changed()
        return self._queue.qsize()

    def put_back(self, event: TriggerEvent, *, first: bool = True) -> None:
        """Queue an event that had its place already (taken off the queue, a run a stop cut
        short), room or not: ahead of the others (``first``) or after them."""
        if first:
            rest = self._take_queue()
            self._queue.put_nowait(event)
            for other in rest:
                self._queue.put_nowait(other)
        else:
            self._queue.put_nowait(event)
        self._depth_changed()

    def replace_queue(self, events: Iterable[TriggerEvent]) -> None:
        """The queue becomes ``events``, in order, room or not: what the journal holds as
        accepted and not finished, taken back by a start after a stop that kept the queue."""
        self._take_queue()
        for event in events:
            self._queue.put_nowait(event)
        self._freed()
        self._depth_changed()

    def _take_queue(self) -> list[TriggerEvent]:
        taken: list[TriggerEvent] = []
        while True:
            try:
                taken.append(self._queue.get_nowait())
            except asyncio.QueueEmpty:
                return taken

    # -- dead letters ----------------------------------------------------------------------------
    def redeliver(self, event_ids: Iterable[str] | None = None,
                  stored: Iterable[DeadLetter] = ()) -> int:
        """Re-queue dead letters (all, or those named) in order; those that do not fit stay.
        ``stored`` are older ones only the journal still keeps; they go first."""
        wanted = None if event_ids is None else set(event_ids)
        kept: deque[DeadLetter] = deque(maxlen=self._dead.maxlen)
        moved: list[str] = []
        in_list = {letter.event.event_id for letter in self._dead}
        for letter in stored:
            if letter.event.event_id in in_list or (
                    wanted is not None and letter.event.event_id not in wanted):
                continue
            if not self.try_reserve():
                break
            self.commit(letter.event)
            self._attempts.pop(letter.event.event_id, None)
            moved.append(letter.event.event_id)
        for letter in self._dead:
            if wanted is not None and letter.event.event_id not in wanted:
                kept.append(letter)
                continue
            if not self.try_reserve():
                kept.append(letter)
                continue
            self.commit(letter.event)
            self._attempts.pop(letter.event.event_id, None)
            moved.append(letter.event.event_id)
        requeued = len(moved)
        self._dead = kept
        self.dead_letter_total -= requeued
        if requeued:
            self._journal(lambda r: r.redelivered(moved))
            self._depth_changed()
        return requeued

    def clear_dead_letters(self) -> int:
        """Drop every dead letter (those still on their way to the journal too: the clear's
        entry follows theirs); how many were dropped."""
        count = self.dead_letter_total + self._awaiting.drop_all()
        self._dead.clear()
        self.dead_letter_total = 0
        self._journal(lambda r: r.dead_letters_cleared(None))
        self._depth_changed()
        return count
