"""The node registry: which ``promptui serve`` nodes are alive, where their API answers, how many
processes each takes.

A node registers when it starts, beats every few seconds (``heartbeat_at`` is the database's
clock), and is live while its last beat is younger than ``stale_after_s`` and it is not
stopping. A clean stop (``leave``) marks it stopping and ends its leases in one transaction, so
the other nodes take its processes over on their next round instead of waiting out the TTL.

A node that stops beating without leaving (it died, its machine went away) is not removed by
itself: :func:`node_state` calls it ``stale`` past the lease TTL, ``gone`` once silent for
longer than the TTL plus a grace (:class:`NodeAging`), and every live node's round prunes the
nodes silent for longer than ``prune_after_s`` (:class:`NodePruner`, an hour by default). An
operator may forget one sooner (:meth:`NodeRegistry.forget`, ``promptui nodes forget``): never
a live one. A forgotten node that was only paused registers again at its next beat.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime_core.cluster.assignment import NodeInfo
from runtime_core.cluster.db import ConnectionSource, Database

__all__ = ["NodeAging", "NodePruner", "NodeRegistry", "NodeState", "node_state"]

log = logging.getLogger("runtime_core.cluster")

#: live: beating within the lease TTL; stopping: it left (or is leaving) cleanly; stale: silent
#: past the TTL (its leases ran out; it may be paused and come back); gone: silent for longer
#: than the TTL plus the grace (written off; pruned later, or forgotten by an operator)
NodeState = Literal["live", "stopping", "stale", "gone"]
GRACE_TTLS = 3.0  # the default grace, in lease TTLs
PRUNE_AFTER_S = 3600.0
PRUNE_EVERY_S = 60.0  # a node's round prunes at most this often

REGISTER_SQL = """
INSERT INTO cluster_nodes (node_id, address, started_at, heartbeat_at, max_processes, stopping)
VALUES (%s, %s, clock_timestamp(), clock_timestamp(), %s, false)
ON CONFLICT (node_id) DO UPDATE SET
    address = excluded.address, started_at = excluded.started_at,
    heartbeat_at = excluded.heartbeat_at, max_processes = excluded.max_processes,
    stopping = false"""

HEARTBEAT_SQL = """
UPDATE cluster_nodes SET heartbeat_at = clock_timestamp()
WHERE node_id = %s AND NOT stopping RETURNING node_id"""

NODES_SQL = """
SELECT node_id, address, max_processes, stopping,
       EXTRACT(EPOCH FROM clock_timestamp() - heartbeat_at)::float8 AS age
FROM cluster_nodes"""

LIVE_SQL = NODES_SQL + """
WHERE NOT stopping AND heartbeat_at > clock_timestamp() - make_interval(secs => %s)
ORDER BY node_id"""

LEAVE_NODE_SQL = "UPDATE cluster_nodes SET stopping = true WHERE node_id = %s"
LEAVE_LEASES_SQL = """
UPDATE cluster_leases SET expires_at = clock_timestamp()
WHERE node_id = %s AND expires_at > clock_timestamp() RETURNING process"""

# never a node that still holds a lease that has not run out (it would only be paused)
PRUNE_SQL = """
DELETE FROM cluster_nodes n
WHERE heartbeat_at < clock_timestamp() - make_interval(secs => %s)
AND NOT EXISTS (SELECT 1 FROM cluster_leases l
                WHERE l.node_id = n.node_id AND l.expires_at > clock_timestamp())
