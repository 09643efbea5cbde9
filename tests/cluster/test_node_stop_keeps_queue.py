"""A cluster node stops as every host does (issue 31): on SIGTERM its runs in flight drain,
the events still queued stay accepted in PostgreSQL (no dead letter), its closing line says how
many were kept, and the next owner of the process runs each of them exactly once."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.cluster import Cluster, Journal, ledger_lines
from tests.helpers.polling import poll

pytestmark = pytest.mark.slow

AGENT = """\
version: "1.0"
name: slowbook
instructions: Record the item.
model:
  provider: scripted
  turns:
    - tool_calls: [{name: record, args: {item: $payload.i}}]
    - reply: recorded
tools:
  - {path: "slow_ledger:record", effect: write}
journal: {level: checkpoint}
"""
TOOL = '''\
import asyncio
import os

from runtime_core import ToolContext


async def record(item: str, ctx: ToolContext) -> str:
    """Takes SLOW_SECONDS, then appends the key, the event id and the item to the ledger."""
    await asyncio.sleep(float(os.environ.get("SLOW_SECONDS", "0")))
    line = f"{ctx.idempotency_key} {ctx.event.event_id} {item}\\n".encode()
    fd = os.open(os.environ["CLUSTER_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return "written"
'''
EVENTS = 12
CLOSING = re.compile(r"promptui serve: stopped cleanly; (\d+) queued or running event\(s\) "
                     r"are kept in the journal for the next start, (\d+) dead letter\(s\)")


def test_a_nodes_sigterm_keeps_the_queue_for_the_next_owner(tmp_path: Path,
                                                           pg_dsn: str) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "slowbook.agent").write_text(AGENT)
    (agents / "slow_ledger.py").write_text(TOOL)
    ledger = tmp_path / "ledger.txt"
    cluster = Cluster(tmp_path, pg_dsn, agents, ledger, extra_args=("--drain-timeout", "30"))
    journal = Journal(pg_dsn)
    try:
        first = cluster.start("n1", env={"SLOW_SECONDS": "0.4"})
        poll(lambda: cluster.running(["slowbook"]), 30, "slowbook running on n1")
        with first.client() as client:
            for n in range(EVENTS):
                answer = client.post("/processes/slowbook/inject",
                                     json={"payload": {"i": str(n)}})
                assert answer.status_code == 202, answer.text
        poll(lambda: ledger_lines(ledger), 30, "the first write")
        assert first.stop() == 0, first.text()
        written = len(ledger_lines(ledger))
        kept = CLOSING.search(first.text())
        assert kept is not None, first.text()
        assert kept.groups() == (str(EVENTS - written), "0") and written < EVENTS
        assert journal.rows("SELECT count(*) FROM dead_letters")[0][0] == 0
        assert journal.pending() == EVENTS - written

        second = cluster.start("n2", env={"SLOW_SECONDS": "0"})
        poll(lambda: journal.pending() == 0 and len(ledger_lines(ledger)) >= EVENTS, 60,
             "the next owner to run the kept events")
        items = Counter(item for _, _, item in ledger_lines(ledger))
        assert items == {str(n): 1 for n in range(EVENTS)}  # each exactly once
        assert journal.rows("SELECT count(*) FROM dead_letters")[0][0] == 0
        assert second.stop() == 0, second.text()
    finally:
        cluster.close()
