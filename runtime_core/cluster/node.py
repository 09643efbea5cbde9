"""A cluster node: one ``promptui serve`` process taking its fair share of the processes.

A round every ``ttl_s / 3`` s: beat; end leases given up but not yet released; renew what it
holds (one statement); read live nodes and leases; compute ``fair_share``; hand over what is now
another node's (``on_lose``, then release: the new owner starts after the old one stopped);
claim what is ours and free (then ``on_gain`` with the new epoch). A refused renewal (another
node took the lease: this one was paused past the TTL) calls ``on_lose`` at once.

Each lease held has a deadline by the node's own monotonic clock, ``0.9 * ttl_s`` after its last
renewal was *sent* (the database's expiry is later still); when PostgreSQL cannot be reached
until then, the node calls ``on_lose`` itself, so its process stops before another node may
start it. Failed rounds are retried with backoff on a fresh connection (PostgreSQL restarted).

Callbacks run inside the round, one at a time: keep them short (start or stop a process).
``stop()`` calls ``on_lose`` for all it holds, marks the node stopping and ends its leases (the
others take over on their next round), ends the loop and closes the connection it opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg

from runtime_core.cluster import watchdog
from runtime_core.cluster.assignment import fair_share
from runtime_core.cluster.db import Connector
from runtime_core.cluster.errors import ClusterError, describe, is_passing
from runtime_core.cluster.leases import LeaseStore
from runtime_core.cluster.nodes import PRUNE_AFTER_S, NodePruner, NodeRegistry

__all__ = ["ClusterNode", "OnGain", "OnLose", "OnOverdue", "TakenOver"]

log = logging.getLogger(__name__)
T = TypeVar("T")
OnGain = Callable[[str, int], Awaitable[None]]
OnLose = Callable[[str, int, str], Awaitable[None]]
#: ``on_overdue(process, epoch)``: called at once (not awaited) when this node finds it was
#: stopped past a lease's deadline; it must cut what the process does (its calls in flight)
#: before anything else of the process runs again. ``on_lose`` follows in the next round.
OnOverdue = Callable[[str, int], None]  # (see check_deadlines)
KEEP = 0.9  # a lease is assumed lost this fraction of the TTL after its last renewal was sent
FIRST_RETRY = 0.05  # seconds; doubles up to the round interval
LOG_EVERY = 10.0  # a failure that lasts is logged again this often
#: past another node's lease end before a round runs to take it over: the database's clock and
#: ours measure the same durations, this covers the round trip that read the lease
EXPIRY_SLACK = 0.05
LOCKED_RETRY = 0.25  # seconds before a claim that met a write's row lock is tried again


@dataclass(frozen=True, slots=True)
class TakenOver:
    """A process this node claimed from a node that stopped beating without handing it over
    (it died, or it is paused and may wake): that node's calls in flight may still land
    until its lease's end plus the longest a call takes."""

    node_id: str
    epoch: int
    lease_ended_at: float  # time.time() (by the database's clock, read as a duration ago)


@dataclass(slots=True)
class _Held:
    epoch: int
    deadline: float  # time.monotonic(): past it, assume the lease is lost
    cut: bool = False  # on_overdue was called for it (the round hands it over next)


