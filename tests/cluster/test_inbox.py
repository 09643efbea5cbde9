"""The cluster inbox on the real (throwaway) PostgreSQL: durable, deduplicated puts; SKIP LOCKED
claims that hand each event over exactly once; the fence; the puller's NOTIFY wake-ups, its
polling fallback and its survival of a PostgreSQL crash."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from runtime_core.cluster import FencedOut, LeaseStore
from runtime_core.cluster.inbox import ClusterInbox, inbox_delivery_key
from runtime_core.cluster.puller import InboxListener, InboxPuller
from runtime_core.triggers.base import DELIVERY_KEY, TriggerEvent
from tests.helpers.polling import wait_for
from tests.helpers.postgres import PgServer

pytestmark = pytest.mark.slow


def event(n: int, key: str | None = None) -> TriggerEvent:
    return TriggerEvent(trigger_id="hook", trigger_type="webhook", payload={"n": n},
                        event_id=f"e{n}", metadata={DELIVERY_KEY: key} if key else {})


@pytest.fixture
async def inbox(pg_dsn: str) -> AsyncIterator[ClusterInbox]:
    box = ClusterInbox(pg_dsn)
    try:
        yield box
    finally:
        await box.close()


class Sink:
    """An owner's accept callback that records what it was handed."""

    def __init__(self) -> None:
        self.events: list[TriggerEvent] = []
        self.at: dict[str, float] = {}

    async def __call__(self, ev: TriggerEvent) -> bool:
        self.events.append(ev)
        self.at[ev.event_id] = time.monotonic()
        return True

    @property
    def ids(self) -> list[str]:
        return [ev.event_id for ev in self.events]


