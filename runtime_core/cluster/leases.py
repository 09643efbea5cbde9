"""Leases: which node owns each process, under which fencing epoch, until when.

A lease is one row of ``cluster_leases``. Every change is one conditional statement, so two
nodes racing for a process cannot both win: ``claim`` inserts the row or takes it over only if
it has expired (or is already the claimer's), and bumps the epoch whenever a new term of
ownership starts (another node takes it, or a lease that had ended is taken again). Renewing or
re-claiming a live lease of one's own keeps the epoch, so a claim whose answer was lost can be
retried safely. Rows are never deleted, so epochs only grow.

The epoch is the fence: a journal or queue write carries the epoch its writer holds and runs
:func:`check_fence` (or ``SELECT cluster_fence(%s, %s)``, :func:`fence_check_sql`) inside its own
transaction. The check takes a share lock on the lease row, so a takeover waits for that
write's commit, and a write from a node that lost the lease (paused past the TTL, cut off) is
refused with :class:`FencedOut` instead of landing after the new owner's.

All times are the database's (``clock_timestamp()``); ``ttl_s`` is a duration.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import psycopg

from runtime_core.cluster.db import AsyncConn, ConnectionSource, Database
from runtime_core.cluster.errors import FencedOut
from runtime_core.cluster.schema import FENCE_SQLSTATE

__all__ = ["FENCE_SELECT_SQL", "Lease", "LeaseStore", "as_fenced_out", "check_fence",
           "fence_check_sql"]

_UNTIL = "clock_timestamp() + make_interval(secs => %(ttl)s)"

CLAIM_SQL = f"""
INSERT INTO cluster_leases AS l (process, node_id, epoch, expires_at)
VALUES (%(process)s, %(node)s, 1, {_UNTIL})
ON CONFLICT (process) DO UPDATE SET
    epoch = CASE WHEN l.node_id = excluded.node_id AND l.expires_at > clock_timestamp()
                 THEN l.epoch ELSE l.epoch + 1 END,
    node_id = excluded.node_id,
    expires_at = excluded.expires_at
WHERE l.expires_at <= clock_timestamp() OR l.node_id = excluded.node_id
RETURNING epoch"""

RENEW_SQL = f"""
UPDATE cluster_leases AS l SET expires_at = {_UNTIL}
FROM unnest(%(processes)s::text[], %(epochs)s::bigint[]) AS held(process, epoch)
WHERE l.process = held.process AND l.epoch = held.epoch AND l.node_id = %(node)s
  AND l.expires_at > clock_timestamp()
RETURNING l.process"""

RELEASE_SQL = """
UPDATE cluster_leases SET expires_at = clock_timestamp()
WHERE process = %s AND node_id = %s AND epoch = %s AND expires_at > clock_timestamp()
RETURNING process"""

RELEASE_ALL_SQL = """
UPDATE cluster_leases SET expires_at = clock_timestamp()
WHERE node_id = %s AND expires_at > clock_timestamp()
RETURNING process, epoch"""

OWNERS_SQL = """
SELECT process, node_id, epoch,
       EXTRACT(EPOCH FROM expires_at - clock_timestamp())::float8 AS expires_in
FROM cluster_leases"""

#: what check_fence runs: the lease row, share-locked until the caller's transaction ends
FENCE_SELECT_SQL = "SELECT node_id, epoch FROM cluster_leases WHERE process = %s FOR SHARE"
#: the same check as one statement that fails the transaction itself (SQLSTATE PU409)
FENCE_CALL_SQL = "SELECT cluster_fence(%s, %s)"


class Lease(NamedTuple):
    """Who holds a process: ``expires_in_s`` is by the database's clock (negative: ended)."""

    node_id: str
    epoch: int
    expires_in_s: float


def _check_ttl(ttl_s: float) -> float:
    if not ttl_s > 0:
        raise ValueError(f"a lease's ttl_s must be > 0 seconds, not {ttl_s!r}")
    return float(ttl_s)


