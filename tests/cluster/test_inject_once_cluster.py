"""An inject's Idempotency-Key holds on a scale-out cluster (issue 31): the same key through
the node that does not run the process (its cluster inbox) and through the owner (its
journal) is taken once: one event, one write, and every repeat answers 200 with the first
event's id, also once the owner has taken the event out of the inbox."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cluster import Cluster, Journal, Node, ledger_lines, write_agents
from tests.helpers.polling import poll

pytestmark = pytest.mark.slow

NAMES = ["p0", "p1"]


@pytest.fixture
def cluster(tmp_path: Path, pg_dsn: str) -> Iterator[Cluster]:
    nodes = Cluster(tmp_path, pg_dsn, write_agents(tmp_path, NAMES), tmp_path / "ledger.txt",
                    ttl=2.0)
    try:
        yield nodes
    finally:
        nodes.close()


def inject(node: Node, key: str, item: str) -> tuple[int, dict[str, object]]:
    with node.client(30.0) as client:
        answer = client.post("/processes/p0/inject", json={"payload": {"i": item}},
                             headers={"Idempotency-Key": key})
    return answer.status_code, answer.json()


def test_an_idempotency_key_is_taken_once_whichever_node_it_comes_through(
        cluster: Cluster) -> None:
    cluster.start_all("n1", "n2")
    poll(lambda: sorted(cluster.split(NAMES).values()) == [1, 1], 60, "a 1/1 split")
    owner = cluster.owners()["p0"]
    other = next(n for n in cluster.nodes if n is not owner)

    status, taken = inject(other, "order-42", "once")  # into p0's cluster inbox
    assert status == 202, taken
    event_id = taken["event_id"]
    journal = Journal(cluster.dsn)
    poll(lambda: journal.finished().get(str(event_id)) == 1, 60, "the run on the owner")
    for node in (other, owner, other):  # the inbox row is gone: the owner's journal answers
        status, again = inject(node, "order-42", "once")
        assert (status, again["event_id"], again["replayed"]) == (200, event_id, True), again
    fresh_status, fresh = inject(other, "order-43", "twice")
    assert fresh_status == 202
    poll(lambda: journal.finished().get(str(fresh["event_id"])) == 1, 60, "the second run")
    items = sorted(item for _, _, item in ledger_lines(cluster.ledger))
    assert items == ["once", "twice"]  # one write each
