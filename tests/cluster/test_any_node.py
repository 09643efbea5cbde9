"""Any node of a ``promptui serve --cluster`` answers for every process: an event injected
through a node that does not run the process goes into its cluster inbox in PostgreSQL and runs
exactly once on the owner; any other command or read is forwarded to the owner (over the
cluster token) and answers with the owner's result; with the owner dead it is 503 with
Retry-After until another node takes the process over, and then it works again."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.helpers.cluster import Cluster, Journal, Node, write_agents
from tests.helpers.polling import poll

pytestmark = pytest.mark.slow

TTL = 2.0
NAMES = ["p0", "p1"]
EVENTS = 200


@pytest.fixture
def cluster(tmp_path: Path, pg_dsn: str) -> Iterator[Cluster]:
    nodes = Cluster(tmp_path, pg_dsn, write_agents(tmp_path, NAMES), tmp_path / "ledger.txt",
                    ttl=TTL)
    try:
        yield nodes
    finally:
        nodes.close()


def start_pair(cluster: Cluster) -> tuple[Node, Node]:
    """Two nodes with one process each: (p0's owner, the other node)."""
    cluster.start_all("n1", "n2")
    poll(lambda: sorted(cluster.split(NAMES).values()) == [1, 1], 60, "a 1/1 split")
    owner = cluster.owners()["p0"]
    return owner, next(n for n in cluster.nodes if n is not owner)


def state_of(node: Node, name: str) -> str:
    with node.client() as client:
        answer = client.get(f"/processes/{name}")
    return str(answer.json()["state"]) if answer.status_code == 200 else f"({answer.status_code})"


def test_inject_through_the_non_owner_runs_each_event_exactly_once(cluster: Cluster) -> None:
    owner, other = start_pair(cluster)
    journal = Journal(cluster.dsn)

    def inject(i: int) -> str:
        with other.client(10.0) as client:
            answer = client.post("/processes/p0/inject", json={"payload": {"i": f"e{i}"}})
        assert answer.status_code == 202, answer.text
        return str(answer.json()["event_id"])

    with ThreadPoolExecutor(4) as pool:
        ids = set(pool.map(inject, range(EVENTS)))
    assert len(ids) == EVENTS
    finished = poll(lambda: (done := journal.finished()) and ids <= set(done) and done,
                    60, "every injected event to finish on the owner")
    assert [e for e in ids if finished[e] != 1] == [], "an event ran twice"
    assert ids <= journal.accepted()
    assert int(journal.rows("SELECT count(*) FROM cluster_inbox")[0][0]) == 0
    runs_of = {str(r[0]) for r in journal.rows(
        "SELECT DISTINCT process FROM entries WHERE entry_type = 'run_finished' "
        "AND data::json->>'event_id' = ANY(%s)", (sorted(ids),))}
    assert runs_of == {"p0"}
    ledger = [line for line in cluster.ledger.read_text().splitlines() if line.strip()]
    assert len(ledger) == EVENTS  # one write per event, no more
    assert owner.alive and other.alive


def test_commands_and_reads_on_the_non_owner_reach_the_owner(cluster: Cluster) -> None:
    owner, other = start_pair(cluster)
    with other.client(30.0) as client:
        status = client.get("/processes/p0")
        assert status.status_code == 200 and status.json()["node"] == owner.node_id
        assert status.json()["state"] == "running"
        suspended = client.post("/processes/p0/suspend")
        assert suspended.status_code == 200, suspended.text
        assert state_of(owner, "p0") == "suspended"  # done before the answer came
        resumed = client.post("/processes/p0/resume")
        assert resumed.status_code == 200, resumed.text
        assert state_of(owner, "p0") == "running"
        injected = client.post("/processes/p0/inject", json={"payload": {"i": "one"}})
        assert injected.status_code == 202
        event_id = injected.json()["event_id"]
        runs = poll(lambda: (got := client.get("/processes/p0/runs")).status_code == 200
                    and any(r.get("event_id") == event_id and r.get("state") == "succeeded"
                            for r in got.json()) and got,
                    30, "the run finished, read through the non-owner")
    with owner.client() as direct:
        assert direct.get("/processes/p0/runs").json() == runs.json()
        missing = direct.get("/processes/p0/runs/no-such-run/waiting")
    with other.client() as client:  # the owner's error, passed back as it was
        forwarded = client.get("/processes/p0/runs/no-such-run/waiting")
    assert (forwarded.status_code, forwarded.json()) == (missing.status_code, missing.json())


def test_the_cluster_token_opens_every_node(cluster: Cluster) -> None:
    owner, other = start_pair(cluster)
    token = str(Journal(cluster.dsn).rows(
        "SELECT value FROM cluster_meta WHERE key = 'cluster_token'")[0][0])
    for node in (owner, other):
        with httpx.Client(base_url=f"{node.url}/api/v1", timeout=5.0,
                          headers={"Authorization": f"Bearer {token}"}) as client:
            assert client.get("/processes").status_code == 200
        with httpx.Client(base_url=f"{node.url}/api/v1", timeout=5.0,
                          headers={"Authorization": "Bearer not-the-token-0123456789"}) as bad:
            assert bad.get("/processes").status_code == 401


def test_a_command_for_a_dead_owner_is_503_then_works_after_the_takeover(
        cluster: Cluster) -> None:
    owner, other = start_pair(cluster)
    owner.kill(signal.SIGKILL)
    owner.proc.wait(10)
    with other.client(30.0) as client:
        refused = client.post("/processes/p0/suspend")  # the lease is still the dead node's
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["Retry-After"]) >= 1
        assert refused.json()["error"]["code"] in ("OWNER_UNREACHABLE", "NO_LIVE_OWNER")
        poll(lambda: cluster.running(["p0"]) == {"p0": other.node_id}, TTL + 30,
             "the takeover")
        assert client.post("/processes/p0/suspend").status_code == 200
        assert state_of(other, "p0") == "suspended"