async def put_retrying(box: ClusterInbox, process: str, ev: TriggerEvent) -> str:
    """A sender retrying while PostgreSQL comes back (a retry after an ambiguous failure is a
    duplicate at worst)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return await box.put(process, ev)
        except psycopg.OperationalError:
            assert time.monotonic() < deadline, "PostgreSQL did not come back"
            await asyncio.sleep(0.05)


def inbox_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("cluster-inbox")]


async def test_put_is_durable_and_deduplicates(pg_dsn: str, inbox: ClusterInbox) -> None:
    assert await inbox.put("p", event(1, key="gh-1")) == "accepted"
    assert await inbox.put("p", event(1)) == "duplicate"  # the same event id
    assert await inbox.put("p", event(2, key="gh-1")) == "duplicate"  # the same delivery key
    assert await inbox.put("q", event(2, key="gh-1")) == "accepted"  # keys are per process
    assert await inbox.put("p", event(3)) == "accepted"
    # committed before put returned: another connection sees exactly these rows
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        rows = await (await conn.execute(
            "SELECT process, event_id, delivery_key FROM cluster_inbox ORDER BY id")).fetchall()
    assert rows == [("p", "e1", "gh-1"), ("q", "e2", "gh-1"), ("p", "e3", None)]


async def test_concurrent_puts_of_one_delivery_add_one_row(pg_dsn: str) -> None:
    boxes = [ClusterInbox(pg_dsn) for _ in range(6)]
    try:
        await asyncio.gather(*(b.ensure() for b in boxes))  # tables made once, together
        results = await asyncio.gather(*(
            b.put("p", event(i, key="same")) for i, b in enumerate(boxes)))
        assert sorted(results) == ["accepted"] + ["duplicate"] * 5
        assert await boxes[0].pending("p") == 1
    finally:
        await asyncio.gather(*(b.close() for b in boxes))


async def test_two_claimers_take_every_row_exactly_once(pg_dsn: str) -> None:
    senders = [ClusterInbox(pg_dsn) for _ in range(4)]
    claimers = [ClusterInbox(pg_dsn) for _ in range(2)]
    try:
        # 500 rows from four senders at once
        await asyncio.gather(*(_send(box, k) for k, box in enumerate(senders)))
        sinks = [Sink(), Sink()]

        async def drain(box: ClusterInbox, sink: Sink) -> None:
            async def accept(ev: TriggerEvent) -> bool:
                await asyncio.sleep(0)  # let the other claimer in while this one holds rows
                return await sink(ev)
            while await box.claim("p", 25, accept):
                pass

        await asyncio.gather(*(drain(b, s) for b, s in zip(claimers, sinks, strict=True)))
        got = sinks[0].ids + sinks[1].ids
        assert len(got) == 500 and set(got) == {f"e{n}" for n in range(500)}
        assert sinks[0].ids and sinks[1].ids, "both claimers should have taken rows"
        assert await claimers[0].pending() == 0
    finally:
        await asyncio.gather(*(b.close() for b in senders + claimers))


async def _send(box: ClusterInbox, k: int) -> None:
    for n in range(k, 500, 4):
        assert await box.put("p", event(n)) == "accepted"


async def test_claim_keeps_what_accept_did_not_take(inbox: ClusterInbox) -> None:
    for n in range(5):
        await inbox.put("p", event(n))
    assert await inbox.claim("p", 10, _refuse) == []  # no room: everything stays
    assert await inbox.pending("p") == 5

    seen: list[str] = []

    async def fails_on_third(ev: TriggerEvent) -> bool:
        seen.append(ev.event_id)
        if ev.event_id == "e2":
            raise RuntimeError("the owner's journal is down")
        return True

    with pytest.raises(RuntimeError, match="journal is down"):
        await inbox.claim("p", 10, fails_on_third)
    assert seen == ["e0", "e1", "e2"]
    assert await inbox.pending("p") == 3  # e0, e1 accepted and gone; e2.. stay, in order
    sink = Sink()
    assert [item.event.event_id for item in await inbox.claim("p", 10, sink)] == \
        ["e2", "e3", "e4"]
    assert await inbox.pending("p") == 0


async def _refuse(ev: TriggerEvent) -> bool:
    return False


async def test_claimed_events_carry_a_delivery_key(inbox: ClusterInbox) -> None:
    await inbox.put("p", event(1, key="gh-1"))
    await inbox.put("p", event(2))
    items = await inbox.claim("p", 10, Sink())
    assert items[0].event.metadata[DELIVERY_KEY] == "gh-1"  # the sender's own is kept
    assert items[1].event.metadata[DELIVERY_KEY] == inbox_delivery_key(items[1].id)
    assert items[1].event.payload == {"n": 2} and items[1].process == "p"


async def test_a_claim_cut_short_is_redelivered_under_the_same_key(inbox: ClusterInbox) -> None:
    """The owner journaled the event, then died before the inbox row was deleted: the row
    comes back with the same delivery key, which the owner's journal knows by then."""
    await inbox.put("p", event(1))
    journaled: list[TriggerEvent] = []
    forever = asyncio.Event()

    async def journal_then_hang(ev: TriggerEvent) -> bool:
        journaled.append(ev)
        await forever.wait()
        return True

    claim = asyncio.get_running_loop().create_task(inbox.claim("p", 5, journal_then_hang))
    await wait_for(lambda: bool(journaled), 5, "the event handed over")
    claim.cancel()
    with pytest.raises(asyncio.CancelledError):
        await claim
    assert await inbox.pending("p") == 1
    again = await inbox.claim("p", 5, Sink())
    assert again[0].event.metadata[DELIVERY_KEY] == journaled[0].metadata[DELIVERY_KEY]
    assert await inbox.pending("p") == 0


async def test_fenced_claim_takes_nothing(pg_dsn: str, inbox: ClusterInbox) -> None:
    leases = LeaseStore(pg_dsn)
    try:
        old = await leases.claim("p", "a", 30)
        assert old is not None and await leases.release("p", "a", old)
        new = await leases.claim("p", "b", 30)
        assert new == old + 1
        await inbox.put("p", event(1))
        sink = Sink()
        with pytest.raises(FencedOut) as raised:
            await inbox.claim("p", 10, sink, fence=("p", old))
        assert (raised.value.current_owner, raised.value.current_epoch) == ("b", new)
        assert sink.events == [] and await inbox.pending("p") == 1
        assert len(await inbox.claim("p", 10, sink, fence=("p", new))) == 1
    finally:
        await leases.close()


