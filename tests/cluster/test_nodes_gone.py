"""Dead nodes do not stay in the nodes list forever: a node silent past the lease TTL is stale,
past the TTL and its grace gone, and the live nodes prune it after ``--node-prune-after``; an
operator forgets one sooner with ``promptui nodes forget NODE`` (never a live one; ending the
leases it still holds; refused by a read-only node)."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime_core.cluster import LeaseStore, NodeRegistry
from runtime_core.cluster.nodes import NodeAging, NodePruner, node_state
from tests.helpers.cli import finish_promptui
from tests.helpers.cluster import TOKEN, Cluster, Node, age_node, write_agents
from tests.helpers.polling import poll

pytestmark = pytest.mark.slow


@pytest.fixture
async def registry(pg_dsn: str) -> AsyncIterator[NodeRegistry]:
    nodes = NodeRegistry(pg_dsn)
    try:
        yield nodes
    finally:
        await nodes.close()


async def test_states_forget_and_prune_on_the_registry(pg_dsn: str,
                                                       registry: NodeRegistry) -> None:
    leases = LeaseStore(pg_dsn)
    try:
        for node in ("live", "stale", "gone", "left"):
            await registry.register(node, f"http://{node}:8765")
        assert await leases.claim("p1", "stale", 30) == 1  # not run out yet
        await registry.leave("left")
        await age_node(pg_dsn, "stale", 3)
        await age_node(pg_dsn, "gone", 20)
        ttl = 2.0
        assert NodeAging().gone_after_s(ttl) == 8.0  # the TTL and a grace of three TTLs
        gone_after = NodeAging(grace_s=6).gone_after_s(ttl)
        assert {n.node_id: node_state(n, ttl, gone_after) for n in await registry.nodes()} == {
            "live": "live", "stale": "stale", "gone": "gone", "left": "stopping"}

        assert await registry.forget("live", ttl) == ("live", [])
        assert await registry.forget("nobody", ttl) == ("unknown", [])
        assert await registry.forget("stale", ttl) == ("forgotten", ["p1"])  # its lease ends
        assert await leases.owners() == {}
        assert await leases.claim("p1", "live", 30) == 2  # taken over at once
        assert await registry.forget("left", ttl) == ("forgotten", [])  # stopping: not live

        # pruned after a long silence, but never while it holds a lease that has not run out
        await registry.register("paused", "http://paused:8765")
        assert await leases.claim("p2", "paused", 3 * 3600) == 1
        await age_node(pg_dsn, "gone", 7200)
        await age_node(pg_dsn, "paused", 7200)
        pruner = NodePruner(registry, 3600)
        assert await pruner.maybe_prune() == ["gone"]
        assert await pruner.maybe_prune() == []  # not again before its interval
        assert pruner.every_s == 60.0 and NodePruner(registry, 10).every_s == 5.0
        assert sorted(n.node_id for n in await registry.nodes()) == ["live", "paused"]
        assert not await registry.heartbeat("gone")  # a forgotten node that comes back ...
        await registry.register("gone", "http://gone:8765")  # ... registers again
        assert "gone" in [n.node_id for n in await registry.live_nodes(ttl)]
    finally:
        await leases.close()


# -- through promptui serve --cluster and the CLI ------------------------------------------------
TTL = 1.0
GRACE = 2.0
PRUNE_AFTER = 15.0  # long enough for the CLI's calls on a busy machine before n2 is pruned


@pytest.fixture
def cluster(tmp_path: Path, pg_dsn: str) -> Iterator[Cluster]:
    agents = write_agents(tmp_path, ["p0", "p1", "p2"])
    nodes = Cluster(tmp_path, pg_dsn, agents, tmp_path / "ledger.txt", ttl=TTL,
                    extra_args=("--node-grace", str(GRACE),
                                "--node-prune-after", str(PRUNE_AFTER)))
    try:
        yield nodes
    finally:
        nodes.close()


def nodes_cli(via: Node, cwd: Path, *args: str) -> tuple[int, str, str]:
    done, _ = finish_promptui(["nodes", *args, "--url", via.url, "--token", TOKEN], cwd)
    return done.returncode, done.stdout, done.stderr


def states(cluster: Cluster, via: Node) -> dict[str, dict[str, Any]]:
    """node id -> its row in GET /cluster/nodes of ``via`` (quicker than the CLI)."""
    return {row["node_id"]: row for row in cluster.nodes_view(via) or []}


def test_a_dead_node_goes_gone_is_forgotten_and_pruned(cluster: Cluster,
                                                       tmp_path: Path) -> None:
    survivor, dead, pruned = (cluster.start(n, wait=False) for n in ("n1", "n2", "n3"))
    cluster.extra_args = (*cluster.extra_args, "--read-only")
    watcher = cluster.start("n4", wait=False)
    for node in (survivor, dead, pruned, watcher):
        cluster.wait_listening(node)
    poll(lambda: len(rows := states(cluster, survivor)) == 4 and all(
        r["state"] == "live" for r in rows.values()), 60, "four live nodes")
    code, out, err = nodes_cli(survivor, tmp_path, "--json")
    assert code == 0, err
    listed = {row["node_id"]: row for row in json.loads(out)}
    assert listed["n1"]["this_node"] and listed["n2"]["state"] == "live"

    code, _, err = nodes_cli(survivor, tmp_path, "forget", "n3")  # live: refused
    assert code == 1 and "is live" in err and "SIGTERM" in err, err
    code, _, err = nodes_cli(watcher, tmp_path, "forget", "n2")  # a read-only node
    assert code != 0 and "read-only" in err, err
    code, _, err = nodes_cli(survivor, tmp_path, "forget", "nobody")
    assert code == 1 and "no node 'nobody'" in err, err

    dead.kill(signal.SIGKILL)
    dead.proc.wait(10)
    poll(lambda: states(cluster, survivor)["n2"]["state"] == "stale", 10 * TTL, "n2 stale")
    gone = poll(lambda: (row := states(cluster, survivor)["n2"])["state"] == "gone" and row,
                10 * (TTL + GRACE), "n2 gone")
    # The age shown is rounded to the millisecond: 3.0004 s past is "gone" and shows as 3.0.
    assert gone["heartbeat_age_s"] >= TTL + GRACE and not gone["live"] and \
        gone["processes"] == {}
    code, out, _ = nodes_cli(survivor, tmp_path, "--time", "relative")
    assert code == 0 and "gone" in out and "promptui nodes forget" in out and " ago" in out
    code, out, err = nodes_cli(survivor, tmp_path, "forget", "n2")
    assert code == 0 and "node n2 forgotten" in out, err
    assert set(states(cluster, watcher)) == {"n1", "n3", "n4"}  # from any node

    pruned.kill(signal.SIGKILL)
    pruned.proc.wait(10)
    poll(lambda: set(states(cluster, survivor)) == {"n1", "n4"}, PRUNE_AFTER + 30,
         "n3 pruned by itself")
    # their processes moved to the live nodes
    poll(lambda: cluster.running(["p0", "p1", "p2"]) is not None, 30, "every process running")