class ClusterNode:
    def __init__(self, dsn: str, node_id: str, address: str, *, ttl_s: float = 10.0,
                 max_processes: int | None = None, on_gain: OnGain, on_lose: OnLose,
                 processes: Callable[[], Iterable[str]], stale_after_s: float | None = None,
                 connect_timeout: float = 5.0, on_overdue: OnOverdue | None = None,
                 prune_after_s: float = PRUNE_AFTER_S) -> None:
        if not ttl_s > 0:
            raise ValueError(f"ttl_s must be > 0 seconds, not {ttl_s!r}")
        self.node_id, self.address, self.max_processes = node_id, address, max_processes
        self.ttl_s = float(ttl_s)
        self.interval = self.ttl_s / 3  # a round: beat, renew, rebalance
        self.op_timeout = self.ttl_s / 3  # one database call; a hung one is a failed round
        self.stale_after_s = self.ttl_s if stale_after_s is None else stale_after_s
        self._on_gain, self._on_lose, self._processes = on_gain, on_lose, processes
        self._on_overdue = on_overdue
        # a claim waiting on a row lock (a paused writer's open fenced transaction) gives up
        # well within a round, and the round goes on with the other processes
        self.source = Connector(dsn, connect_timeout=connect_timeout,
                                application_name=f"promptui-cluster {node_id}"[:63],
                                lock_timeout_s=self.op_timeout / 2)
        self.leases = LeaseStore(self.source)
        self.registry = NodeRegistry(self.source)
        # nodes silent for long are removed by every live node's round (nodes.py)
        self.pruner = NodePruner(self.registry, prune_after_s, timeout_s=self.op_timeout)
        self._held: dict[str, _Held] = {}
        self._abandoned: dict[str, int] = {}  # given up locally, maybe still ours in the table
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()  # stop() was called
        self._last_renew, self._failures, self._logged_at = 0.0, 0, 0.0
        self.last_error: str | None = None  # why the last round failed; None after a good one
        self.rounds = 0  # rounds completed
        self.desired: dict[str, str] = {}  # the last fair_share it computed
        #: time.monotonic() just past the earliest end of another node's lease, as last read:
        #: a round runs then, so a dead owner's process is claimed as its lease ends, not up
        #: to a round's interval later (a takeover within the TTL, not TTL + interval)
        self._next_expiry: float | None = None
        #: process -> from whom it was taken over, for the host's on_gain (it pops it)
        self.taken_over: dict[str, TakenOver] = {}

    # -- what it holds ----------------------------------------------------------------------------
    @property
    def held(self) -> dict[str, int]:
        """process -> epoch of every lease this node holds now."""
        return {process: held.epoch for process, held in sorted(self._held.items())}

    @property
    def running(self) -> bool:
        return bool(self._task and not self._task.done())

    def kick(self) -> None:
        """Run a round now (the process list changed, say) instead of at the next tick."""
        self._wake.set()

    def check_deadlines(self) -> None:
        """Cut every lease whose deadline passed (``on_overdue``, once per lease) at once,
        before the process's calls take another step, and wake the round to hand them over.
        Called by the watchdog's tick (cluster/watchdog.py): after a pause, ahead of the
        tools' own timers and sockets."""
        now = time.monotonic()
        for process, held in sorted(self._held.items()):
            if now < held.deadline or held.cut:
                continue
            held.cut = True
            self._wake.set()
            if self._on_overdue is not None:
                try:
                    self._on_overdue(process, held.epoch)
                except Exception:
                    log.exception("cluster node %s: on_overdue(%r, %d) failed", self.node_id,
                                  process, held.epoch)

    # -- start and stop ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Register, end the leases a previous life under this id left, start the rounds.
        A database that cannot be reached is a ClusterError saying where."""
        if self.running:
            return
        self._stopping.clear()
        try:
            async with asyncio.timeout(max(self.source.connect_timeout, self.ttl_s)):
                await self.registry.register(self.node_id, self.address, self.max_processes)
                await self.leases.release_all(self.node_id)  # the next claims bump the epoch
        except Exception as exc:
            await self.source.close()
            raise ClusterError(
                f"node {self.node_id!r} cannot join the cluster at {self.source.shown}: "
                f"{describe(exc)}; check that PostgreSQL is running and the DSN names it"
            ) from None
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"cluster-node {self.node_id}")
        watchdog.watch(self)

    async def stop(self) -> None:
        """Hand everything back and leave: ``on_lose`` for each process held, then the node is
        marked stopping and its leases end (if the database answers; else they expire)."""
        task, self._task = self._task, None
        if task is None:
            return
        if asyncio.current_task() is task:
            self._task = task
            raise ClusterError("ClusterNode.stop() called from its own callback would wait on "
                               "itself; call it from a task of its own")
        watchdog.unwatch(self)
        self._stopping.set()
        self._wake.set()
        try:
            async with asyncio.timeout(self.ttl_s):
                await asyncio.shield(task)
        except TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)  # a cancel of ours still ends us
        for process, held in sorted(self._held.items()):
            await self._lose(process, held.epoch, "this node is stopping")
        self._held.clear()
        try:
            async with asyncio.timeout(self.ttl_s):
                await self.registry.leave(self.node_id)
        except Exception as exc:
            log.warning("cluster node %s: could not leave cleanly (%s); its leases expire by "
                        "themselves within %.1f s", self.node_id, describe(exc), self.ttl_s)
        self._abandoned.clear()
        await self.source.close()

    # -- the loop ---------------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = FIRST_RETRY
        while not self._stopping.is_set():
            self._wake.clear()  # a kick from now on (even during the round) runs another
            await self._expire_overdue()
            try:
                await self._round()
            except Exception as exc:
                if self._stopping.is_set():
                    break
                self._failed(exc)
                delay, backoff = backoff, min(backoff * 2, self.interval)
            else:
                if self.last_error is not None:
                    log.info("cluster node %s: the database answers again", self.node_id)
                self.last_error, self._failures = None, 0
                self.rounds += 1
                delay, backoff = self.interval, FIRST_RETRY
            await self._expire_overdue()
            await self._sleep(delay)

    async def _sleep(self, delay: float) -> None:
        """Until the next round, a kick, or the next lease deadline, whichever is first."""
        deadlines = [held.deadline for held in self._held.values()]
        if self._next_expiry is not None and self._next_expiry > time.monotonic():
            deadlines.append(self._next_expiry)  # (a past one is stale: a round read it since)
        if deadlines:
            delay = min(delay, max(0.0, min(deadlines) - time.monotonic()))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._wake.wait()

    def _failed(self, exc: Exception) -> None:
        self.last_error = describe(exc)
        self._failures += 1
        now = time.monotonic()
        if self._failures == 1 or now - self._logged_at >= LOG_EVERY:
            self._logged_at = now
            level = logging.WARNING if is_passing(exc) else logging.ERROR
            log.log(level, "cluster node %s: a round failed (%d in a row): %s; retrying",
                    self.node_id, self._failures, self.last_error,
                    exc_info=None if is_passing(exc) else exc)

    async def _db(self, call: Coroutine[Any, Any, T]) -> T:
        async with asyncio.timeout(self.op_timeout):
            return await call

    async def _round(self) -> None:
        if not await self._db(self.registry.heartbeat(self.node_id)):
            await self._db(self.registry.register(self.node_id, self.address, self.max_processes))
        for process, epoch in sorted(self._abandoned.items()):
            await self._db(self.leases.release(process, self.node_id, epoch))
            del self._abandoned[process]
        await self._renew()
        live = await self._db(self.registry.live_nodes(self.stale_after_s))
        every = await self._db(self.leases.owners(include_expired=True))
        read_at, wall = time.monotonic(), time.time()
        leases = {process: lease for process, lease in every.items() if lease.expires_in_s > 0}
        live_ids = {node.node_id for node in live}
        left: set[str] | None = None  # the nodes that left cleanly, read once if needed
        ends = [lease.expires_in_s for lease in leases.values()
                if lease.node_id != self.node_id and lease.expires_in_s > 0]
        self._next_expiry = read_at + min(ends) + EXPIRY_SLACK if ends else None
        desired = fair_share(list(self._processes()), live,
                             {process: lease.node_id for process, lease in leases.items()})
        self.desired = desired
        for process in sorted(self._held):
            target = desired.get(process)
            if target != self.node_id and not self._stopping.is_set():
                await self._renew_if_due()
                if process not in self._held:  # lost while it renewed: _lose said so
                    continue
                await self._hand_over(process, f"handed over to node {target!r} (rebalance)"
                                      if target else "no longer assigned to any node")
        for process in sorted(desired):
            lease = leases.get(process)
            if (desired[process] != self.node_id or self._stopping.is_set()
                    or process in self._held or process in self._abandoned
                    or (lease is not None and lease.node_id != self.node_id)):
                continue  # another node's, ours already, or its owner hands it over itself
            await self._renew_if_due()
            prior = every.get(process)
            taken = None
            if prior is not None and prior.node_id not in (self.node_id, *live_ids):
                if left is None:
                    left = {n.node_id for n in await self._db(self.registry.nodes())
                            if n.stopping}
                if prior.node_id not in left:  # it died or was paused: not a clean hand-over
                    taken = TakenOver(prior.node_id, prior.epoch,
                                      wall + prior.expires_in_s)
            await self._claim(process, taken)
        await self.pruner.maybe_prune()

    async def _renew(self) -> None:
        held = {process: h.epoch for process, h in self._held.items()}
        sent = self._last_renew = time.monotonic()
        renewed = await self._db(self.leases.renew_many(self.node_id, held, self.ttl_s))
        lost = []
        for process, epoch in sorted(held.items()):
            current = self._held.get(process)
            if current is None or current.epoch != epoch:
                continue
            if process in renewed:
                current.deadline = sent + KEEP * self.ttl_s
            else:
                del self._held[process]
                lost.append((process, epoch))
        for process, epoch in lost:
            await self._lose(process, epoch, await self._why_refused(process, epoch))

    async def _renew_if_due(self) -> None:
        """Between slow callbacks in one round: renew when a round's interval has passed."""
        if time.monotonic() - self._last_renew >= self.interval:
            await self._renew()

    async def _why_refused(self, process: str, epoch: int) -> str:
        lease = None
        with contextlib.suppress(Exception):  # only for the reason's text
            lease = await self._db(self.leases.owner(process))
        if lease is not None and (lease.node_id, lease.epoch) != (self.node_id, epoch):
            return (f"its lease was taken over by node {lease.node_id!r} at epoch "
                    f"{lease.epoch} (this node missed its renewals)")
        return "its lease ended before it could be renewed (this node missed its renewals)"

    async def _hand_over(self, process: str, reason: str) -> None:
        held = self._held.pop(process)
        self._abandoned[process] = held.epoch  # until the release below lands
        await self._lose(process, held.epoch, reason)
        await self._db(self.leases.release(process, self.node_id, held.epoch))
        self._abandoned.pop(process, None)

    async def _claim(self, process: str, taken: TakenOver | None = None) -> None:
        sent = time.monotonic()
        try:
            epoch = await self._db(self.leases.claim(process, self.node_id, self.ttl_s))
        except psycopg.errors.LockNotAvailable:  # its old owner's write is still open
            log.info("cluster node %s: %s is locked by a write in flight", self.node_id, process)
            soon = time.monotonic() + LOCKED_RETRY  # its transaction ends soon: try again then
            self._next_expiry = min(self._next_expiry or soon, soon)
            return
        if epoch is None:
            return
        self._held[process] = _Held(epoch, sent + KEEP * self.ttl_s)
        if taken is not None:
            self.taken_over[process] = taken
        else:
            self.taken_over.pop(process, None)
        try:
            await self._on_gain(process, epoch)
        except Exception:
            log.exception("cluster node %s: on_gain(%r, %d) failed; handing the process back",
                          self.node_id, process, epoch)
            current = self._held.get(process)
            if current is not None and current.epoch == epoch:
                del self._held[process]
                self._abandoned[process] = epoch
                await self._db(self.leases.release(process, self.node_id, epoch))
                self._abandoned.pop(process, None)

    async def _expire_overdue(self) -> None:
        """Call on_lose for every lease whose deadline passed without a renewal, and for every
        lease cut by check_deadlines although a renewal landed since (its journal refuses
        every write from the cut on: kept, the process would hold the lease and never write)."""
        now = time.monotonic()
        for process, held in sorted(self._held.items()):
            if now >= held.deadline or held.cut:
                del self._held[process]
                self._abandoned[process] = held.epoch
                await self._lose(process, held.epoch, (
                    f"could not renew its lease within {KEEP * self.ttl_s:.1f} s "
                    f"({self.last_error or 'this node was paused or too busy'}); assumed lost"))

    async def _lose(self, process: str, epoch: int, reason: str) -> None:
        log.info("cluster node %s: gives up %s (epoch %d): %s", self.node_id, process, epoch,
                 reason)
        try:
            await self._on_lose(process, epoch, reason)
        except Exception:
            log.exception("cluster node %s: on_lose(%r, %d) failed", self.node_id, process, epoch)

