"""``promptui serve --cluster``: several nodes as OS processes on one throwaway PostgreSQL.

Four processes whose runs each call a write tool (one ledger line per call, shared by every
node). Events go in through the owner's API (``POST /processes/{name}/inject``; the owner found
with ``GET /cluster/nodes``), and the counts are exact, from the journal in PostgreSQL and from
the ledger: every acknowledged event was accepted, every accepted event finished exactly once,
no write ran twice, and the epochs each process's entries carry only ever grow (no write of an
old owner after its successor's). The kills use a 2 s lease TTL (the hidden --lease-ttl).

PROMPTUI_CLUSTER_KILLS sets how many times the SIGKILL test kills an owner (default 5, which
keeps the suite under ten minutes on two cores; bench/cluster.py and a larger value soak longer).
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cluster import (
    Cluster,
    Journal,
    Load,
    as_json,
    dump_logs,
    ledger_lines,
    reconcile_waiting,
    summary,
    write_agents,
)
from tests.helpers.polling import poll
from tests.helpers.postgres import PgServer

pytestmark = pytest.mark.slow

TTL = 2.0
NAMES = [f"p{i}" for i in range(4)]
KILLS = int(os.environ.get("PROMPTUI_CLUSTER_KILLS", "5"))


@pytest.fixture
def cluster(tmp_path: Path, pg_dsn: str) -> Iterator[Cluster]:
    agents = write_agents(tmp_path, NAMES)
    nodes = Cluster(tmp_path, pg_dsn, agents, tmp_path / "ledger.txt", ttl=TTL)
    try:
        yield nodes
    finally:
        nodes.close()


def start_pair(cluster: Cluster) -> None:
    """Two nodes, and wait for a 2/2 split with every process running."""
    cluster.start_all("n1", "n2")
    wait_split(cluster, 2)


def wait_split(cluster: Cluster, nodes: int, timeout: float = 20.0) -> Counter[str]:
    even = len(NAMES) // nodes
    split: Counter[str] = poll(
        lambda: (found := cluster.split(NAMES)) and sorted(found.values()) == [even] * nodes
        and found, timeout, f"a {even}-per-node split over {nodes} nodes")
    return split


def settle_and_check(cluster: Cluster, load: Load, journal: Journal) -> dict[str, object]:
    """Everything accepted runs to its end (writes left unknown by a kill reconciled against
    the ledger); then the exact counts."""
    deadline = time.monotonic() + 60
    not_applied: set[str] = set()  # killed between a write's intent and the write itself
    refused: dict[str, str] = {}  # the reconcile answers refused, for the failure message

    def done() -> bool:
        # an owner that just stepped down may still have taken an inject into the inbox
        return set(journal.accepted()) <= set(journal.finished()) and not journal.pending() \
            and not journal.in_inbox()

    while not done():
        assert time.monotonic() < deadline, f"not all accepted events finished: " \
            f"{as_json(summary(cluster, load, journal))}\nrefused: {as_json(refused)}\n" \
            f"{dump_logs(cluster)}"
        reconcile_waiting(cluster, NAMES, cluster.ledger, not_applied, refused)
        time.sleep(0.05)  # between polls
    finished = journal.finished()
    accepted = journal.accepted()
    lines = ledger_lines(cluster.ledger)
    by_event = Counter(event for _, event, _ in lines)
    by_key = Counter(key for key, _, _ in lines)
    assert set(load.acked) <= accepted, "an acknowledged event is not in the journal"
    assert set(finished) == accepted
    assert [e for e, n in finished.items() if n != 1] == [], "an event ran twice"
    assert [k for k, n in by_key.items() if n != 1] == [], "a write ran twice"
    assert [e for e, n in by_event.items() if n != 1] == [], "an event wrote twice"
    assert set(by_event) == accepted - not_applied  # those go on without the write
    for process, epochs in journal.epochs_in_order().items():
        assert epochs == sorted(epochs), f"{process}: an old epoch wrote after a newer one"
    return {**summary(cluster, load, journal), "reconciled_not_applied": len(not_applied)}


def test_two_nodes_run_2000_events_each_exactly_once(cluster: Cluster) -> None:
    start_pair(cluster)
    journal = Journal(cluster.dsn)
    load = Load(cluster, NAMES, total=2000, threads=8).start()
    load.join(120)
    assert len(load.acked) == 2000
    result = settle_and_check(cluster, load, journal)
    assert result["accepted"] == result["finished"] == result["ledger"] == 2000, result
    assert sorted(cluster.split(NAMES).values()) == [2, 2]
    view = cluster.nodes_view() or []
    assert {row["node_id"] for row in view} == {"n1", "n2"}
    assert all(row["live"] and row["address"].startswith("http://127.0.0.1:")
               and len(row["processes"]) == 2 for row in view), view
    with cluster.nodes[0].client() as client:  # every process listed, each with its node
        listed = {row["name"]: row["node"] for row in client.get("/processes").json()}
        assert listed == poll(lambda: cluster.running(NAMES), 10, "the placement")
        elsewhere = next(n for n, node in listed.items() if node != "n1")
        queued = client.post(f"/processes/{elsewhere}/inject", json={"payload": {}})
        assert queued.status_code == 202, queued.text  # into its inbox: any node takes it
    for node in cluster.nodes:
        assert node.stop() == 0, node.text()


def test_sigkill_of_the_owner_under_load(cluster: Cluster) -> None:
    """Kill the owner of p0 with SIGKILL while events stream in, KILLS times over (a new node
    starts as each one is killed): every process runs again within TTL + 2 s, and nothing
    acknowledged is lost, run twice or written twice."""
    start_pair(cluster)
    journal = Journal(cluster.dsn)
    load = Load(cluster, NAMES, threads=6).start()
    takeovers = []
    try:
        for kill in range(KILLS):
            poll(lambda k=kill: len(load.acked) >= 50 * (k + 1), 30, "events to flow")
            victim = poll(lambda: cluster.owners().get("p0"), 30, "an owner of p0")
            started = time.monotonic()
            victim.kill(signal.SIGKILL)
            victim.proc.wait(10)
            joining = cluster.start(f"n{kill + 3}", wait=False)  # the killed node's successor
            poll(lambda v=victim.node_id: (found := cluster.split(NAMES)) and
                 v not in found, TTL + 10, "every process running again")
            takeovers.append(time.monotonic() - started)
            cluster.wait_listening(joining)
            wait_split(cluster, 2)
        poll(lambda: len(load.acked) >= 50 * (KILLS + 1), 30, "events to flow")
    finally:
        load.stop()
    result = settle_and_check(cluster, load, journal)
    print(f"takeovers: {[round(t, 2) for t in takeovers]} s; {as_json(result)}")
    # Bounded by the lease (TTL) plus a renewal round; the margin is for a loaded CI box
    # (bench/cluster.py measures the takeover's speed).
    assert max(takeovers) <= TTL + 4.0, takeovers


def test_a_paused_owner_is_fenced_and_steps_down(cluster: Cluster) -> None:
    """SIGSTOP the owner of p0 past its lease, SIGCONT it: the other node took its processes
    over, the paused node's writes are refused and it steps down, saying so."""
    start_pair(cluster)
    journal = Journal(cluster.dsn)
    load = Load(cluster, NAMES, threads=6).start()
    try:
        poll(lambda: len(load.acked) >= 100, 30, "events to flow")
        victim = cluster.owners()["p0"]
        lost = sorted(name for name, node in cluster.owners().items() if node is victim)
        survivor = next(n for n in cluster.live() if n is not victim)
        victim.kill(signal.SIGSTOP)
        try:
            poll(lambda: cluster.split(NAMES) == {survivor.node_id: len(NAMES)},
                 TTL * 2 + 25, "the other node to run every process")  # CI load
            acked = len(load.acked)
            poll(lambda: len(load.acked) >= acked + 100, 30, "events on the survivor")
        finally:
            victim.kill(signal.SIGCONT)
        said = re.compile(r"stepped down from (p\d) \(epoch \d+\): (?!handed over|this node)")
        poll(lambda: set(said.findall(victim.text())) >= set(lost), 20,
             f"{victim.node_id} to step down from {lost}")
        wait_split(cluster, 2)  # it comes back and takes its share again
        poll(lambda: len(load.acked) >= acked + 200, 30, "events after it came back")
    finally:
        load.stop()
    result = settle_and_check(cluster, load, journal)
    refused = "the fence refused a write" in victim.text()
    print(f"fence refusal logged: {refused}; {as_json(result)}")
    assert "journal write refused under epoch" in victim.text() or refused, victim.text()


