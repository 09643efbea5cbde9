"""Creating a cluster part's own tables once, safely from several nodes starting together.

The pattern of schema.py: look without a lock first (the common case: all there, nothing to
do), else take a transaction-scoped advisory lock, look again and create what is missing. The
second look reads ``pg_tables`` and ``pg_indexes`` (plain MVCC reads with a fresh snapshot, in
the schema tables are created in: ``current_schema()``), not ``to_regclass``: a name lookup can
answer from the session's catalog cache, which may still say "missing" for a table another
node committed while this one waited for the lock.
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime_core.cluster.db import AsyncConn

__all__ = ["advisory_key", "ensure_tables", "relations_exist"]

EXISTS_SQL = """
SELECT (SELECT count(*) FROM pg_tables
        WHERE schemaname = current_schema() AND tablename = ANY(%(tables)s)) = %(nt)s
   AND (SELECT count(*) FROM pg_indexes
        WHERE schemaname = current_schema() AND indexname = ANY(%(indexes)s)) = %(ni)s"""


def advisory_key(name: bytes) -> int:
    """A pg_advisory_xact_lock key from up to 8 bytes of name (a positive bigint)."""
    if not 0 < len(name) <= 8:
        raise ValueError(f"an advisory key name has 1 to 8 bytes, not {len(name)}")
    return int.from_bytes(name.ljust(8, b"_"), "big") & 0x7FFF_FFFF_FFFF_FFFF


async def relations_exist(conn: AsyncConn, tables: Sequence[str],
                          indexes: Sequence[str] = ()) -> bool:
    """Whether every one of ``tables`` and ``indexes`` is in the current schema."""
    cur = await conn.execute(EXISTS_SQL, {"tables": list(tables), "nt": len(tables),
                                          "indexes": list(indexes), "ni": len(indexes)})
    row = await cur.fetchone()
    return bool(row and row[0])


async def ensure_tables(conn: AsyncConn, lock_key: int, tables: Sequence[str],
                        indexes: Sequence[str], statements: Sequence[str]) -> None:
    """Run ``statements`` (idempotent DDL making ``tables`` and ``indexes``) unless they all
    exist already; under the advisory lock ``lock_key``. ``conn`` may be in autocommit mode
    or not (then its open transaction, if any, is committed first)."""
    exists = await relations_exist(conn, tables, indexes)
    if not conn.autocommit:
        await conn.commit()  # end the check's implicit transaction: the lock's must be real
    if exists:
        return
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
        if await relations_exist(conn, tables, indexes):  # made while we waited for the lock
            return
        for statement in statements:
            await conn.execute(statement)
