"""The cluster's tables in PostgreSQL: the nodes that serve, and one lease row per process.

``cluster_nodes``: one row per ``promptui serve`` node (its API address, when it started, its
last heartbeat, how many processes it takes at most, whether it is stopping).
``cluster_leases``: who owns each process, under which fencing epoch, until when. A row is never
deleted (a release only ends it), so a process's epoch only ever grows.

Every time in these tables is the database's (``clock_timestamp()``), never a node's: nodes'
clocks differ, the database's is the one they share.

``cluster_fence(process, epoch)`` is the fence a journal or queue write runs inside its own
transaction: it takes a share lock on the lease row (a takeover waits for the write's commit)
and raises SQLSTATE ``PU409`` when the epoch moved on (see leases.check_fence).

Creating all this is idempotent and runs under a transaction-scoped advisory lock, so two nodes
starting on a fresh database at once do not collide (a concurrent CREATE ... IF NOT EXISTS can
still fail on the catalog's unique index without it).
"""

from __future__ import annotations

from typing import Any

import psycopg

__all__ = ["FENCE_SQLSTATE", "SCHEMA_LOCK", "STATEMENTS", "ensure_schema", "schema_exists"]

#: pg_advisory_xact_lock key held while creating the tables: "pcluster" as 8 bytes (the
#: journal's migrations use another key, "promptui").
SCHEMA_LOCK = int.from_bytes(b"pcluster", "big") & 0x7FFF_FFFF_FFFF_FFFF
#: the SQLSTATE cluster_fence raises for a write whose epoch is no longer current
FENCE_SQLSTATE = "PU409"

STATEMENTS: list[str] = [
    """CREATE TABLE IF NOT EXISTS cluster_nodes (
        node_id TEXT PRIMARY KEY,
        address TEXT NOT NULL,
        started_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
        heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
        max_processes INTEGER NULL CHECK (max_processes IS NULL OR max_processes >= 0),
        stopping BOOLEAN NOT NULL DEFAULT false
    )""",
    """CREATE TABLE IF NOT EXISTS cluster_leases (
        process TEXT PRIMARY KEY,
        node_id TEXT NOT NULL,
        epoch BIGINT NOT NULL CHECK (epoch > 0),
        expires_at TIMESTAMPTZ NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS cluster_leases_by_node ON cluster_leases (node_id)",
    f"""CREATE OR REPLACE FUNCTION cluster_fence(p_process TEXT, p_epoch BIGINT)
    RETURNS void LANGUAGE plpgsql AS $fence$
    DECLARE
        owner_id TEXT;
        owner_epoch BIGINT;
    BEGIN
        SELECT node_id, epoch INTO owner_id, owner_epoch
            FROM cluster_leases WHERE process = p_process FOR SHARE;
        IF owner_epoch IS DISTINCT FROM p_epoch THEN
            RAISE EXCEPTION USING
                ERRCODE = '{FENCE_SQLSTATE}',
                MESSAGE = format('process %s: write refused, epoch %s is no longer current '
                                 '(owner %s, epoch %s)', p_process, p_epoch,
                                 coalesce(owner_id, 'none'), coalesce(owner_epoch::text, '-')),
                DETAIL = json_build_object('process', p_process, 'epoch', p_epoch,
                                           'owner', owner_id, 'owner_epoch', owner_epoch)::text;
        END IF;
    END
    $fence$""",
]


async def schema_exists(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether the tables and the fence function are all there (then nothing needs a lock)."""
    cur = await conn.execute(
        "SELECT to_regclass('cluster_nodes') IS NOT NULL "
        "AND to_regclass('cluster_leases') IS NOT NULL "
        "AND to_regprocedure('cluster_fence(text, bigint)') IS NOT NULL")
    row = await cur.fetchone()
    return bool(row and row[0])


async def ensure_schema(conn: psycopg.AsyncConnection[Any]) -> None:
    """Create the cluster's tables and fence function if they are missing (idempotent, safe to
    run from several nodes at once). ``conn`` may be in autocommit mode or not."""
    exists = await schema_exists(conn)
    if not conn.autocommit:
        await conn.commit()  # end the check's implicit transaction: the lock's must be real
    if exists:
        return
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        if await schema_exists(conn):  # another node made them while we waited for the lock
            return
        for statement in STATEMENTS:
            await conn.execute(statement)
