"""The owner's side of the cluster inbox: wake on NOTIFY, claim, hand over, and poll as a fallback.

:class:`InboxListener` holds one dedicated connection that ``LISTEN``s on ``cluster_inbox`` and
wakes the subscribers of the process a notification names. One listener can serve every
process a node owns (one connection, not one per process); a puller without one makes its own.
The connection is checked with a ``SELECT 1`` every ``ping_s`` between notifications, and
replaced with backoff when it breaks (PostgreSQL restarted, the backend was terminated); after
each (re)connection every subscriber is woken, for what was put while nobody listened.

:class:`InboxPuller` drains one process's inbox into its owner: a claim (fenced with the
owner's epoch) whenever it is woken, right away again while full batches come back, and every
``poll_s`` otherwise. Notifications are only a hint (PostgreSQL does not replay one a listener
missed); the rows are the record, and polling finds them even when no notification comes.

A puller whose claim is fenced out stops by itself (:attr:`InboxPuller.fenced`): its node lost
the process. What ``start`` starts, ``stop`` ends: tasks, the listener it made, its connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

import psycopg
from psycopg import sql

from runtime_core.cluster.errors import FencedOut, describe, is_passing
from runtime_core.cluster.inbox import CHANNEL, AcceptEvent, ClusterInbox
from runtime_core.journal.postgres.dsn import Scrubber

__all__ = ["InboxListener", "InboxPuller"]

log = logging.getLogger(__name__)
FIRST_RETRY = 0.05  # seconds; doubles up to MAX_RETRY
MAX_RETRY = 2.0
LOG_EVERY = 10.0  # a failure that lasts is logged again this often
Wake = Callable[[], None]


class InboxListener:
    """One LISTEN connection waking the pullers of the processes notifications name."""

    def __init__(self, dsn: str, *, channel: str = CHANNEL, ping_s: float = 5.0,
                 connect_timeout: float = 5.0,
                 application_name: str = "promptui-cluster-inbox") -> None:
        self._dsn, self._scrub = dsn, Scrubber(dsn)
        self.channel, self.ping_s, self.connect_timeout = channel, ping_s, connect_timeout
        self.application_name = application_name[:63]
        self._subscribers: dict[str, set[Wake]] = {}
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self.connects = 0  # LISTENs that succeeded (1 + reconnections)
        self.last_error: str | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def listening(self) -> bool:
        return self._listening.is_set()

    def subscribe(self, process: str, wake: Wake) -> Callable[[], None]:
        """Call ``wake()`` on every notification for ``process`` and after every
        (re)connection; returns the function that ends this subscription."""
        self._subscribers.setdefault(process, set()).add(wake)

        def unsubscribe() -> None:
            wakes = self._subscribers.get(process)
            if wakes is not None:
                wakes.discard(wake)
                if not wakes:
                    del self._subscribers[process]
        return unsubscribe

    async def start(self) -> None:
        """Start listening in the background (a database that is down is retried)."""
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"cluster-inbox-listener {self.channel}")

    async def wait_listening(self, within_s: float) -> bool:
        """Whether it listens within ``within_s`` seconds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within_s):
                await self._listening.wait()
        return self.listening

    async def stop(self) -> None:
        """End the task and close the connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)  # a cancel of ours still ends us
        self._listening.clear()

    def _wake(self, process: str | None) -> None:
        targets = self._subscribers.values() if process is None else \
            [self._subscribers.get(process, set())]
        for wake in [w for wakes in targets for w in wakes]:
            wake()

    async def _run(self) -> None:
        backoff, failures, logged_at = FIRST_RETRY, 0, 0.0
        while True:
            connects = self.connects
            try:
                await self._listen()  # returns only by an exception
            except Exception as exc:
                self.last_error = self._scrub(describe(exc))
                if not is_passing(exc):
                    log.error("cluster inbox listener failed: %s", self.last_error,
                              exc_info=exc)
            self._listening.clear()
            if self.connects > connects:  # it had been listening: a new outage
                backoff, failures = FIRST_RETRY, 0
            failures += 1
            now = time.monotonic()
            if failures == 1 or now - logged_at >= LOG_EVERY:
                logged_at = now
                log.warning("cluster inbox listener: %s; reconnecting (pullers poll meanwhile)",
                            self.last_error)
            await asyncio.sleep(backoff)  # between reconnection attempts only
            backoff = min(backoff * 2, MAX_RETRY)

    async def _listen(self) -> None:
        conn = await psycopg.AsyncConnection.connect(
            self._dsn, autocommit=True, connect_timeout=max(2, round(self.connect_timeout)),
            application_name=self.application_name)
        async with conn:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
            self.connects += 1
            self.last_error = None
            self._listening.set()
            self._wake(None)  # anything put while nobody listened
            while True:
                async for notify in conn.notifies(timeout=self.ping_s):
                    self._wake(notify.payload)
                async with asyncio.timeout(self.ping_s):  # a silently dead link shows here
                    await conn.execute("SELECT 1")


class InboxPuller:
    """Drains ``process``'s inbox into ``accept`` (see inbox.ClusterInbox.claim), claims
    fenced with ``fence_epoch`` (None: unfenced). ``listener``: a shared InboxListener (the
    caller starts and stops it), else the puller LISTENs on a connection of its own."""

    def __init__(self, inbox: ClusterInbox, process: str, accept: AcceptEvent,
                 fence_epoch: int | None, poll_s: float = 1.0, *, batch: int = 32,
                 listener: InboxListener | None = None) -> None:
        if not poll_s > 0:
            raise ValueError(f"poll_s must be > 0 seconds, not {poll_s!r}")
        if batch < 1:
            raise ValueError(f"batch must be >= 1, not {batch}")
        self.inbox, self.process, self.accept = inbox, process, accept
        self.fence_epoch, self.poll_s, self.batch = fence_epoch, float(poll_s), batch
        self._shared = listener
        self.listener: InboxListener | None = listener
        self._unsubscribe: Callable[[], None] | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.delivered = 0  # events accepted and removed from the inbox
        self.claims = 0  # claims completed
        self.last_error: str | None = None
        self.fenced: FencedOut | None = None  # set when a claim was fenced out: it stopped

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def kick(self) -> None:
        """Claim now (the owner has room again, say) instead of at the next poll."""
        self._wake.set()

    async def start(self) -> None:
        if self.running:
            return
        self.fenced = None
        if self._shared is None:
            if not self.inbox.dsn:
                raise ValueError("InboxPuller needs a DSN to LISTEN on: pass ClusterInbox(..., "
                                 "dsn=...) or a shared InboxListener")
            self.listener = InboxListener(
                self.inbox.dsn, application_name=f"promptui-inbox {self.process}")
            await self.listener.start()
        assert self.listener is not None
        self._unsubscribe = self.listener.subscribe(self.process, self._wake.set)
        self._wake.set()  # a first claim at once: what waited before this owner came
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"cluster-inbox-puller {self.process}")

    async def stop(self) -> None:
        """End the claiming task (a claim in flight is rolled back: its rows stay), the
        subscription, and the listener it made itself."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)  # a cancel of ours still ends us
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._shared is None and self.listener is not None:
            await self.listener.stop()
            self.listener = None

    async def _run(self) -> None:
        backoff, failures, logged_at = FIRST_RETRY, 0, 0.0
        fence = None if self.fence_epoch is None else (self.process, self.fence_epoch)
        while True:
            _end_if_cancelled()
            self._wake.clear()  # a wake from now on (even during the claim) claims again
            try:
                items = await self.inbox.claim(self.process, self.batch, self.accept,
                                               fence=fence)
            except FencedOut as exc:
                self.fenced, self.last_error = exc, str(exc)
                log.warning("cluster inbox %s: %s; the puller stops", self.process, exc)
                return
            except Exception as exc:
                self.last_error = describe(exc)
                failures += 1
                now = time.monotonic()
                if failures == 1 or now - logged_at >= LOG_EVERY:
                    logged_at = now
                    log.log(logging.WARNING if is_passing(exc) else logging.ERROR,
                            "cluster inbox %s: a claim failed (%d in a row): %s; retrying",
                            self.process, failures, self.last_error,
                            exc_info=None if is_passing(exc) else exc)
                delay, backoff = min(backoff, self.poll_s), min(backoff * 2, MAX_RETRY)
            else:
                self.claims += 1
                self.delivered += len(items)
                self.last_error, failures, backoff = None, 0, FIRST_RETRY
                if len(items) >= self.batch:
                    continue  # a full batch: more may wait
                delay = self.poll_s
            _end_if_cancelled()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()


def _end_if_cancelled() -> None:
    """End the current task if a cancel of it was swallowed on the way (a library that caught
    the CancelledError of a call in flight and returned): its request still counts
    (``Task.cancelling``), and every later ``asyncio.timeout`` would take it for its own and
    turn it into a TimeoutError, so the task would go on and ``stop()`` wait forever."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