async def test_inbox_over_a_pool(pg_dsn: str) -> None:
    async with AsyncConnectionPool(pg_dsn, min_size=1, max_size=2, open=False) as pool:
        box = ClusterInbox(pool)
        assert box.dsn == pg_dsn  # a puller can LISTEN with the pool's conninfo
        assert await box.put("p", event(1)) == "accepted"
        assert await box.put("p", event(1)) == "duplicate"
        sink = Sink()
        assert len(await box.claim("p", 5, sink)) == 1 and sink.ids == ["e1"]
        assert await box.pending() == 0


async def test_puller_wakes_on_notify_quickly(pg_dsn: str, inbox: ClusterInbox) -> None:
    sink = Sink()
    puller = InboxPuller(ClusterInbox(pg_dsn), "p", sink, None, poll_s=10.0)
    await puller.start()
    try:
        assert puller.listener is not None and await puller.listener.wait_listening(10)
        await wait_for(lambda: puller.claims >= 1, 10, "the first claim")
        latencies = []
        for n in range(5):
            sent, name = time.monotonic(), f"e{n}"
            await inbox.put("p", event(n))
            await wait_for(lambda: name in sink.at, 5, f"{name} handed over")  # noqa: B023
            latencies.append(sink.at[name] - sent)
        print(f"NOTIFY wake-up: median {statistics.median(latencies) * 1000:.1f} ms, "
              f"max {max(latencies) * 1000:.1f} ms")
        assert max(latencies) < 0.2, latencies
        assert puller.claims <= 1 + 5 + 2  # woken by notifications, not by polling
    finally:
        await puller.stop()
        await puller.inbox.close()
    assert inbox_tasks() == []


async def test_a_stop_right_after_a_wake_ends_the_puller(pg_dsn: str) -> None:
    """A wake-up and a stop in the same tick (a NOTIFY as the node lets the process go): on
    Python 3.11 asyncio.wait_for returned the wake instead of the cancellation, the puller
    went on claiming and stop() never returned."""
    quiet = InboxListener(pg_dsn)  # never started: only kick() wakes the puller
    puller = InboxPuller(ClusterInbox(pg_dsn), "p", Sink(), None, poll_s=30.0, listener=quiet)
    try:
        for _ in range(3):
            await puller.start()
            await wait_for(lambda: puller.claims >= 1, 10, "the first claim")
            puller.claims = 0
            puller.kick()
            stopping = asyncio.ensure_future(puller.stop())
            await asyncio.wait({stopping}, timeout=5)  # wait_for would cancel it: a 2nd try
            assert stopping.done(), "stop() did not end the puller"
            assert not puller.running and puller.claims == 0
    finally:
        await puller.stop()
        await puller.inbox.close()
    assert inbox_tasks() == []


async def test_puller_polls_when_notifications_are_lost(
        pg_dsn: str, inbox: ClusterInbox) -> None:
    sink = Sink()
    puller = InboxPuller(ClusterInbox(pg_dsn), "lost", sink, None, poll_s=0.3)
    await puller.start()
    try:
        assert puller.listener is not None and await puller.listener.wait_listening(10)
        await wait_for(lambda: puller.claims >= 1, 10, "the first claim")
        # a row whose notification never came (as if sent while nobody listened)
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute("INSERT INTO cluster_inbox (process, event_id, event) "
                               "VALUES ('lost', 'e1', %s)",
                               (json.dumps(event(1).to_dict()),))
            await wait_for(lambda: sink.ids == ["e1"], 5, "the silent row drained by polling")
            # the listen connection killed: notifications in between are lost
            cur = await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'promptui-inbox lost'")
            assert [r[0] for r in await cur.fetchall()] == [True]
        for n in range(2, 12):
            await inbox.put("lost", event(n))
        await wait_for(lambda: len(sink.ids) == 11, 10, "everything drained")
        assert sorted(sink.ids) == sorted(f"e{n}" for n in range(1, 12))
        await wait_for(lambda: puller.listener is not None and puller.listener.connects >= 2,
                       10, "the listener reconnected")
    finally:
        await puller.stop()
        await puller.inbox.close()
    assert inbox_tasks() == []
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        async def closed() -> bool:  # stop closed its listen connection (the view lags a bit)
            cur = await conn.execute("SELECT count(*) FROM pg_stat_activity "
                                     "WHERE application_name = 'promptui-inbox lost'")
            return (await cur.fetchone()) == (0,)
        await wait_for(closed, 10, "the listen connection closed", interval=0.05)


