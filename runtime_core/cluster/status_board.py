"""The status board: the figures of every process, published by the node that runs it, so any
node shows the whole cluster's processes with their real counts.

``cluster_process_status`` holds one row per process: the node that last published it, under
which lease epoch, its row of the process table (``summary``, JSON: state, queue, runs, dead
letters, the runs waiting for an operator...) and when that node last vouched for it
(``updated_at``, the database's clock).

Each node's :class:`StatusBoard` publishes about once a second (``interval_s``), in one
statement for all the processes it runs: a row whose figures changed, and every row at least
every ``confirm_s`` (so ``updated_at`` says how fresh the figures are even when nothing
moves). On its own connection, never the lease rounds'. A row is written only under the lease
the node holds now (the statement joins ``cluster_leases`` on process, node and epoch, the lease
not expired) and never over a row of a later epoch: a node that lost a process cannot overwrite
the figures of its new owner. Rows are never deleted: a process between owners keeps its last
figures, and its next owner's first publish replaces them.

:func:`read_board` is what the views read (control/cluster.py): the rows of some processes,
each with its age in seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

from runtime_core.cluster.db import AsyncConn, Connector, Database
from runtime_core.cluster.ddl import advisory_key, ensure_tables
from runtime_core.cluster.errors import describe

__all__ = ["CONFIRM_S", "PUBLISH_S", "Figures", "Published", "StatusBoard", "due", "read_board"]

log = logging.getLogger("runtime_core.cluster")

PUBLISH_S = 1.0  # seconds between two publishing rounds of a node
CONFIRM_S = 2.0  # a row unchanged this long is written again: its updated_at stays fresh
BOARD_LOCK = advisory_key(b"pcstatus")
TABLES = ("cluster_process_status",)
STATEMENTS = [
    """CREATE TABLE IF NOT EXISTS cluster_process_status (
        process TEXT PRIMARY KEY,
        node_id TEXT NOT NULL,
        epoch BIGINT NOT NULL,
        summary JSONB NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
    )""",
]

# Only under the lease held now, and never over a later epoch's row (see the module's doc).
PUBLISH_SQL = """
INSERT INTO cluster_process_status AS s (process, node_id, epoch, summary, updated_at)
SELECT r.process, %(node)s, r.epoch, r.summary, clock_timestamp()
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(process text, epoch bigint, summary jsonb)
JOIN cluster_leases l ON l.process = r.process AND l.node_id = %(node)s
     AND l.epoch = r.epoch AND l.expires_at > clock_timestamp()
ON CONFLICT (process) DO UPDATE SET node_id = excluded.node_id, epoch = excluded.epoch,
    summary = excluded.summary, updated_at = excluded.updated_at
WHERE s.epoch <= excluded.epoch
RETURNING s.process"""

READ_SQL = """
SELECT process, node_id, epoch, summary,
       EXTRACT(EPOCH FROM clock_timestamp() - updated_at)::float8
FROM cluster_process_status WHERE process = ANY(%s)"""

#: process -> (its lease's epoch, its row of the process table as JSON data)
Figures = dict[str, tuple[int, dict[str, Any]]]


class Published(NamedTuple):
    """One process's row on the board: who published it, under which epoch, the figures, and
    how many seconds ago (by the database's clock)."""

    node_id: str
    epoch: int
    summary: dict[str, Any]
    age_s: float


async def read_board(conn: AsyncConn, names: list[str]) -> dict[str, Published]:
    """The board's rows of ``names`` (a process nobody published is missing). Raises what
    the database raises (the table is missing until a node first publishes)."""
    if not names:
        return {}
    rows = await (await conn.execute(READ_SQL, (names,))).fetchall()
    found: dict[str, Published] = {}
    for process, node_id, epoch, summary, age in rows:
        if isinstance(summary, str):  # a driver that leaves jsonb as text
            summary = json.loads(summary)
        if isinstance(summary, dict):
            found[str(process)] = Published(str(node_id), int(epoch), summary,
                                            max(0.0, float(age)))
    return found


def due(current: dict[str, tuple[int, str]], sent: dict[str, tuple[int, str, float]],
        now: float, confirm_s: float = CONFIRM_S) -> list[str]:
    """The processes to write this round: new, changed (figures or epoch), or last written
    ``confirm_s`` or more ago. ``current``: process -> (epoch, figures as JSON text);
    ``sent``: process -> (epoch, JSON text, when it was written, monotonic)."""
    wanted = []
    for name, (epoch, text) in current.items():
        last = sent.get(name)
        if last is None or last[0] != epoch or last[1] != text or now - last[2] >= confirm_s:
            wanted.append(name)
    return sorted(wanted)


class StatusBoard:
    """A node's publisher of its processes' figures (see the module's doc). ``source`` gives
    them (set by the node's control plane; None publishes nothing); ``start`` and ``stop``
    run and end its task. One connection of its own, opened on first use."""

    def __init__(self, dsn: str, node_id: str, *, connect_timeout: float = 5.0,
                 interval_s: float = PUBLISH_S, confirm_s: float = CONFIRM_S) -> None:
        self.node_id = node_id
        self.connect_timeout = connect_timeout
        self.interval_s, self.confirm_s = interval_s, confirm_s
        self.source: Callable[[], Figures] | None = None
        self._connector = Connector(dsn, connect_timeout=connect_timeout,
                                    application_name=f"promptui-cluster-status {node_id}"[:63])
        self._db = Database(self._connector)
        self._ready = False
        self._sent: dict[str, tuple[int, str, float]] = {}
        self._task: asyncio.Task[None] | None = None
        self.failure = ""  # why the last round failed ("" once one succeeds)
        self.written = 0  # rows written so far

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConn]:
        async with self._db.connection() as conn:  # the cluster's schema first: the leases
            if not self._ready:
                await ensure_tables(conn, BOARD_LOCK, TABLES, (), STATEMENTS)
                self._ready = True
            yield conn

    async def publish(self) -> int:
        """One round: write what is due (see :func:`due`); how many rows were written."""
        figures = self.source() if self.source is not None else {}
        current = {name: (epoch, json.dumps(summary, sort_keys=True, default=str))
                   for name, (epoch, summary) in figures.items()}
        for gone in set(self._sent) - set(current):  # not ours any more
            del self._sent[gone]
        names = due(current, self._sent, time.monotonic(), self.confirm_s)
        if not names:
            return 0
        rows = json.dumps([{"process": name, "epoch": current[name][0],
                            "summary": figures[name][1]} for name in names], default=str)
        async with self._connection() as conn:
            cur = await conn.execute(PUBLISH_SQL, {"node": self.node_id, "rows": rows})
            written = {str(row[0]) for row in await cur.fetchall()}
        at = time.monotonic()
        for name in written & set(current):  # a row refused (the lease moved) is tried again
            self._sent[name] = (*current[name], at)
        self.written += len(written)
        return len(written)

    async def _run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self.connect_timeout):
                    await self.publish()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                why = describe(exc)
                if not self.failure:
                    log.warning("cluster node %s: publishing its processes' figures failed "
                                "(%s); the other nodes show them as last published until it "
                                "works again", self.node_id, why)
                self.failure = why
            else:
                if self.failure:
                    log.info("cluster node %s: publishing its processes' figures again",
                             self.node_id)
                self.failure = ""
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        """Publish from now on, every ``interval_s`` (in a task of the running loop)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"cluster status board {self.node_id}")

    async def stop(self) -> None:
        """Stop publishing (the rows stay: the last figures) and close the connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(Exception):
            await self._connector.close()
