"""The node registry: which ``promptui serve`` nodes are alive, where their API answers, how many
processes each takes.

A node registers when it starts, beats every few seconds (``heartbeat_at`` is the database's
clock), and is live while its last beat is younger than ``stale_after_s`` and it is not
stopping. A clean stop (``leave``) marks it stopping and ends its leases in one transaction, so
the other nodes take its processes over on their next round instead of waiting out the TTL.
"""

from __future__ import annotations

from typing import Any

from runtime_core.cluster.assignment import NodeInfo
from runtime_core.cluster.db import ConnectionSource, Database

__all__ = ["NodeRegistry"]

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

PRUNE_SQL = """
DELETE FROM cluster_nodes
WHERE heartbeat_at < clock_timestamp() - make_interval(secs => %s) RETURNING node_id"""


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
        """Forget the nodes silent for more than ``dead_after_s`` seconds; their ids."""
        async with self.db.connection() as conn:
            rows = await (await conn.execute(PRUNE_SQL, (float(dead_after_s),))).fetchall()
        return sorted(str(row[0]) for row in rows)
