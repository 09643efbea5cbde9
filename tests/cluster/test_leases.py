"""Leases on the real (throwaway) PostgreSQL: exclusive claims, epochs, renewals, the fence."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import AsyncIterator

import psycopg
import pytest

from runtime_core.cluster import FencedOut, LeaseStore, as_fenced_out, check_fence
from runtime_core.cluster.leases import fence_check_sql
from runtime_core.cluster.schema import ensure_schema, schema_exists

pytestmark = pytest.mark.slow


@pytest.fixture
async def store(pg_dsn: str) -> AsyncIterator[LeaseStore]:
    leases = LeaseStore(pg_dsn)
    try:
        yield leases
    finally:
        await leases.close()


async def expire(dsn: str, process: str) -> None:
    """End a lease by the database's clock (instead of sleeping through its TTL)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("UPDATE cluster_leases SET expires_at = clock_timestamp() "
                           "- interval '1 millisecond' WHERE process = %s", (process,))


async def until_expired(store: LeaseStore, process: str, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while (lease := await store.owner(process)) is not None and lease.expires_in_s > 0:
        assert asyncio.get_running_loop().time() < deadline, f"{process}'s lease never ended"
        await asyncio.sleep(0.02)


async def test_schema_is_created_once_by_nodes_starting_together(pg_dsn: str) -> None:
    async def create() -> None:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await ensure_schema(conn)

    await asyncio.gather(*(create() for _ in range(8)))
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:  # not autocommit
        assert await schema_exists(conn)
        await ensure_schema(conn)  # idempotent, also inside a transaction-per-statement session


async def test_claim_is_exclusive_under_concurrency(pg_dsn: str, store: LeaseStore) -> None:
    await store.owners()  # the schema exists: the claims race on the row, not on CREATE TABLE
    stores = [LeaseStore(pg_dsn) for _ in range(20)]
    try:
        for s in stores:  # connect first, so the claims themselves start together
            await s.owners()
        results = await asyncio.gather(
            *(s.claim("proc", f"node{i}", 30) for i, s in enumerate(stores)))
    finally:
        await asyncio.gather(*(s.close() for s in stores))
    winners = [(f"node{i}", epoch) for i, epoch in enumerate(results) if epoch is not None]
    assert len(winners) == 1, results
    node, epoch = winners[0]
    assert epoch == 1
    assert (await store.owners())["proc"][:2] == (node, 1)


async def test_claim_again_by_its_holder_keeps_the_epoch(store: LeaseStore) -> None:
    assert await store.claim("p", "a", 30) == 1
    assert await store.claim("p", "a", 30) == 1  # a retried claim whose answer was lost
    assert await store.claim("p", "b", 30) is None


async def test_epoch_increases_on_every_hand_over(pg_dsn: str, store: LeaseStore) -> None:
    epochs = []
    for node in ["a", "b", "a", "c", "c"]:
        epoch = await store.claim("p", node, 30)
        assert epoch is not None, node
        epochs.append(epoch)
        assert await store.release("p", node, epoch)
    # a release ends the term: the next claim, even by the same node, is a new epoch
    assert epochs == [1, 2, 3, 4, 5]
    # an expired lease taken over by another node
    assert await store.claim("p", "d", 30) == 6
    await expire(pg_dsn, "p")
    assert await store.claim("p", "e", 30) == 7


async def test_an_expired_lease_is_claimable_by_another_node(pg_dsn: str,
                                                             store: LeaseStore) -> None:
    assert await store.claim("p", "a", 0.3) == 1
    assert await store.claim("p", "b", 30) is None  # still a's
    deadline = asyncio.get_running_loop().time() + 5
    while (epoch := await store.claim("p", "b", 30)) is None:  # by the database's clock
        assert asyncio.get_running_loop().time() < deadline, "the lease never expired"
        await asyncio.sleep(0.05)
    assert epoch == 2
    lease = (await store.owners())["p"]
    assert lease.node_id == "b" and lease.epoch == 2 and 25 < lease.expires_in_s <= 30


async def test_renew_only_while_still_ours_at_that_epoch(pg_dsn: str, store: LeaseStore) -> None:
    assert await store.claim("p", "a", 30) == 1
    assert await store.renew("p", "a", 1, 30)
    assert not await store.renew("p", "a", 0, 30)  # an old epoch
    assert not await store.renew("p", "b", 1, 30)  # not b's
    await expire(pg_dsn, "p")
    assert not await store.renew("p", "a", 1, 30)  # ended: claiming again is a new term
    assert await store.claim("p", "b", 30) == 2
    assert not await store.renew("p", "a", 1, 30)  # taken over
    assert await store.renew_many("b", {"p": 2, "q": 1}, 30) == {"p"}
    assert not await store.release("p", "a", 1)


async def test_owners_lists_live_leases(pg_dsn: str, store: LeaseStore) -> None:
    assert await store.claim("p1", "a", 30) == 1
    assert await store.claim("p2", "b", 30) == 1
    await expire(pg_dsn, "p2")
    assert set(await store.owners()) == {"p1"}
    every = await store.owners(include_expired=True)
    assert every["p2"].node_id == "b" and every["p2"].expires_in_s < 0
    assert await store.release_all("a") == {"p1": 1}
    assert await store.owners() == {}
    assert await store.owner("nope") is None
    with pytest.raises(ValueError, match="ttl_s"):
        await store.claim("p", "a", 0)


async def test_check_fence_raises_fenced_out_after_a_takeover(pg_dsn: str,
                                                               store: LeaseStore) -> None:
    assert await store.claim("p", "a", 30) == 1
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        async with conn.transaction():
            await check_fence(conn, "p", 1)  # still a's: passes
        await expire(pg_dsn, "p")
        assert await store.claim("p", "b", 30) == 2
        with pytest.raises(FencedOut) as caught:
            async with conn.transaction():
                await check_fence(conn, "p", 1)
        assert (caught.value.process, caught.value.epoch) == ("p", 1)
        assert (caught.value.current_owner, caught.value.current_epoch) == ("b", 2)
        assert "epoch 1 is no longer current" in str(caught.value)
        with pytest.raises(FencedOut) as never:
            await check_fence(conn, "never-claimed", 1)
        assert never.value.current_owner is None
    again = pickle.loads(pickle.dumps(caught.value))
    assert (again.process, again.current_owner, again.current_epoch) == ("p", "b", 2)


async def test_the_fence_holds_a_takeover_until_the_write_commits(pg_dsn: str,
                                                                  store: LeaseStore) -> None:
    assert await store.claim("p", "a", 0.2) == 1
    async with await psycopg.AsyncConnection.connect(pg_dsn) as writer:
        async with writer.transaction():
            await check_fence(writer, "p", 1)  # share lock on the lease row
            await until_expired(store, "p")  # reads are not blocked by the share lock
            takeover = asyncio.ensure_future(store.claim("p", "b", 30))
            done, _ = await asyncio.wait({takeover}, timeout=0.3)
            assert not done, "a takeover went through while a fenced write was in flight"
        assert await takeover == 2  # it went through once the write committed


async def test_the_fence_sql_fails_the_writers_transaction(pg_dsn: str,
                                                           store: LeaseStore) -> None:
    assert await store.claim("p", "a", 30) == 1
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        async with conn.transaction():
            await conn.execute(fence_check_sql(), ("p", 1))
        await store.release("p", "a", 1)
        assert await store.claim("p", "b", 30) == 2
        with pytest.raises(psycopg.Error) as caught:
            async with conn.transaction():
                await conn.execute("CREATE TEMP TABLE w (x int)")
                await conn.execute(fence_check_sql(), ("p", 1))
        fenced = as_fenced_out(caught.value)
        assert fenced is not None
        assert (fenced.process, fenced.epoch, fenced.current_owner, fenced.current_epoch) == \
            ("p", 1, "b", 2)
        assert as_fenced_out(ValueError("x")) is None
