"""A scale-out node's runtime: it runs the processes whose leases its ClusterNode holds.

Every node loads the same manifests; a process joins the runtime only once the node gains its
lease. Then it gets a journal of its own on the cluster's PostgreSQL, fenced to that epoch
(journal/fencing.py; one per process, so a fence stops only that one), and starts: its first
start recovers from the shared journal exactly as a restart does on one box.

On a loss the node steps down without writing anything more: the journal refuses every later
append at once (what was queued still commits under the lease, or the fence refuses it), then
the process is closed and removed. A rebalance (the lease is still ours) first shuts it down as
for a restart, its runs in flight finishing for a moment. A write refused by the fence (another
node took the process while this one was paused) steps it down the same way and ends the lease.
Every node serves every process's webhooks (webhooks.py: a non-owner puts the event into
the process's cluster inbox). Each change is an ``OwnershipChanged`` event and a log line;
ownership hooks (a cluster inbox's puller, say) hear of each gain (once it runs) and loss
(before it stops). The work on a process runs in tasks, one after another, so a slow start never
holds up the ClusterNode's round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from runtime_core.cluster.db import Connector
from runtime_core.cluster.errors import describe
from runtime_core.cluster.ingress import ClusterIngress
from runtime_core.cluster.leases import Lease, LeaseStore
from runtime_core.cluster.node import ClusterNode
from runtime_core.cluster.nodes import NodeAging, NodeRegistry
from runtime_core.cluster.status_board import StatusBoard
from runtime_core.cluster.takeover_holds import old_writer_done
from runtime_core.cluster.webhooks import ClusterWebhooks
from runtime_core.config import ProcessConfig
from runtime_core.events import OwnershipChanged
from runtime_core.journal.postgres.fencing import JournalFenced
from runtime_core.journal.postgres.journal import PostgresJournal
from runtime_core.manifest.loader import Manifest
from runtime_core.process.process import AgentProcess
from runtime_core.runs.waiting import WriterHold
from runtime_core.runtime import AgentRuntime

__all__ = ["ClusterHost", "OwnershipHook", "cluster_config"]

log = logging.getLogger("runtime_core.cluster")
STEP_DOWN_WAIT = 2.0  # seconds a loss waits for its step-down before the lease may go
HANDOVER_DRAIN = 2.0  # seconds the runs in flight may take to finish on a rebalance (at most)
#: how ClusterNode's reasons begin when the lease is still this node's as it gives it up
HANDED_OVER = ("handed over to node", "no longer assigned to any node")
STOPPING = "this node is stopping"
JOURNAL_POOL = 2  # read connections of each owned process's journal
HOLD_CHECK_S = 1.0  # seconds between two looks at whether a takeover's old owner is gone
START_RETRY_S = (1.0, 60.0)  # a failed start is tried again after 1 s, 2 s, ... 60 s at most


class OwnershipHook(Protocol):
    async def gained(self, name: str, epoch: int, process: AgentProcess) -> None: ...

    async def lost(self, name: str, epoch: int, reason: str) -> None: ...


@dataclass(slots=True)
class Owned:
    epoch: int
    journal: PostgresJournal
    process: AgentProcess | None = None  # None until its start task added it
    closed: bool = False  # shut down cleanly already (a rebalance, this node stopping)
    ready: bool = False  # its start is over: it takes commands and events
    failures: int = 0  # starts that failed in a row (the next waits longer)
    failure: str | None = None  # why the last start failed, until one succeeds
    retry: asyncio.TimerHandle | None = None  # the next start, after a failed one
    holds: asyncio.Task[None] | None = None  # watches a takeover's old owner (_watch_holds)


def cluster_config(config: ProcessConfig, dsn: str, name: str = "a process") -> ProcessConfig:
    """A copy of ``config`` journaling to the cluster's PostgreSQL (a process that keeps no
    journal keeps one here: a takeover recovers from it)."""
    copy = config.model_copy(deep=True)
    level = copy.journal.level if copy.journal.level != "none" else "checkpoint"
    if copy.journal.retention is not None:  # SQLite-only: the cluster's journal keeps all
        log.info("cluster: %s's journal.retention does not apply on PostgreSQL (it keeps "
                 "every entry); the cluster runs it without", name)
    copy.journal = copy.journal.model_copy(update={"backend": "postgres", "dsn": dsn,
                                                   "level": level, "retention": None})
    return copy


class ClusterHost:
    def __init__(self, runtime: AgentRuntime, manifests: list[Manifest], dsn: str, *,
                 node_id: str, address: str = "", ttl_s: float = 10.0,
                 max_processes: int | None = None, connect_timeout: float = 5.0,
                 node_aging: NodeAging | None = None) -> None:
        self.runtime, self.dsn, self.node_id, self.address = runtime, dsn, node_id, address
        self.node_aging = node_aging or NodeAging()  # when silent nodes are gone, and pruned
        self.manifests = {m.name: m for m in manifests}
        self.ttl_s, self.max_processes = float(ttl_s), max_processes
        self.connect_timeout = connect_timeout
        self.node: ClusterNode | None = None
        self.owned: dict[str, Owned] = {}
        self.hooks: list[OwnershipHook] = []
        self._work: dict[str, asyncio.Task[None]] = {}  # each process's latest start or stop
        self._stopping = False
        self._stopped = asyncio.Event()
        #: the first wait after a failed start, and the longest (it doubles in between)
        self.start_retry_s: tuple[float, float] = START_RETRY_S
        # reads for the API (nodes, owners, states) and lease releases: not the node's own
        # connection, so they never hold up its rounds
        self.reads = Connector(dsn, connect_timeout=connect_timeout,
                               application_name=f"promptui-cluster-reads {node_id}"[:63])
        self.shown = self.reads.shown  # the DSN without its password
        self.leases = LeaseStore(self.reads)
        self.registry = NodeRegistry(self.reads)
        self.owners_seen: dict[str, Lease] = {}  # the live leases as last read
        runtime.node_of = self.node_of
        # the inbox (events for the processes this node runs, put by any node) and the token
        self.ingress = ClusterIngress(dsn, node_id, connect_timeout=connect_timeout,
                                      idle_in_transaction_s=self.ttl_s)
        self.add_hook(self.ingress)
        runtime.delivery_gate = self.ingress.gate  # a delivery is taken once, cluster-wide
        # every webhook of every process, served here too: a non-owner puts into the inbox
        self.webhooks = ClusterWebhooks(manifests, self.ingress.put_held)
        # the figures of the processes it runs, for every node's views (its control plane
        # sets board.source; status_board.py)
        self.board = StatusBoard(dsn, node_id, connect_timeout=connect_timeout)

    def check(self) -> None:  # the JournalError a malformed DSN gives, connecting nowhere
        PostgresJournal(self.dsn).preflight()

    def add_hook(self, hook: OwnershipHook) -> None:  # hears of each gain and loss
        self.hooks.append(hook)

    def node_of(self, name: str) -> str | None:
        """The node that owns ``name``: this one, or the holder of its live lease (as last
        read; None: nobody, or not known yet)."""
        if name in self.owned:
            return self.node_id
        lease = self.owners_seen.get(name)
        return None if lease is None else lease.node_id

    def runs_here(self, name: str) -> AgentProcess | None:
        """The process if this node owns it and started it (an event it took before its
        journal is open would be acknowledged before it is durable), else None."""
        owned = self.owned.get(name)
        return owned.process if owned is not None and owned.ready else None

    def failing(self, name: str) -> tuple[AgentProcess | None, str] | None:
        """(the process, why) while this node holds ``name`` and its last start failed."""
        owned = self.owned.get(name)
        if owned is None or owned.ready or owned.failure is None:
            return None
        return owned.process, owned.failure

    def start_failures(self, name: str) -> int:
        """How many starts of ``name`` failed in a row on this node (0: none, or not ours)."""
        owned = self.owned.get(name)
        return 0 if owned is None else owned.failures

    # -- start and stop ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Join the cluster (ClusterError when its database cannot be reached)."""
        self.node = ClusterNode(
            self.dsn, self.node_id, self.address, ttl_s=self.ttl_s,
            max_processes=self.max_processes, on_gain=self._gain, on_lose=self._lose,
            processes=lambda: list(self.manifests), connect_timeout=self.connect_timeout,
            on_overdue=self._overdue, prune_after_s=self.node_aging.prune_after_s)
        try:
            await self.node.start()
            await self.ingress.start()
            await self.webhooks.start()
        except BaseException:
            await self.webhooks.stop()
            with contextlib.suppress(Exception):
                await self.node.stop()
            await self.ingress.close()
            await self.reads.close()
            raise
        self.board.start()
        log.info("cluster node %s joined %s (lease TTL %.1f s%s)", self.node_id, self.shown,
                 self.ttl_s, "" if self.max_processes is None else
                 f", at most {self.max_processes} processes")

    async def stop(self, drain_timeout: float | None = None) -> dict[str, dict[str, int]]:
        """Leave: each process shuts down as for a service restart (AgentProcess.shutdown,
        its counts returned) while its lease still holds, then the leases end at once. A
        second call waits for the first to end and returns no counts."""
        if self._stopping:
            await self._stopped.wait()
            return {}
        self._stopping = True
        names = sorted(self.owned)
        try:
            await self.board.stop()  # its last figures stay on the board for the next owner
            await self.webhooks.stop()  # a sender's next try goes to another node
            await self.ingress.stop_pullers()  # what waits in the inbox stays for the next owner
            results = await asyncio.gather(*(self._shut_down(n, drain_timeout) for n in names))
            if self.node is not None:
                await self.node.stop()  # on_lose for each: the rest is closed; then it leaves
            for task in list(self._work.values()):
                with contextlib.suppress(Exception):
                    await task
        finally:
            await self.ingress.close()
            await self.reads.close()
            self._stopped.set()
        return {n: counts for n, counts in zip(names, results, strict=True) if counts}

    async def _shut_down(self, name: str, drain: float | None) -> dict[str, int] | None:
        """Shut ``name`` down as for a restart while the lease holds (bounded: a database
        that is down makes it a step-down); its counts, or None."""
        await self._settled(name)
        owned = self.owned.get(name)
        if owned is None or owned.process is None:
            return None
        try:
            async with asyncio.timeout((drain or 0.0) + self.ttl_s / 4):
                counts = await owned.process.shutdown(drain)
        except Exception as exc:  # the step-down that follows writes nothing more anyway
            log.info("cluster node %s: %s did not shut down cleanly (%s)", self.node_id, name,
                     describe(exc))
            return None
        owned.closed = True
        return counts

    # -- gains and losses (called by the ClusterNode, inside its round) ---------------------------
    async def _gain(self, name: str, epoch: int) -> None:
        if self._stopping or name not in self.manifests:
            return  # stopping: node.stop() ends the lease with the others
        journal = PostgresJournal(
            self.dsn, fence=(name, epoch), pool_size=JOURNAL_POOL,
            idle_in_transaction_timeout=self.ttl_s, connect_timeout=self.connect_timeout,
            application_name=f"promptui {self.node_id} {name}"[:63])
        journal.on_fenced(lambda error: self._fenced(name, epoch, error))
        owned = self.owned[name] = Owned(epoch, journal)
        self._then(name, self._start(name, owned))

    async def _lose(self, name: str, epoch: int, reason: str) -> None:
        owned = self.owned.get(name)
        if owned is None or owned.epoch != epoch:
            return  # stepped down already (fenced, or it did not start)
        if reason.startswith(HANDED_OVER) and not self._stopping:  # the lease is still ours
            await self._shut_down(name, min(HANDOVER_DRAIN, self.ttl_s / 4))
        task = self._step_down(name, owned, reason)
        with contextlib.suppress(Exception):  # bounded: the fence keeps a late write out
            async with asyncio.timeout(STEP_DOWN_WAIT):
                await asyncio.shield(task)

    def _overdue(self, name: str, epoch: int) -> None:
        """``name``'s lease deadline passed without a renewal (ClusterNode.check_deadlines;
        this node was paused, or cut off from the database): before its runs take another
        step, the journal refuses every append and the calls in flight are cut; the round's
        on_lose steps it down."""
        owned = self.owned.get(name)
        if owned is None or owned.epoch != epoch:
            return
        owned.journal.refuse("its lease's deadline passed without a renewal")
        cut = owned.process.takeover.cut_runs_now() if owned.process is not None else 0
        log.warning("cluster node %s: the lease of %s (epoch %d) went past its deadline "
                    "without a renewal: its journal refuses every write and %d run(s) in "
                    "flight were cut", self.node_id, name, epoch, cut)

    def _fenced(self, name: str, epoch: int, error: JournalFenced) -> None:
        """A write of ``name`` was refused by the fence: another node owns it now."""
        owned = self.owned.get(name)
        if owned is not None and owned.epoch == epoch:
            self._step_down(name, owned, str(error), release=True)

    # -- the work on one process, in order -------------------------------------------------------
    def _then(self, name: str, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``work`` after whatever runs for ``name`` now."""
        before = self._work.get(name)

        async def chained() -> None:
            if before is not None:
                with contextlib.suppress(BaseException):
                    await before
            await work

        task = asyncio.get_running_loop().create_task(chained(), name=f"cluster {name}")
        self._work[name] = task
        task.add_done_callback(lambda done: self._forget(name, done))
        return task

    def _forget(self, name: str, task: asyncio.Task[None]) -> None:
        if self._work.get(name) is task:
            del self._work[name]
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("cluster node %s: work on %s failed", self.node_id, name, exc_info=error)

    async def _settled(self, name: str) -> None:
        if (task := self._work.get(name)) is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(task)

    async def _start(self, name: str, owned: Owned) -> None:
        if self.owned.get(name) is not owned:
            await owned.journal.close()  # lost before it could start
            return
        manifest = self.manifests[name]
        try:
            process = owned.process
            if process is None:
                process = owned.process = self.runtime.add_manifest(
                    manifest, config=cluster_config(manifest.config, self.dsn, name),
                    journal=owned.journal)
            await process.start()  # CREATED, or FAILED by the start before (a retry)
        except Exception as exc:
            if self.owned.get(name) is owned:  # not a loss cutting its start short
                self._start_failed(name, owned, describe(exc))
            return
        if self.owned.get(name) is not owned:
            return
        taken = self.node.taken_over.pop(name, None) if self.node is not None else None
        if taken is not None and taken.epoch < owned.epoch:
            hold, held = process.takeover.hold_unknown_writes(taken.node_id, taken.epoch,
                                                     taken.lease_ended_at)
            if held:
                log.warning("cluster node %s: took %s over from node %s, which stopped "
                            "answering; %d run(s) wait on a write it may still finish: "
                            "'not applied' is refused until it is seen gone or its calls' "
                            "time is up", self.node_id, name, taken.node_id, len(held))
                owned.holds = asyncio.get_running_loop().create_task(
                    self._watch_holds(name, owned, process, hold),
                    name=f"cluster {name} holds")
        owned.ready, owned.failures, owned.failure = True, 0, None
        recovered = process.recovered or {}
        log.info("cluster node %s: runs %s (epoch %d)%s", self.node_id, name, owned.epoch,
                 f", recovered: {recovered}" if recovered else "")
        self.runtime.notifier.emit(OwnershipChanged(
            process=name, node=self.node_id, epoch=owned.epoch, gained=True,
            reason="its lease was claimed by this node"))
        await self._tell(name, lambda hook: hook.gained(name, owned.epoch, process))

    async def _watch_holds(self, name: str, owned: Owned, process: AgentProcess,
                           hold: WriterHold) -> None:
        """Lift the holds on ``name``'s parked writes as soon as the database shows that the
        old owner can no longer write (cluster/takeover_holds.py); they end by themselves at
        their time otherwise."""
        while self.owned.get(name) is owned and time.time() < hold.until:
            why = None
            with contextlib.suppress(Exception):  # the database is down: ask again
                async with asyncio.timeout(self.connect_timeout), \
                        self.reads.connection() as conn:
                    why = await old_writer_done(conn, hold.node_id, name,
                                                hold.lease_ended_at)
            if why is not None:
                lifted = process.takeover.lift_write_holds(hold.node_id)
                log.info("cluster node %s: %s; 'not applied' may be answered for %d run(s) "
                         "of %s", self.node_id, why, len(lifted), name)
                return
            await asyncio.sleep(HOLD_CHECK_S)

    def _start_failed(self, name: str, owned: Owned, why: str) -> None:
        """Keep the lease (another node would most likely fail the same way, and handing it
        back at once would claim and fail it again in a loop) and try again later, waiting
        twice as long each time; the process shows FAILED with why meanwhile."""
        owned.failures += 1
        owned.failure = why
        first, longest = self.start_retry_s
        delay = min(longest, first * 2 ** (owned.failures - 1))
        log.error("cluster node %s: %s did not start here (%d in a row): %s; the next try in "
                  "%.3g s (the lease stays with this node)", self.node_id, name,
                  owned.failures, why, delay)

        def again() -> None:
            owned.retry = None
            if self.owned.get(name) is owned and not self._stopping:
                self._then(name, self._start(name, owned))

        owned.retry = asyncio.get_running_loop().call_later(delay, again)

    def _step_down(self, name: str, owned: Owned, reason: str, *, release: bool = False
                   ) -> asyncio.Task[None]:
        """Stop this node's copy of ``name`` without writing anything more: the journal
        refuses every append from now on; the process is closed and removed in a task."""
        if self.owned.get(name) is owned:
            del self.owned[name]
        if owned.retry is not None:
            owned.retry.cancel()
            owned.retry = None
        if owned.holds is not None:
            owned.holds.cancel()
        owned.journal.refuse(f"this node stepped down: {reason}")
        if owned.process is not None:  # at once: a call in flight must not go on (a no-op
            owned.process.takeover.cut_runs_now()  # after a handover or a stop)
        return self._then(name, self._stop(name, owned, reason, release))

    async def _stop(self, name: str, owned: Owned, reason: str, release: bool) -> None:
        await self._tell(name, lambda hook: hook.lost(name, owned.epoch, reason))
        await owned.journal.close()  # what was queued commits, or the fence refuses it
        if owned.process is not None and self.runtime.processes.get(name) is owned.process:
            try:
                await self.runtime.remove_process(name, close=not owned.closed)
            except Exception as exc:
                log.warning("cluster node %s: closing %s: %s", self.node_id, name, exc)
        expected = reason.startswith((*HANDED_OVER, STOPPING))
        log.log(logging.INFO if expected else logging.WARNING, "cluster node %s: stepped down "
                "from %s (epoch %d): %s", self.node_id, name, owned.epoch, reason)
        self.runtime.notifier.emit(OwnershipChanged(
            process=name, node=self.node_id, epoch=owned.epoch, gained=False, reason=reason))
        if release:  # end the lease if it is still ours, and let the node see it now
            with contextlib.suppress(Exception):
                await self.leases.release(name, self.node_id, owned.epoch)
            if self.node is not None:
                self.node.kick()

    async def _tell(self, name: str, call: Callable[[OwnershipHook], Awaitable[None]]) -> None:
        for hook in list(self.hooks):
            try:
                await call(hook)
            except Exception:
                log.exception("cluster node %s: an ownership hook failed on %s", self.node_id,
                              name)

    # -- reads for the API -------------------------------------------------------------------------
    async def owners(self) -> dict[str, Lease]:
        """The live leases (process -> holder) now; as last read when the database is down."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.connect_timeout):
                self.owners_seen = await self.leases.owners()
        return dict(self.owners_seen)
