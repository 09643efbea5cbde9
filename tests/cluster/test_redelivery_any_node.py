"""A sender's redelivery is answered as the owner would answer it, whichever node it reaches:
200 ``duplicate`` with the first event's id, never a 202 with a new id that then never runs.

Three ``promptui serve --cluster`` nodes on a throwaway PostgreSQL, each serving the GitHub
webhook of process p0 on a fixed port of its own: one runs p0 (its own trigger journals), the
other two put what they take into p0's cluster inbox. A delivery is sent again in order (after
the first is journaled, or taken from the inbox) and at the same moment to two nodes (a retry
after a timeout reaching another node while the first is still being taken)."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.helpers.cluster import (
    Cluster,
    Journal,
    Node,
    dump_logs,
    hooked_agent,
    ledger_lines,
    write_agents,
)
from tests.helpers.polling import poll
from tests.helpers.ports import free_port
from tests.helpers.webhooks import github

pytestmark = pytest.mark.slow

NAMES = ["p0", "p1", "p2"]
SECRET = "redelivery-secret"
HOOKED = hooked_agent(config_extra="  queue_size: 1000\n")


@pytest.fixture
def cluster(tmp_path: Path, pg_dsn: str) -> Iterator[Cluster]:
    agents = write_agents(tmp_path, NAMES)
    (agents / "p0.agent").write_text(HOOKED)
    nodes = Cluster(tmp_path, pg_dsn, agents, tmp_path / "ledger.txt", ttl=2.0)
    try:
        yield nodes
    finally:
        nodes.close()


def start_three(cluster: Cluster) -> tuple[Node, Node, Node, dict[str, int]]:
    """(p0's owner, the two others, node id -> its webhook port), once each runs one."""
    ports = {n: free_port() for n in ("n1", "n2", "n3")}
    started = [cluster.start(n, wait=False, env={"HOOK_PORT": str(port),
                                                 "HOOK_SECRET": SECRET})
               for n, port in ports.items()]
    for node in started:
        cluster.wait_listening(node)
    poll(lambda: sorted(cluster.split(NAMES).values()) == [1, 1, 1], 60, "a 1/1/1 split")
    owner = cluster.owners()["p0"]
    first, second = (n for n in started if n is not owner)
    return owner, first, second, ports


def deliver(port: int, item: str, delivery: str) -> httpx.Response:
    """One GitHub delivery (the same body, signature and X-GitHub-Delivery each time)."""
    body = json.dumps({"i": item}).encode()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=15.0,
                      trust_env=False) as client:
        return client.post("/hooks/p0", content=body, headers=github(body, SECRET, delivery))


def answer(response: httpx.Response) -> tuple[int, str, str]:
    data = response.json()
    return response.status_code, str(data.get("status")), str(data.get("event_id"))


def accepted_p0(journal: Journal) -> Counter[str]:
    """event id -> how many times p0's journal accepted it."""
    return Counter({str(e): int(n) for e, n in journal.rows(
        "SELECT data::json->>'event_id', count(*) FROM entries WHERE process = 'p0' AND "
        "entry_type = 'event_accepted' GROUP BY 1")})


def test_a_redelivery_through_any_node_answers_as_the_owner_would(cluster: Cluster) -> None:
    owner, other, third, ports = start_three(cluster)
    journal = Journal(cluster.dsn)
    cases = {  # where the first delivery goes, then where it is sent again, in order
        "owner first": (owner, [other, third, owner]),
        "another node first": (other, [owner, third, other]),
    }
    firsts: dict[str, str] = {}
    for item, (first_to, again_to) in cases.items():
        delivery = str(uuid.uuid4())
        status, _, first = answer(deliver(ports[first_to.node_id], item, delivery))
        assert status == 202, item
        firsts[item] = first
        # journaled by the owner (and, through another node, taken out of the inbox)
        poll(lambda first=first: first in journal.accepted() and journal.in_inbox() == 0,
             30, f"{item}: the first delivery to be journaled")
        for node in again_to:
            assert answer(deliver(ports[node.node_id], item, delivery)) == (
                200, "duplicate", first), (item, node.node_id, dump_logs(cluster))
    finished = poll(lambda: (done := journal.finished()) and set(firsts.values()) <= set(done)
                    and done, 30, "both events to run")
    assert [finished[e] for e in firsts.values()] == [1, 1]
    assert journal.in_inbox() == 0
    assert sorted(accepted_p0(journal).values()) == [1, 1]  # no other event was ever taken
    assert sorted(item for _, _, item in ledger_lines(cluster.ledger)) == sorted(cases)


def test_a_delivery_reaching_two_nodes_at_once_is_taken_once(cluster: Cluster) -> None:
    """A retry reaching another node while the first try is still being taken: every answer
    names the one event that runs, and it runs once."""
    owner, other, third, ports = start_three(cluster)
    journal = Journal(cluster.dsn)
    pairs = [(owner, other), (other, owner), (other, third)] * 12
    answers: dict[str, list[tuple[int, str, str]]] = {}
    with ThreadPoolExecutor(2) as pool:
        for i, (a, b) in enumerate(pairs):
            item, delivery = f"d{i}", str(uuid.uuid4())
            both = [pool.submit(deliver, ports[node.node_id], item, delivery)
                    for node in (a, b)]
            answers[item] = [answer(f.result()) for f in both]
    poll(lambda: journal.in_inbox() == 0, 30, "the inbox to drain")
    accepted = accepted_p0(journal)
    wrong = {item: got for item, got in answers.items()
             if sorted(status for status, _, _ in got) != [200, 202]
             or len({event_id for _, _, event_id in got}) != 1
             or accepted[got[0][2]] != 1}
    assert wrong == {}, f"{len(wrong)} of {len(pairs)}: {wrong}"
    assert len(accepted) == len(pairs), "an event was taken twice"
    ids = {got[0][2] for got in answers.values()}
    finished = poll(lambda: (done := journal.finished()) and ids <= set(done) and done, 60,
                    "every event to run")
    assert [e for e in ids if finished[e] != 1] == []
    assert sorted(item for _, _, item in ledger_lines(cluster.ledger)) == sorted(answers)
