"""The node registry, and the stores on a caller's connection pool."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool

from runtime_core.cluster import LeaseStore, NodeInfo, NodeRegistry
from tests.helpers.cluster import age_node

pytestmark = pytest.mark.slow


@pytest.fixture
async def registry(pg_dsn: str) -> AsyncIterator[NodeRegistry]:
    nodes = NodeRegistry(pg_dsn)
    try:
        yield nodes
    finally:
        await nodes.close()


async def test_register_beat_and_go_stale(pg_dsn: str, registry: NodeRegistry) -> None:
    await registry.register("b", "http://127.0.0.1:8002", 4)
    await registry.register("a", "http://127.0.0.1:8001")
    live = await registry.live_nodes(stale_after_s=5)
    assert [(n.node_id, n.address, n.max_processes, n.stopping) for n in live] == [
        ("a", "http://127.0.0.1:8001", None, False), ("b", "http://127.0.0.1:8002", 4, False)]
    assert all(0 <= n.heartbeat_age_s < 5 for n in live)
    await age_node(pg_dsn, "b", 10)
    assert [n.node_id for n in await registry.live_nodes(stale_after_s=5)] == ["a"]
    assert await registry.heartbeat("b")  # it beats again: live again
    assert [n.node_id for n in await registry.live_nodes(stale_after_s=5)] == ["a", "b"]
    assert not await registry.heartbeat("never-registered")
    with pytest.raises(ValueError, match="max_processes"):
        await registry.register("c", "x", -1)


async def test_leave_marks_stopping_and_releases_at_once(pg_dsn: str,
                                                         registry: NodeRegistry) -> None:
    leases = LeaseStore(pg_dsn)
    try:
        await registry.register("a", "http://127.0.0.1:8001")
        await registry.register("b", "http://127.0.0.1:8002")
        assert await leases.claim("p1", "a", 30) == 1
        assert await leases.claim("p2", "a", 30) == 1
        assert await leases.claim("p3", "b", 30) == 1
        assert await registry.leave("a") == ["p1", "p2"]
        assert [n.node_id for n in await registry.live_nodes(5)] == ["b"]
        assert [(n.node_id, n.stopping) for n in await registry.nodes()] == \
            [("a", True), ("b", False)]
        assert not await registry.heartbeat("a")  # a stopping node does not beat
        assert set(await leases.owners()) == {"p3"}
        assert await leases.claim("p1", "b", 30) == 2  # no TTL to wait out
        await registry.register("a", "http://127.0.0.1:8001")  # starting again: live
        assert [n.node_id for n in await registry.live_nodes(5)] == ["a", "b"]
        await age_node(pg_dsn, "a", 100)
        assert await registry.prune(dead_after_s=60) == ["a"]
        assert [n.node_id for n in await registry.nodes()] == ["b"]
    finally:
        await leases.close()


async def test_the_stores_work_on_a_callers_pool(pg_dsn: str) -> None:
    # a pool of ordinary (not autocommit) connections: the pool commits each block
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(pg_dsn, min_size=2, max_size=4,
                                                         open=False)
    await pool.open(wait=True)
    try:
        leases, registry = LeaseStore(pool), NodeRegistry(pool)
        await registry.register("a", "http://127.0.0.1:8001", 2)
        epochs = await asyncio.gather(*(leases.claim(f"p{i}", "a", 30) for i in range(3)))
        assert epochs == [1, 1, 1]
        assert await leases.renew("p0", "a", 1, 30)
        assert await registry.leave("a") == ["p0", "p1", "p2"]
        await leases.close()  # the pool is the caller's: still open
        assert await leases.owners() == {}
        (node,) = await registry.nodes()
        assert node == NodeInfo("a", "http://127.0.0.1:8001", 2, True, node.heartbeat_age_s)
    finally:
        await pool.close()
