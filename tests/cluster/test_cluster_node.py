"""ClusterNode against the real (throwaway) PostgreSQL: sharing, joining, leaving, losing.

Several nodes run in one event loop, each with its own connection, all with a short TTL. A
ledger records every on_gain and on_lose and which node runs each process, so a process that
would run on two nodes at once is caught."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

from runtime_core.cluster import ClusterError, ClusterNode, LeaseStore
from tests.helpers.polling import wait_for
from tests.helpers.postgres import PgServer

TTL = 1.0
PROCESSES = [f"p{i}" for i in range(6)]


@dataclass
class Ledger:
    """What the nodes were told: gains, losses, and who runs what right now."""

    running: dict[str, str] = field(default_factory=dict)  # process -> node
    gains: list[tuple[str, str, int]] = field(default_factory=list)
    losses: list[tuple[str, str, int, str]] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)

    def callbacks(self, node: str) -> tuple[Callable[[str, int], Awaitable[None]],
                                            Callable[[str, int, str], Awaitable[None]]]:
        async def on_gain(process: str, epoch: int) -> None:
            if process in self.running:
                self.overlaps.append(f"{node} gained {process} while {self.running[process]} "
                                     "runs it")
            self.running[process] = node
            self.gains.append((node, process, epoch))

        async def on_lose(process: str, epoch: int, reason: str) -> None:
            if self.running.get(process) == node:
                del self.running[process]
            self.losses.append((node, process, epoch, reason))

        return on_gain, on_lose

    def shares(self) -> Counter[str]:
        return Counter(self.running.values())


@pytest.fixture
async def cluster(pg_dsn: str) -> AsyncIterator[Callable[..., Awaitable[ClusterNode]]]:
    ledger = Ledger()
    nodes: list[ClusterNode] = []
    names = list(PROCESSES)

    async def start(node_id: str, **kw: Any) -> ClusterNode:
        on_gain, on_lose = ledger.callbacks(node_id)
        options: dict[str, Any] = {"ttl_s": TTL, "processes": lambda: names} | kw
        node = ClusterNode(pg_dsn, node_id, f"http://127.0.0.1:{8000 + len(nodes)}",
                           on_gain=on_gain, on_lose=on_lose, **options)
        await node.start()
        nodes.append(node)
        return node

    start.ledger = ledger  # type: ignore[attr-defined]
    start.names = names  # type: ignore[attr-defined]
    try:
        yield start
    finally:
        for node in nodes:
            await node.stop()


def ledger_of(cluster: Any) -> Ledger:
    return cluster.ledger  # type: ignore[no-any-return]


def settled(nodes: list[ClusterNode], shares: list[int]) -> Callable[[], bool]:
    """Every node holds its expected share and together they hold every process once."""
    def check() -> bool:
        held = [set(node.held) for node in nodes]
        return sorted(len(h) for h in held) == sorted(shares) and \
            len(set().union(*held)) == sum(shares)
    return check


@pytest.mark.slow
async def test_two_nodes_split_six_processes_three_and_three(cluster: Any, pg_dsn: str) -> None:
    a = await cluster("a")
    b = await cluster("b")
    await wait_for(settled([a, b], [3, 3]), timeout=10, what="a 3/3 split")
    ledger = ledger_of(cluster)
    assert ledger.shares() == {"a": 3, "b": 3}
    assert not ledger.overlaps
    leases = LeaseStore(pg_dsn)
    try:
        owners = await leases.owners()
    finally:
        await leases.close()
    assert {p: (lease.node_id, lease.epoch) for p, lease in owners.items()} == \
        {p: (n.node_id, e) for n in (a, b) for p, e in n.held.items()}


@pytest.mark.slow
async def test_a_third_node_joining_moves_only_two(cluster: Any) -> None:
    a = await cluster("a")
    b = await cluster("b")
    await wait_for(settled([a, b], [3, 3]), timeout=10, what="a 3/3 split")
    ledger = ledger_of(cluster)
    before = dict(ledger.running)
    losses_before = len(ledger.losses)
    c = await cluster("c")
    await wait_for(settled([a, b, c], [2, 2, 2]), timeout=10, what="a 2/2/2 split")
    moved = {p for p in PROCESSES if ledger.running[p] != before[p]}
    assert len(moved) == 2 and {ledger.running[p] for p in moved} == {"c"}
    new_losses = ledger.losses[losses_before:]
    assert len(new_losses) == 2
    assert all("handed over to node 'c'" in reason for *_, reason in new_losses)
    assert not ledger.overlaps


@pytest.mark.slow
async def test_a_node_stopping_hands_its_processes_over_within_the_ttl(cluster: Any) -> None:
    a = await cluster("a")
    b = await cluster("b")
    c = await cluster("c")
    await wait_for(settled([a, b, c], [2, 2, 2]), timeout=10, what="a 2/2/2 split")
    ledger = ledger_of(cluster)
    gone = set(c.held)
    epochs = dict(c.held)
    await c.stop()
    assert not c.running and c.held == {}
    assert {(p, e) for n, p, e, r in ledger.losses if n == "c" and "stopping" in r} == \
        set(epochs.items())
    stopped = time.monotonic()
    await wait_for(settled([a, b], [3, 3]), timeout=TTL, what="a takeover within the TTL")
    assert time.monotonic() - stopped < TTL
    for process in gone:  # a new term for each: the epoch moved on
        taker = a if process in a.held else b
        assert taker.held[process] > epochs[process]
    assert not ledger.overlaps


@pytest.mark.slow
async def test_a_node_that_cannot_reach_the_database_gives_up_and_the_other_takes_over(
        cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    a = await cluster("a")
    b = await cluster("b")
    await wait_for(settled([a, b], [3, 3]), timeout=10, what="a 3/3 split")
    ledger = ledger_of(cluster)
    lost = dict(a.held)
    since = len(ledger.losses)

    @asynccontextmanager
    async def unreachable() -> AsyncIterator[Any]:
        raise psycopg.OperationalError("connection refused (simulated)")
        yield  # pragma: no cover

    monkeypatch.setattr(a.source, "connection", unreachable)
    await wait_for(lambda: a.held == {}, timeout=3 * TTL, what="a giving up its leases")
    reasons = [r for n, p, e, r in ledger.losses[since:] if n == "a"]
    assert len(reasons) == 3 and all("assumed lost" in r for r in reasons), reasons
    assert a.last_error is not None and "simulated" in a.last_error
    await wait_for(lambda: len(b.held) == 6, timeout=5 * TTL, what="b taking everything")
    assert all(b.held[p] > e for p, e in lost.items())
    assert not ledger.overlaps

    monkeypatch.undo()  # the database is back for a: it rejoins and takes its share again
    await wait_for(settled([a, b], [3, 3]), timeout=10, what="a 3/3 split again")
    assert a.last_error is None
    assert not ledger.overlaps


@pytest.mark.slow
async def test_a_renewal_refused_after_a_takeover_calls_on_lose_at_once(cluster: Any,
                                                                        pg_dsn: str) -> None:
    a = await cluster("a")
    await wait_for(lambda: len(a.held) == 6, timeout=10, what="a holding everything")
    # as if a had been paused past its TTL: its lease on p0 ended and another node took it
    intruder = LeaseStore(pg_dsn)
    try:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute("UPDATE cluster_leases SET expires_at = clock_timestamp() "
                               "WHERE process = 'p0'")
        assert await intruder.claim("p0", "intruder", 30) == 2
        ledger = ledger_of(cluster)
        await wait_for(lambda: any(x[1] == "p0" for x in ledger.losses), timeout=3 * TTL,
                       what="a noticing")
        (loss,) = [x for x in ledger.losses if x[1] == "p0"]
        assert loss[:3] == ("a", "p0", 1)
        assert "taken over by node 'intruder' at epoch 2" in loss[3]
        # the rest is untouched; p0 stays the intruder's
        assert "p0" not in a.held and len(a.held) == 5
    finally:
        await intruder.close()


@pytest.mark.slow
async def test_caps_and_a_shrinking_process_list(cluster: Any) -> None:
    a = await cluster("a", max_processes=2)
    b = await cluster("b", max_processes=1)
    await wait_for(settled([a, b], [2, 1]), timeout=10, what="the caps filled")
    names: list[str] = cluster.names
    kept = set(a.held) | set(b.held)
    names[:] = sorted(kept)[:1]  # the cluster now runs one process only
    a.kick()
    b.kick()
    await wait_for(lambda: len(a.held) + len(b.held) == 1, timeout=10, what="the hand-back")
    reasons = [r for *_, r in ledger_of(cluster).losses]
    assert reasons and all(r == "no longer assigned to any node" for r in reasons)


@pytest.mark.slow
async def test_nodes_go_on_after_postgresql_restarts(cluster: Any,
                                                     pg_server: PgServer) -> None:
    a = await cluster("a", ttl_s=2.0)
    b = await cluster("b", ttl_s=2.0)
    await wait_for(settled([a, b], [3, 3]), timeout=10, what="a 3/3 split")
    connects = a.source.connects
    try:
        await asyncio.to_thread(pg_server.stop, "immediate")
        await wait_for(lambda: a.last_error is not None, timeout=5, what="a noticing")
    finally:
        await asyncio.to_thread(pg_server.start)
    await wait_for(lambda: a.last_error is None and b.last_error is None, timeout=10,
                   what="both nodes answering again")
    await wait_for(settled([a, b], [3, 3]), timeout=10, what="a 3/3 split again")
    assert a.source.connects > connects
    assert not ledger_of(cluster).overlaps


@pytest.mark.slow
async def test_stop_ends_what_start_started(pg_dsn: str) -> None:
    async def nothing(*_: Any) -> None:
        return None

    node = ClusterNode(pg_dsn, "solo", "http://127.0.0.1:1", ttl_s=TTL, on_gain=nothing,
                       on_lose=nothing, processes=lambda: ["p"])
    await node.start()
    await wait_for(lambda: node.held.keys() == {"p"}, timeout=5, what="the claim")
    await node.stop()
    await node.stop()  # twice is fine
    assert not node.running
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("cluster-node")]
    assert not node.source.is_connected
    nodes = LeaseStore(pg_dsn)
    try:
        assert await nodes.owners() == {}  # released at once, not left to expire
    finally:
        await nodes.close()


async def test_start_without_a_database_says_where_and_hides_the_password() -> None:
    async def nothing(*_: Any) -> None:
        return None

    dsn = "postgresql://postgres:sekret@/db?host=/nonexistent-socket-dir"
    node = ClusterNode(dsn, "a", "http://127.0.0.1:1", ttl_s=TTL, on_gain=nothing,
                       on_lose=nothing, processes=list)
    with pytest.raises(ClusterError, match="cannot join the cluster") as caught:
        await node.start()
    assert "sekret" not in str(caught.value) and "***" in str(caught.value)
    assert not node.running


@pytest.mark.slow
async def test_a_lease_cut_at_its_deadline_is_given_up_though_a_renewal_lands_after(
        cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """check_deadlines cut the leases (their journals refuse every write from then on), then a
    round that was in flight renewed them: the node must still give them up and claim them
    again under a new epoch, not hold leases whose processes can never write (a CI run saw a
    node answer 500 to every reconcile of such a process for a minute)."""
    cut: list[tuple[str, int]] = []
    a = await cluster("a", on_overdue=lambda process, epoch: cut.append((process, epoch)))
    await wait_for(lambda: len(a.held) == 6, timeout=10, what="a holding everything")
    first = dict(a.held)
    real = time.monotonic

    class Later:  # the node's clock one TTL ahead, for the cut only (as after a pause)
        @staticmethod
        def monotonic() -> float:
            return real() + 2 * TTL

        time = staticmethod(time.time)

    monkeypatch.setattr("runtime_core.cluster.node.time", Later)
    a.check_deadlines()
    monkeypatch.undo()  # the next round's renewal lands in time
    assert sorted(cut) == sorted(first.items())
    ledger = ledger_of(cluster)
    await wait_for(lambda: {x[1] for x in ledger.losses if x[0] == "a"} == set(first),
                   timeout=3 * TTL, what="a giving up every lease it cut")
    await wait_for(lambda: len(a.held) == 6 and all(a.held[p] > first[p] for p in first),
                   timeout=5 * TTL, what="a claiming them again under new epochs")
