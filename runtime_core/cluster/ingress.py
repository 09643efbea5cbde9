"""A scale-out node's way in for what belongs to another node: the cluster inbox and the token.

Any node takes an event for any process: one it does not run goes into that process's queue
in PostgreSQL (``cluster_inbox``, :meth:`ClusterIngress.put`: durable once it returns, and a
NOTIFY wakes the owner). The owner drains it: one :class:`InboxPuller` per process it runs
(started by the ClusterHost's ownership hook once the process runs, stopped before it stops),
all woken by the node's one :class:`InboxListener`, polling every ``poll_s`` as the fallback.
A puller hands each event to the process's push intake (journaled first, then acknowledged),
so an event is taken exactly once whichever node it came in through.

:attr:`ClusterIngress.token` is the cluster's shared bearer token (cluster/forward.py): every
node's API accepts it, and a node forwards a command for a process it does not run to the
owner with it (:meth:`ClusterIngress.forward`).

The inbox has its own small connection pool, not the node's connections: an inject never
waits for a lease round, nor a round for an inject.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from runtime_core.cluster.delivery_gate import DeliveryGate, pulling
from runtime_core.cluster.errors import ClusterError, describe
from runtime_core.cluster.forward import Forwarded, Owner, cluster_token, forward_request, owner_of
from runtime_core.cluster.inbox import ClusterInbox, PutResult
from runtime_core.cluster.leases import LeaseStore
from runtime_core.cluster.nodes import NodeRegistry
from runtime_core.cluster.puller import InboxListener, InboxPuller
from runtime_core.triggers.base import AcceptResult, TriggerEvent

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from runtime_core.process.process import AgentProcess

__all__ = ["ClusterIngress"]

log = logging.getLogger("runtime_core.cluster")
#: the inbox's connections: puts from the API and the webhooks, the pullers' claims, and the
#: delivery gate's locks while this node's processes journal an event with a delivery key
POOL_SIZE = 8
TAKEN = (AcceptResult.ACCEPTED, AcceptResult.DUPLICATE, AcceptResult.FILTERED)


class ClusterIngress:
    """The inbox, its listener and the pullers of the processes this node runs; an
    ownership hook of the ClusterHost (``gained``/``lost``)."""

    def __init__(self, dsn: str, node_id: str, *, poll_s: float = 1.0,
                 connect_timeout: float = 5.0, idle_in_transaction_s: float | None = None
                 ) -> None:
        self.dsn, self.node_id, self.poll_s = dsn, node_id, float(poll_s)
        self.connect_timeout = connect_timeout
        #: A claim's transaction share-locks its process's lease row: a node paused inside one
        #: (SIGSTOP, a VM freeze) would keep the next owner from claiming the lease until it
        #: wakes. The server ends such a session after this long (the lease TTL); its rows
        #: stay and are taken again, recognised by their delivery key (cluster/inbox.py).
        self.idle_in_transaction_s = idle_in_transaction_s
        self.token: str | None = None  # the cluster's token, once started
        self.inbox: ClusterInbox | None = None
        self.listener: InboxListener | None = None
        self.pullers: dict[str, InboxPuller] = {}
        self._running: dict[str, tuple[int, AgentProcess]] = {}  # gained, not lost yet
        self._ready = False  # started: gains start pullers at once
        self._pool: AsyncConnectionPool[Any] | None = None
        self._stopping = False
        #: one delivery key, one event across the nodes (the processes this node runs hold
        #: it too: the runtime's delivery_gate); on the inbox's pool, once started
        self.gate = DeliveryGate(timeout_s=connect_timeout)

    async def _configure(self, conn: Any) -> None:
        if self.idle_in_transaction_s is not None:
            await conn.execute("SELECT set_config('idle_in_transaction_session_timeout', %s, "
                               "false)", (f"{max(1, round(self.idle_in_transaction_s * 1000))}ms",))

    async def start(self) -> None:
        """Read (or make) the cluster token, open the inbox's pool and LISTEN; ClusterError
        when the database cannot be reached (then nothing stays open)."""
        from psycopg_pool import AsyncConnectionPool

        try:
            async with asyncio.timeout(self.connect_timeout * 3):
                self.token = await cluster_token(self.dsn)
                pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                    self.dsn, min_size=1, max_size=POOL_SIZE, open=False,
                    kwargs={"autocommit": True, "connect_timeout": max(1, round(
                        self.connect_timeout))},
                    name=f"promptui-inbox {self.node_id}"[:63], configure=self._configure)
                self._pool = pool
                await pool.open(wait=True, timeout=self.connect_timeout)
                self.gate.pool = pool
                self.inbox = ClusterInbox(pool, dsn=self.dsn)
                await self.inbox.ensure()
                self.listener = InboxListener(
                    self.dsn, connect_timeout=self.connect_timeout,
                    application_name=f"promptui-inbox {self.node_id}")
                await self.listener.start()
        except BaseException as exc:
            await self.close()
            if isinstance(exc, Exception):
                raise ClusterError(f"the cluster inbox cannot be opened: {describe(exc)}"
                                   ) from None
            raise
        self._ready = True
        for name, (epoch, process) in list(self._running.items()):  # gained while it started
            if name not in self.pullers:
                await self._pull(name, epoch, process)

    async def stop_pullers(self) -> None:
        """Stop taking events in (the node is stopping): what waits stays in the inbox."""
        self._stopping, self._ready = True, False
        pullers, self.pullers = list(self.pullers.values()), {}
        for puller in pullers:
            with contextlib.suppress(Exception):
                await puller.stop()

    async def close(self) -> None:
        """Pullers, the listener, then the pool."""
        await self.stop_pullers()
        listener, self.listener = self.listener, None
        if listener is not None:
            with contextlib.suppress(Exception):
                await listener.stop()
        pool, self._pool = self._pool, None
        self.inbox = self.gate.pool = None
        if pool is not None:
            with contextlib.suppress(Exception):
                await pool.close()

    # -- the ownership hook ----------------------------------------------------------------------
    async def gained(self, name: str, epoch: int, process: AgentProcess) -> None:
        self._running[name] = (epoch, process)
        if self._ready and not self._stopping:
            await self._pull(name, epoch, process)

    async def lost(self, name: str, epoch: int, reason: str) -> None:
        if self._running.get(name, (None,))[0] == epoch:
            del self._running[name]
        puller = self.pullers.get(name)
        if puller is not None and puller.fence_epoch == epoch:
            del self.pullers[name]
            await puller.stop()

    async def _pull(self, name: str, epoch: int, process: AgentProcess) -> None:
        assert self.inbox is not None

        async def accept(event: TriggerEvent) -> bool:
            with pulling():  # a row that passed the delivery gate already
                result, _ = await process.accept_pushed(event)
            return result in TAKEN

        old = self.pullers.pop(name, None)
        if old is not None:
            await old.stop()
        puller = InboxPuller(self.inbox, name, accept, epoch, self.poll_s,
                             listener=self.listener)
        self.pullers[name] = puller
        await puller.start()

    # -- for the API -----------------------------------------------------------------------------
    async def put(self, process: str, event: TriggerEvent) -> PutResult:
        """Queue ``event`` for ``process``'s owner (see ClusterInbox.put)."""
        if self.inbox is None:
            raise ClusterError("this node's cluster inbox is not open")
        async with asyncio.timeout(self.connect_timeout * 2):
            return await self.inbox.put(process, event)

    async def put_held(self, process: str, event: TriggerEvent) -> tuple[PutResult, str]:
        """``put``, unless the event repeats one already taken, and the id it is held as: its
        own, or (a duplicate) the id of the event it repeats: one waiting in the inbox, or one
        the owner journaled already (its delivery key in the journal's delivery index: a
        sender's redelivery or an inject's idempotency key, taken once whichever node it
        comes through, also when it reaches the owner at the same moment: delivery_gate.py)."""
        if self.inbox is None:
            raise ClusterError("this node's cluster inbox is not open")
        async with asyncio.timeout(self.connect_timeout * 3):
            return await self.gate.put_once(process, event)

    async def owner(self, leases: LeaseStore, registry: NodeRegistry, process: str,
                    stale_after_s: float) -> Owner | None:
        async with asyncio.timeout(self.connect_timeout):
            return await owner_of(leases, registry, process, stale_after_s=stale_after_s)

    async def forward(self, owner: Owner, method: str, path: str, *, json: Any,
                      retry_after_s: float, timeout: float = 60.0  # noqa: ASYNC109
                      ) -> Forwarded:
        """``method path`` (its query included) on ``owner``'s node with the cluster token."""
        if self.token is None:
            raise ClusterError("this node has not read the cluster token yet")
        return await forward_request(owner.address, method, path, token=self.token, json=json,
                                     timeout=timeout, forwarded_by=self.node_id,
                                     retry_after_s=retry_after_s)