class LeaseStore:
    """The lease table, through a pool, a Connector or a DSN (see db.py)."""

    def __init__(self, source: ConnectionSource | str) -> None:
        self.db = Database(source)

    async def close(self) -> None:
        """Close the connection it opened itself (a pool or Connector passed in is the
        caller's to close)."""
        await self.db.close()

    async def claim(self, process: str, node_id: str, ttl_s: float) -> int | None:
        """Take ``process`` for ``node_id`` for ``ttl_s`` seconds if it is free, expired or
        already ours; its epoch, or None when another node holds a live lease on it."""
        params = {"process": process, "node": node_id, "ttl": _check_ttl(ttl_s)}
        async with self.db.connection() as conn:
            row = await (await conn.execute(CLAIM_SQL, params)).fetchone()
        return None if row is None else int(row[0])

    async def renew(self, process: str, node_id: str, epoch: int, ttl_s: float) -> bool:
        """Extend our live lease by ``ttl_s`` from now; False when it is no longer ours at
        ``epoch`` (taken over, or it ended: a new claim is a new term)."""
        return process in await self.renew_many(node_id, {process: epoch}, ttl_s)

    async def renew_many(self, node_id: str, held: dict[str, int], ttl_s: float) -> set[str]:
        """Renew every lease in ``held`` (process -> epoch) in one statement; the processes
        whose renewal succeeded."""
        if not held:
            return set()
        processes = sorted(held)
        params = {"processes": processes, "epochs": [held[p] for p in processes],
                  "node": node_id, "ttl": _check_ttl(ttl_s)}
        async with self.db.connection() as conn:
            rows = await (await conn.execute(RENEW_SQL, params)).fetchall()
        return {str(row[0]) for row in rows}

    async def release(self, process: str, node_id: str, epoch: int) -> bool:
        """End our lease now so another node can claim at once; False when it was not ours
        (anymore) at ``epoch``."""
        async with self.db.connection() as conn:
            row = await (await conn.execute(RELEASE_SQL, (process, node_id, epoch))).fetchone()
        return row is not None

    async def release_all(self, node_id: str) -> dict[str, int]:
        """End every live lease ``node_id`` holds (a node stopping, or starting again under
        the same id); process -> the epoch that ended."""
        async with self.db.connection() as conn:
            rows = await (await conn.execute(RELEASE_ALL_SQL, (node_id,))).fetchall()
        return {str(row[0]): int(row[1]) for row in rows}

    async def owners(self, *, include_expired: bool = False) -> dict[str, Lease]:
        """process -> (node_id, epoch, expires_in_s) for every live lease (with
        ``include_expired``, also the ended ones: their last holder and epoch)."""
        query = OWNERS_SQL if include_expired else \
            OWNERS_SQL + " WHERE expires_at > clock_timestamp()"
        async with self.db.connection() as conn:
            rows = await (await conn.execute(query + " ORDER BY process")).fetchall()
        return {str(r[0]): Lease(str(r[1]), int(r[2]), float(r[3])) for r in rows}

    async def owner(self, process: str) -> Lease | None:
        """The lease on ``process``, live or ended; None when it was never claimed."""
        async with self.db.connection() as conn:
            row = await (await conn.execute(
                OWNERS_SQL + " WHERE process = %s", (process,))).fetchone()
        return None if row is None else Lease(str(row[1]), int(row[2]), float(row[3]))


def fence_check_sql() -> str:
    """The statement a write runs in its own transaction to prove it still owns the process:
    ``SELECT cluster_fence(%s, %s)`` with (process, epoch). It share-locks the lease row until
    that transaction ends and fails it with SQLSTATE PU409 when the epoch moved on, so it can
    sit in a pipelined batch; :func:`as_fenced_out` turns that error into FencedOut."""
    return FENCE_CALL_SQL


async def check_fence(conn: AsyncConn, process: str, epoch: int) -> None:
    """Raise FencedOut unless ``epoch`` is still the current epoch of ``process``'s lease.

    Run it inside the transaction of the write it guards (not in autocommit: the share lock
    it takes must last until that write commits, so a takeover cannot slip in between)."""
    cur = await conn.execute(FENCE_SELECT_SQL, (process,))
    row = await cur.fetchone()
    if row is None:
        raise FencedOut(process, epoch, None)
    owner, current = str(row[0]), int(row[1])
    if current != epoch:
        raise FencedOut(process, epoch, owner, current)


def as_fenced_out(exc: BaseException) -> FencedOut | None:
    """The FencedOut a failed ``cluster_fence`` call stands for, or None for any other
    error."""
    if not isinstance(exc, psycopg.Error) or exc.sqlstate != FENCE_SQLSTATE:
        return None
    detail: dict[str, Any] = {}
    try:
        loaded = json.loads(exc.diag.message_detail or "{}")
        if isinstance(loaded, dict):
            detail = loaded
    except ValueError:
        pass
    owner = detail.get("owner")
    owner_epoch = detail.get("owner_epoch")
    return FencedOut(str(detail.get("process", "?")), int(detail.get("epoch") or 0),
                     None if owner is None else str(owner),
                     None if owner_epoch is None else int(owner_epoch))
