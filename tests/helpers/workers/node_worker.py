"""A cluster node as its own OS process, for tests that pause (SIGSTOP) or kill (SIGKILL) it.

    python -m tests.helpers.workers.node_worker DSN NODE_ID TTL p1,p2,...

It prints one JSON line per event (ready, gain, lose, fenced, stopped). While it holds a process
it keeps writing rows to ``fenced_writes`` (WRITES_DDL: the test creates it), each in a
transaction that first runs check_fence, as a journal would. SIGTERM stops the node cleanly and
exits 0.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from typing import Any

import psycopg

from runtime_core.cluster import ClusterNode, FencedOut, check_fence

WRITES_DDL = """CREATE TABLE IF NOT EXISTS fenced_writes (
    id BIGSERIAL PRIMARY KEY, process TEXT NOT NULL, epoch BIGINT NOT NULL,
    node_id TEXT NOT NULL)"""


def out(**event: Any) -> None:
    print(json.dumps(event), flush=True)


async def write_loop(dsn: str, node_id: str, ttl: float, held: dict[str, int]) -> None:
    """Fenced writes, as fast as a small journal would make them, until cancelled."""
    conn: psycopg.AsyncConnection[Any] | None = None
    while True:
        try:
            if conn is None or conn.closed or conn.broken:
                conn = await psycopg.AsyncConnection.connect(dsn)
                # a writer paused inside its transaction must not hold the lease row forever
                await conn.execute("SELECT set_config('idle_in_transaction_session_timeout', "
                                   "%s, false)", (f"{int(ttl * 1000)}ms",))
                await conn.commit()
            for process, epoch in sorted(held.items()):
                try:
                    async with conn.transaction():
                        await check_fence(conn, process, epoch)
                        await conn.execute("INSERT INTO fenced_writes (process, epoch, node_id) "
                                           "VALUES (%s, %s, %s)", (process, epoch, node_id))
                except FencedOut as exc:
                    out(event="fenced", node=node_id, process=process, epoch=epoch,
                        owner=exc.current_owner, owner_epoch=exc.current_epoch)
        except psycopg.Error:
            if conn is not None:
                await conn.close()
            conn = None
        await asyncio.sleep(0.02)


async def main(dsn: str, node_id: str, ttl: float, names: list[str]) -> None:
    held: dict[str, int] = {}

    async def on_gain(process: str, epoch: int) -> None:
        held[process] = epoch
        out(event="gain", node=node_id, process=process, epoch=epoch)

    async def on_lose(process: str, epoch: int, reason: str) -> None:
        held.pop(process, None)
        out(event="lose", node=node_id, process=process, epoch=epoch, reason=reason)

    node = ClusterNode(dsn, node_id, "http://127.0.0.1:0", ttl_s=ttl, on_gain=on_gain,
                       on_lose=on_lose, processes=lambda: names)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await node.start()
    writer = asyncio.create_task(write_loop(dsn, node_id, ttl, held))
    out(event="ready", node=node_id)
    await stop.wait()
    writer.cancel()
    await asyncio.gather(writer, return_exceptions=True)
    await node.stop()
    out(event="stopped", node=node_id)


if __name__ == "__main__":
    dsn_arg, node_arg, ttl_arg, names_arg = sys.argv[1:5]
    asyncio.run(main(dsn_arg, node_arg, float(ttl_arg), names_arg.split(",")))
