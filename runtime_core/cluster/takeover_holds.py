"""When the node a process was taken from can no longer finish a write of it.

A takeover from a node that stopped beating (cluster/node.py ``TakenOver``) parks every run
whose write was in flight, and "not applied" is refused until that node's lease end plus the
longest a call may take (runs/waiting.py ``WriterHold``): the node may only be paused, and its
call may still land. The hold is lifted sooner once the database shows that the old node cannot
write any more:

- none of its sessions is open (a process that died has its connections closed by the
  kernel; a paused one keeps them), or
- it beats again after its lease ended and its journal of that process is closed: a node that
  comes back cuts its calls in flight and steps down (ClusterNode.check_deadlines, then
  on_lose) before it closes that journal.

The names come from the application names every node gives its connections (cluster/db.py,
host.py, ingress.py, journal/postgres): ``promptui-cluster <node>``, ``promptui-cluster-reads
<node>``, ``promptui-inbox <node>`` and ``promptui <node> <process>``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["journal_session_name", "old_writer_done"]

SESSIONS_SQL = """
SELECT count(*) FILTER (WHERE application_name = %(journal)s),
       count(*) FILTER (WHERE application_name = ANY(%(names)s)
                          OR starts_with(application_name, %(prefix)s))
FROM pg_stat_activity WHERE pid <> pg_backend_pid()"""

BEAT_SQL = """
SELECT EXTRACT(EPOCH FROM heartbeat_at)::float8, stopping FROM cluster_nodes
WHERE node_id = %s"""


def journal_session_name(node_id: str, process: str) -> str:
    """The application name of ``node_id``'s journal connections for ``process``."""
    return f"promptui {node_id} {process}"[:63]


async def old_writer_done(conn: Any, node_id: str, process: str, lease_ended_at: float
                          ) -> str | None:
    """Why ``node_id`` can no longer finish a write of ``process`` (see the module), or None
    while it still may. ``lease_ended_at`` is time.time() of its lease's end."""
    names = [f"promptui-cluster {node_id}"[:63], f"promptui-cluster-reads {node_id}"[:63],
             f"promptui-inbox {node_id}"[:63]]
    row = await (await conn.execute(SESSIONS_SQL, {
        "journal": journal_session_name(node_id, process), "names": names,
        "prefix": f"promptui {node_id} "})).fetchone()
    journal_open, any_open = (int(row[0]), int(row[1])) if row else (0, 0)
    if any_open == 0:
        return f"node {node_id!r} has no connection to the database left (it stopped)"
    if journal_open:
        return None
    beat = await (await conn.execute(BEAT_SQL, (node_id,))).fetchone()
    if beat is not None and (bool(beat[1]) or float(beat[0]) > lease_ended_at):
        return (f"node {node_id!r} is back and closed its journal of {process} (it stepped "
                "down, its calls in flight cut)")
    return None