def test_postgresql_restarted_under_load(cluster: Cluster, pg_server: PgServer) -> None:
    """``pg_ctl stop -m immediate`` and a start while events stream in, twice: at once (the
    leases outlive it), then once every node gave its processes up (down past the lease): the
    nodes reconnect by themselves, take the processes back, and the counts are exact."""
    start_pair(cluster)
    journal = Journal(cluster.dsn)
    load = Load(cluster, NAMES, threads=6).start()
    gave_up = re.compile(r"stepped down from (p\d) \(epoch \d+\): could not renew")
    try:
        for long_outage in (False, True):
            acked = len(load.acked)
            poll(lambda a=acked: len(load.acked) >= a + 100, 30, "events to flow")
            pg_server.stop("immediate")
            if long_outage:  # until each process was given up by the node that ran it
                poll(lambda: {p for n in cluster.nodes for p in gave_up.findall(n.text())}
                     == set(NAMES), TTL + 10, "the nodes to give their processes up")
            acked = len(load.acked)
            pg_server.start()
            poll(lambda: len(cluster.running(NAMES) or {}) == len(NAMES), 30,
                 "every process running again")
            poll(lambda a=acked: len(load.acked) >= a + 200, 30,
                 "events after the restart")
    finally:
        load.stop()
        if not pg_server.running:
            pg_server.start()
    result = settle_and_check(cluster, load, journal)
    print(as_json(result))
    assert all(node.alive for node in cluster.nodes)
