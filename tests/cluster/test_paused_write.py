"""A write in flight on an owner that is paused past its lease (issue 34).

SIGSTOP the owner of a process while its write tool is inside its call: the other node takes
the process over and parks the run for an operator. "Not applied" is refused while the paused
node may still finish that write (until its lease's end plus the call's timeout), with the time
in the answer; once the paused node is woken it cuts its call at once (the write never lands)
and steps down, and the hold lifts. A killed owner's hold lifts as soon as its connections are
gone. A tool reads the lease's epoch from its context as a fencing token.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cluster import Cluster, Node
from tests.helpers.polling import poll

pytestmark = pytest.mark.slow

TTL = 2.0
BUDGET_S = 120  # the run's elapsed budget: the call's timeout in the hold
AGENT = """\
version: "1.0"
name: w
instructions: Write the item.
model:
  provider: scripted
  turns:
    - tool_calls: [{name: slow_write, args: {item: $payload.i}}]
    - reply: done
tools:
  - {path: "slow_ledger:slow_write", effect: write}
journal: {level: checkpoint}
config:
  run_budget: {max_seconds: BUDGET}
  trigger_delivery: {max_retries: 0}
""".replace("BUDGET", str(BUDGET_S))
TOOL = '''\
"""A write that takes a while: it says it started (with its fencing token), waits, writes."""

import asyncio
import os

from runtime_core import ToolContext


async def slow_write(item: str, ctx: ToolContext) -> str:
    ledger = os.environ["CLUSTER_LEDGER"]
    with open(ledger + ".started", "a") as started:
        started.write(f"{ctx.idempotency_key} {ctx.fencing_token}\\n")
    await asyncio.sleep(float(os.environ.get("SLOW_WRITE_S", "3")))
    with open(ledger, "a") as out:
        out.write(f"{ctx.idempotency_key} {ctx.event.event_id} {item} {ctx.fencing_token}\\n")
    return "written"
'''


@pytest.fixture
def cluster(tmp_path: Path, pg_dsn: str) -> Iterator[Cluster]:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "w.agent").write_text(AGENT)
    (agents / "slow_ledger.py").write_text(TOOL)
    nodes = Cluster(tmp_path, pg_dsn, agents, tmp_path / "ledger.txt", ttl=TTL)
    try:
        yield nodes
    finally:
        nodes.close()


def started(cluster: Cluster) -> list[tuple[str, str]]:
    path = Path(str(cluster.ledger) + ".started")
    if not path.exists():
        return []
    return [tuple(line.split()) for line in path.read_text().splitlines()]  # type: ignore[misc]


def ledger(cluster: Cluster) -> list[str]:
    return cluster.ledger.read_text().splitlines() if cluster.ledger.exists() else []


def owner_of_w(cluster: Cluster, not_node: Node | None = None) -> Node:
    def found() -> Node | None:
        node = cluster.owners().get("w")
        return node if node is not None and node is not not_node else None
    owner: Node = poll(found, 40, "a node to run w")
    return owner


def waiting_run(node: Node) -> dict[str, Any] | None:
    with node.client(5.0) as client:
        runs = client.get("/processes/w/runs", params={"state": "waiting"})
        if runs.status_code != 200 or not runs.json():
            return None
        run_id = runs.json()[0]["run_id"]
        detail: dict[str, Any] = client.get(f"/processes/w/runs/{run_id}/waiting").json()
        return detail


def reconcile(node: Node, run_id: str, outcome: str) -> tuple[int, dict[str, Any]]:
    with node.client(10.0) as client:
        answer = client.post(f"/processes/w/runs/{run_id}/reconcile",
                             json={"outcome": outcome, "note": "test"})
    return answer.status_code, answer.json()


def start_two(cluster: Cluster, env: dict[str, str]) -> Node:
    cluster.start_all("n1", "n2", env=env)
    return owner_of_w(cluster)


def test_a_paused_owner_cannot_finish_its_write_and_not_applied_waits(cluster: Cluster) -> None:
    # the call would end during the pause: woken, it must be cut before it writes
    victim = start_two(cluster, {"SLOW_WRITE_S": "1.5"})
    with victim.client(5.0) as client:
        assert client.post("/processes/w/inject", json={"payload": {"i": "a"}}).status_code \
            == 202
    poll(lambda: started(cluster), 20, "the write tool to start")
    key, token = started(cluster)[0]
    victim.kill(signal.SIGSTOP)
    try:
        survivor = owner_of_w(cluster, not_node=victim)
        detail = poll(lambda: waiting_run(survivor), 30, "the run parked by the takeover")
        assert detail["idempotency_key"] == key
        assert detail["previous_owner"] == victim.node_id
        assert detail["previous_epoch"] == int(token)  # the tool saw its lease's epoch
        until = detail["previous_owner_may_write_until"]
        assert until >= detail["previous_lease_ended_at"] + BUDGET_S - 1
        status, body = reconcile(survivor, detail["run_id"], "not_applied")
        assert status == 409 or status == 400, (status, body)
        text = str(body)
        assert "may still finish the write until" in text and "UTC" in text, text
    finally:
        victim.kill(signal.SIGCONT)
    # woken, it cuts its call at once and steps down; the hold lifts once its journal of w
    # is closed, well before the call's timeout
    poll(lambda: reconcile(survivor, detail["run_id"], "not_applied")[0] == 200, 30,
         "'not applied' to be accepted once the old owner stepped down")
    poll(lambda: "run(s) in flight were cut" in victim.text() or "stepped down from w"
         in victim.text(), 20, "the woken node to step down")
    assert ledger(cluster) == [], "the paused node finished its write after the takeover"
    assert "the lease of w (epoch" in victim.text() and "run(s) in flight were cut" \
        in victim.text(), victim.text()[-3000:]


def test_a_killed_owners_hold_lifts_when_its_connections_are_gone(cluster: Cluster) -> None:
    victim = start_two(cluster, {"SLOW_WRITE_S": "30"})
    with victim.client(5.0) as client:
        assert client.post("/processes/w/inject", json={"payload": {"i": "b"}}).status_code \
            == 202
    poll(lambda: started(cluster), 20, "the write tool to start")
    victim.kill(signal.SIGKILL)
    survivor = owner_of_w(cluster, not_node=victim)
    detail = poll(lambda: waiting_run(survivor), 30, "the run parked by the takeover")
    poll(lambda: reconcile(survivor, detail["run_id"], "not_applied")[0] == 200, 15,
         "'not applied' once the killed node's connections are gone")
    assert ledger(cluster) == []
