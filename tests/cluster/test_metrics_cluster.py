"""``GET /metrics`` of ``promptui serve --cluster`` nodes (issue 34): each node counts the leases
it holds and their epochs, as the cluster's nodes view says, and serves the gauges of the
processes it runs (only those)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.cluster import TOKEN, Cluster, write_agents
from tests.helpers.polling import poll

pytestmark = pytest.mark.slow

NAMES = ["p0", "p1", "p2", "p3"]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def cluster(tmp_path: Path, pg_dsn: str) -> Iterator[Cluster]:
    nodes = Cluster(tmp_path, pg_dsn, write_agents(tmp_path, NAMES), tmp_path / "ledger.txt")
    try:
        yield nodes
    finally:
        nodes.close()


def scrape(url: str) -> Samples:
    answer = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"},
                       timeout=10.0)
    assert answer.status_code == 200, answer.text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(answer.text)
            for s in family.samples}


def test_each_node_counts_the_leases_it_holds_and_their_epochs(cluster: Cluster) -> None:
    first, second = cluster.start_all("n1", "n2")
    poll(lambda: cluster.split(NAMES) == {"n1": 2, "n2": 2}, 60, "a 2/2 split, all running")
    view = {row["node_id"]: row["processes"] for row in cluster.nodes_view() or []}
    for node in (first, second):
        found = scrape(node.url)
        held = view[node.node_id]
        assert found[("promptui_cluster_leases", (("node", node.node_id),))] == len(held) == 2
        epochs = {dict(labels)["process"]: value for (name, labels), value in found.items()
                  if name == "promptui_cluster_lease_epoch"}
        assert epochs == {name: float(epoch) for name, epoch in held.items()}
        running = {dict(labels)["process"] for (name, labels), value in found.items()
                   if name == "promptui_process_state" and dict(labels)["state"] == "running"
                   and value == 1}
        assert running == set(held), (node.node_id, running, held)
    assert httpx.get(f"{first.url}/metrics", timeout=10.0).status_code == 401
    assert first.stop() == 0 and second.stop() == 0