async def test_puller_survives_a_postgres_crash(pg_server: PgServer, pg_dsn: str,
                                                inbox: ClusterInbox) -> None:
    sink = Sink()
    puller = InboxPuller(ClusterInbox(pg_dsn), "p", sink, None, poll_s=0.5)
    await puller.start()
    try:
        for n in range(10):
            await inbox.put("p", event(n))
        await wait_for(lambda: len(sink.ids) == 10, 10, "the first ten")

        async def drained() -> bool:  # the claim's delete commits after the sink saw its events
            return await inbox.pending() == 0
        # A crash before that delete commits hands the ten over again (at least once: the
        # owner's journal takes a repeat as a duplicate), which this count is not about.
        await wait_for(drained, 10, "the first ten's delete", interval=0.02)
        await asyncio.to_thread(pg_server.stop, "immediate")
        await asyncio.to_thread(pg_server.start)
        for n in range(10, 40):
            assert await put_retrying(inbox, "p", event(n)) == "accepted"
        await wait_for(lambda: len(sink.ids) >= 40, 30, "everything put after the restart")
        assert sorted(sink.ids) == sorted(f"e{n}" for n in range(40))  # each exactly once
        assert puller.listener is not None
        await wait_for(lambda: puller.listener is not None and puller.listener.connects >= 2,
                       10, "the listener reconnected")
        await wait_for(drained, 10, "the inbox drained", interval=0.02)
        assert sorted(sink.ids) == sorted(f"e{n}" for n in range(40))  # still each exactly once
    finally:
        await puller.stop()
        await puller.inbox.close()
    assert inbox_tasks() == []


async def test_fenced_puller_stops_and_leaves_the_rows(pg_dsn: str,
                                                       inbox: ClusterInbox) -> None:
    leases = LeaseStore(pg_dsn)
    try:
        old = await leases.claim("p", "a", 30)
        assert old is not None and await leases.release("p", "a", old)
        assert await leases.claim("p", "b", 30) == old + 1
    finally:
        await leases.close()
    await inbox.put("p", event(1))
    sink = Sink()
    listener = InboxListener(pg_dsn)  # a node's shared listener
    await listener.start()
    puller = InboxPuller(ClusterInbox(pg_dsn), "p", sink, old, poll_s=0.2, listener=listener)
    await puller.start()
    try:
        await wait_for(lambda: puller.fenced is not None, 10, "the fence")
        assert not puller.running and sink.events == []
        assert await inbox.pending("p") == 1
    finally:
        await puller.stop()
        await puller.inbox.close()
        assert listener.running  # shared: its owner stops it
        await listener.stop()
    assert inbox_tasks() == []


async def test_shared_listener_wakes_only_the_named_process(pg_dsn: str,
                                                            inbox: ClusterInbox) -> None:
    listener = InboxListener(pg_dsn)
    await listener.start()
    sinks = {"a": Sink(), "b": Sink()}
    pullers = [InboxPuller(ClusterInbox(pg_dsn), p, sinks[p], None, poll_s=10.0,
                           listener=listener) for p in sinks]
    try:
        assert await listener.wait_listening(10)
        for puller in pullers:
            await puller.start()
        await wait_for(lambda: all(p.claims >= 1 for p in pullers), 10, "first claims")
        await inbox.put("a", event(1))
        await wait_for(lambda: sinks["a"].ids == ["e1"], 5, "a's event")
        assert pullers[1].claims == 1 and sinks["b"].events == []  # b was not woken
        await inbox.put("b", event(2))
        await wait_for(lambda: sinks["b"].ids == ["e2"], 5, "b's event")
    finally:
        for puller in pullers:
            await puller.stop()
            await puller.inbox.close()
        await listener.stop()
    assert inbox_tasks() == []
