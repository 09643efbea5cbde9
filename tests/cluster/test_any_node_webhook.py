"""A webhook reaches its process through any node of a ``promptui serve --cluster``: a node that
does not run the process checks the sender's signature as the process would and puts the event
into its cluster inbox (202 once committed); the owner runs it exactly once. A redelivery is
200 ``duplicate`` on either node, and what a node took while the owner was dead runs after the
takeover."""

from __future__ import annotations

import json
import signal
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.helpers.cluster import Cluster, Journal, Node, hooked_agent, ledger_lines, write_agents
from tests.helpers.polling import poll
from tests.helpers.ports import free_port
from tests.helpers.webhooks import github

pytestmark = pytest.mark.slow

TTL = 2.0
NAMES = ["p0", "p1"]
SECRET = "cluster-hook-secret"
HOOKED = hooked_agent(trigger_extra="    filter_expression: payload.i != \"skip\"\n")


@pytest.fixture
def cluster(tmp_path: Path, pg_dsn: str) -> Iterator[Cluster]:
    agents = write_agents(tmp_path, NAMES)
    (agents / "p0.agent").write_text(HOOKED)
    nodes = Cluster(tmp_path, pg_dsn, agents, tmp_path / "ledger.txt", ttl=TTL)
    try:
        yield nodes
    finally:
        nodes.close()


def start_pair(cluster: Cluster) -> tuple[Node, Node, dict[str, int]]:
    """Two nodes, each serving webhooks on a port of its own: (p0's owner, the other node,
    node id -> webhook port)."""
    ports = {"n1": free_port(), "n2": free_port()}
    started = [cluster.start(n, wait=False, env={"HOOK_PORT": str(ports[n]),
                                                 "HOOK_SECRET": SECRET}) for n in ports]
    for node in started:
        cluster.wait_listening(node)
    poll(lambda: sorted(cluster.split(NAMES).values()) == [1, 1], 60, "a 1/1 split")
    owner = cluster.owners()["p0"]
    return owner, next(n for n in started if n is not owner), ports


def deliver(port: int, item: str, delivery: str, secret: str = SECRET) -> httpx.Response:
    body = json.dumps({"i": item}).encode()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10.0,
                      trust_env=False) as client:
        return client.post("/hooks/p0", content=body, headers=github(body, secret, delivery))


def test_a_webhook_through_the_non_owner_runs_exactly_once(cluster: Cluster) -> None:
    owner, other, ports = start_pair(cluster)
    journal = Journal(cluster.dsn)
    deliveries = {f"w{i}": str(uuid.uuid4()) for i in range(60)}

    def send(item: str) -> str:
        answer = deliver(ports[other.node_id], item, deliveries[item])
        assert answer.status_code == 202, answer.text
        return str(answer.json()["event_id"])

    with ThreadPoolExecutor(4) as pool:
        ids = dict(zip(deliveries, pool.map(send, deliveries), strict=True))
    finished = poll(lambda: (done := journal.finished()) and set(ids.values()) <= set(done)
                    and done, 60, "every webhook event to finish on the owner")
    assert [e for e in ids.values() if finished[e] != 1] == [], "an event ran twice"
    runs_of = {str(r[0]) for r in journal.rows(
        "SELECT DISTINCT process FROM entries WHERE entry_type = 'run_finished' "
        "AND data::json->>'event_id' = ANY(%s)", (sorted(ids.values()),))}
    assert runs_of == {"p0"}

    # redeliveries: through the non-owner (its memory) and the owner (its journal's index)
    for item in ("w0", "w1", "w2"):
        for node in (other, owner):
            again = deliver(ports[node.node_id], item, deliveries[item])
            assert (again.status_code, again.json()) == (
                200, {"status": "duplicate", "event_id": ids[item]}), (node.node_id, again.text)
    bad = deliver(ports[other.node_id], "forged", str(uuid.uuid4()), secret="not-the-secret")
    assert bad.status_code == 401
    skipped = deliver(ports[other.node_id], "skip", str(uuid.uuid4()))
    assert (skipped.status_code, skipped.json()["status"]) == (200, "ignored")

    poll(lambda: int(journal.rows("SELECT count(*) FROM cluster_inbox")[0][0]) == 0, 30,
         "the inbox to drain")
    assert sorted(item for _, _, item in ledger_lines(cluster.ledger)) == sorted(deliveries)
    with other.client() as client:
        served = client.get("/cluster/webhooks").json()
    assert [(s["process"], s["path"], s["port"]) for s in served["standbys"]] == [
        ("p0", "/hooks/p0", ports[other.node_id])]
    assert served["standbys"][0]["accepted"] == 60


def test_what_a_node_took_while_the_owner_was_dead_runs_after_the_takeover(
        cluster: Cluster) -> None:
    owner, other, ports = start_pair(cluster)
    journal = Journal(cluster.dsn)
    owner.kill(signal.SIGKILL)
    owner.proc.wait(10)
    # the lease is still the dead node's: nobody runs p0, the survivor still takes its webhooks
    ids = {}
    for i in range(20):
        answer = deliver(ports[other.node_id], f"d{i}", str(uuid.uuid4()))
        assert answer.status_code == 202, answer.text
        ids[answer.json()["event_id"]] = f"d{i}"
    poll(lambda: cluster.running(["p0"]) == {"p0": other.node_id}, TTL + 30,
         "the takeover")
    after = deliver(ports[other.node_id], "after", str(uuid.uuid4()))  # now its own trigger
    assert after.status_code == 202
    ids[after.json()["event_id"]] = "after"
    finished = poll(lambda: (done := journal.finished()) and set(ids) <= set(done)
                    and done, 60, "every event taken to run after the takeover")
    assert [e for e in ids if finished[e] != 1] == []
    assert sorted(item for _, _, item in ledger_lines(cluster.ledger)) == sorted(ids.values())