RETURNING node_id"""

FORGET_SQL = """
DELETE FROM cluster_nodes
WHERE node_id = %s
AND (stopping OR heartbeat_at <= clock_timestamp() - make_interval(secs => %s))
RETURNING node_id"""


class NodeAging(BaseModel):
    """When a silent node is written off and when it is forgotten (``promptui serve
    --cluster --node-grace/--node-prune-after``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grace_s: float | None = Field(default=None, gt=0, description=(
        "Seconds past the lease TTL before a silent node shows as gone (default: three "
        "lease TTLs)."))
    prune_after_s: float = Field(default=PRUNE_AFTER_S, gt=0, description=(
        "Seconds of silence after which a node is removed from the nodes list (by any live "
        "node's round)."))

    def gone_after_s(self, ttl_s: float) -> float:
        """Silent for longer than this, a node is gone: the TTL plus the grace."""
        return ttl_s + (GRACE_TTLS * ttl_s if self.grace_s is None else self.grace_s)


def node_state(node: NodeInfo, ttl_s: float, gone_after_s: float) -> NodeState:
    """``node``'s state by its last beat (see NodeState)."""
    if node.heartbeat_age_s > gone_after_s:
        return "gone"
    if node.stopping:
        return "stopping"
    return "live" if node.heartbeat_age_s < ttl_s else "stale"


def _node(row: Any) -> NodeInfo:
    node_id, address, max_processes, stopping, age = row
    return NodeInfo(node_id=str(node_id), address=str(address),
                    max_processes=None if max_processes is None else int(max_processes),
                    stopping=bool(stopping), heartbeat_age_s=max(0.0, float(age)))


class NodeRegistry:
    """The ``cluster_nodes`` table, through a pool, a Connector or a DSN (see db.py)."""

    def __init__(self, source: ConnectionSource | str) -> None:
        self.db = Database(source)

    async def close(self) -> None:
        await self.db.close()

    async def register(self, node_id: str, address: str,
                       max_processes: int | None = None) -> None:
        """Add the node (or start it again under the same id): live, beating from now."""
        if max_processes is not None and max_processes < 0:
            raise ValueError(f"max_processes must be >= 0 or None, not {max_processes}")
        async with self.db.connection() as conn:
            await conn.execute(REGISTER_SQL, (node_id, address, max_processes))

    async def heartbeat(self, node_id: str) -> bool:
        """Record that the node is alive; False when it is not registered (or was marked
        stopping): the node should register again."""
        async with self.db.connection() as conn:
            row = await (await conn.execute(HEARTBEAT_SQL, (node_id,))).fetchone()
        return row is not None

    async def live_nodes(self, stale_after_s: float) -> list[NodeInfo]:
        """The nodes that beat within the last ``stale_after_s`` seconds and are not stopping,
        sorted by id."""
        async with self.db.connection() as conn:
            rows = await (await conn.execute(LIVE_SQL, (float(stale_after_s),))).fetchall()
        return [_node(row) for row in rows]

    async def nodes(self) -> list[NodeInfo]:
        """Every registered node, live or not (for an operator's view), sorted by id."""
        async with self.db.connection() as conn:
            rows = await (await conn.execute(NODES_SQL + " ORDER BY node_id")).fetchall()
        return [_node(row) for row in rows]

    async def leave(self, node_id: str) -> list[str]:
        """Mark the node stopping and end all its leases at once (one transaction), so the
        other nodes take its processes over on their next round; the processes released."""
        async with self.db.connection() as conn, conn.transaction():
            await conn.execute(LEAVE_NODE_SQL, (node_id,))
            rows = await (await conn.execute(LEAVE_LEASES_SQL, (node_id,))).fetchall()
        return sorted(str(row[0]) for row in rows)

    async def prune(self, dead_after_s: float) -> list[str]:
        """Forget the nodes silent for more than ``dead_after_s`` seconds (none that still
        holds a lease); their ids."""
        async with self.db.connection() as conn:
            rows = await (await conn.execute(PRUNE_SQL, (float(dead_after_s),))).fetchall()
        return sorted(str(row[0]) for row in rows)

    async def forget(self, node_id: str, stale_after_s: float
                     ) -> tuple[Literal["forgotten", "live", "unknown"], list[str]]:
        """Remove ``node_id`` unless it is live (it beat within ``stale_after_s`` and is not
        stopping), ending the leases it still holds, in one transaction: ("forgotten", the
        processes released), ("live", []) or ("unknown", []) when no such node is
        registered."""
        async with self.db.connection() as conn, conn.transaction():
            cur = await conn.execute(FORGET_SQL, (node_id, float(stale_after_s)))
            if await cur.fetchone() is None:
                row = await (await conn.execute(
                    "SELECT 1 FROM cluster_nodes WHERE node_id = %s", (node_id,))).fetchone()
                return ("live" if row is not None else "unknown"), []
            rows = await (await conn.execute(LEAVE_LEASES_SQL, (node_id,))).fetchall()
        return "forgotten", sorted(str(row[0]) for row in rows)


class NodePruner:
    """A node's round calls :meth:`maybe_prune`: at most every ``every_s`` (a minute, or half
    ``prune_after_s`` when that is shorter), it removes the nodes silent for longer than
    ``prune_after_s`` (one small DELETE)."""

    def __init__(self, registry: NodeRegistry, prune_after_s: float = PRUNE_AFTER_S, *,
                 every_s: float | None = None, timeout_s: float = 5.0) -> None:
        self.registry, self.prune_after_s = registry, prune_after_s
        self.every_s = min(PRUNE_EVERY_S, prune_after_s / 2) if every_s is None else every_s
        self.timeout_s = timeout_s
        self._next = 0.0  # time.monotonic() of the next prune

    async def maybe_prune(self) -> list[str]:
        """Prune if it is time; the ids removed. A failure is logged, not raised: pruning
        is housekeeping, never a reason for a round to fail."""
        now = time.monotonic()
        if now < self._next:
            return []
        self._next = now + self.every_s
        try:
            async with asyncio.timeout(self.timeout_s):
                pruned = await self.registry.prune(self.prune_after_s)
        except Exception as exc:
            log.info("cluster: pruning silent nodes failed (%s); tried again later", exc)
            return []
        if pruned:
            log.info("cluster: forgot node(s) %s, silent for more than %g s", ", ".join(pruned),
                     self.prune_after_s)
        return pruned
