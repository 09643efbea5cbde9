"""Every node of a ``promptui serve --cluster`` shows the whole cluster's processes with their
real counts: GET /processes and ``promptui status`` of each node give, for every process, the
node that runs it, its queue, dead letters and runs waiting for an operator as its owner counts
them (published on the status board), and every node lists every waiting run. A process whose
owner went silent keeps its last figures, marked with no node and how old they are."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.cli import run_promptui
from tests.helpers.cluster import TOKEN, Cluster, Node
from tests.helpers.polling import poll

pytestmark = pytest.mark.slow

TTL = 2.0
NAMES = ["p0", "p1", "p2", "p3"]
#: process -> (runs left waiting for evidence, events dead-lettered, events queued)
PLAN = {"p0": (1, 1, 1), "p1": (2, 2, 0), "p2": (3, 0, 2), "p3": (4, 1, 3)}
VIEW_TIMEOUT = 30.0

# A reply of "" leaves the run waiting for an operator (its completion contract wants a
# solution); a raise fails it and, with no retries, dead-letters its event.
AGENT = """\
version: "1.0"
name: {name}
instructions: Do as the payload says.
model:
  provider: scripted
  select: {{by_payload_field: kind}}
  scripts:
    wait: [{{reply: ""}}]
    fail: [{{raise: the target refused the connection}}]
  turns: [{{reply: done}}]
profile:
  name: judge
  version: "1"
  completion: {{evaluator: solution}}
journal: {{level: checkpoint}}
config:
  concurrency: 8
  trigger_delivery: {{max_retries: 0}}
  max_consecutive_failures: 1000
"""


@pytest.fixture
def cluster(tmp_path: Path, pg_dsn: str) -> Iterator[Cluster]:
    agents = tmp_path / "agents"
    agents.mkdir()
    for name in NAMES:
        (agents / f"{name}.agent").write_text(AGENT.format(name=name))
    # at most two processes a node: a paused node's processes stay between owners
    nodes = Cluster(tmp_path, pg_dsn, agents, tmp_path / "ledger.txt", ttl=TTL,
                    extra_args=("--max-processes", "2"))
    try:
        yield nodes
    finally:
        nodes.close()


def start_two(cluster: Cluster) -> tuple[Node, Node]:
    first, second = cluster.start_all("n1", "n2")
    poll(lambda: sorted(cluster.split(NAMES).values()) == [2, 2], 60, "a 2/2 split")
    return first, second


def post(node: Node, path: str, body: Any = None) -> httpx.Response:
    with node.client(10.0) as client:
        answer = client.post(path, json=body)
    assert answer.status_code < 300, f"{path} on {node.node_id}: {answer.text}"
    return answer


def get(node: Node, path: str) -> Any:
    with node.client(10.0) as client:
        answer = client.get(path)
    assert answer.status_code == 200, f"{path} on {node.node_id}: {answer.text}"
    return answer.json()


def load_the_cluster(cluster: Cluster) -> tuple[dict[str, str], dict[str, set[str]]]:
    """Each process gets its PLAN through its owner: runs left waiting, dead letters, then
    it is suspended and events queue. (process -> its node, process -> its waiting runs)."""
    owners = cluster.owners()
    for name, (waiting, dead, _) in PLAN.items():
        for kind, count in (("wait", waiting), ("fail", dead)):
            for i in range(count):
                post(owners[name], f"/processes/{name}/inject",
                     {"payload": {"kind": kind, "i": i}})
    for name, (waiting, dead, queued) in PLAN.items():
        poll(lambda n=name, w=waiting, d=dead: (s := get(owners[n], f"/processes/{n}"))[
            "waiting_runs"] == w and s["dead_letter_count"] == d, 30,
             f"{name}'s runs to wait and its letters to die")
        post(owners[name], f"/processes/{name}/suspend")
        for i in range(queued):
            post(owners[name], f"/processes/{name}/inject", {"payload": {"i": i}})
        poll(lambda n=name, q=queued: get(owners[n], f"/processes/{n}")["queue_size"] == q,
             30, f"{name}'s events to queue")
    waiting = {name: {run["run_id"] for run in get(
        owners[name], f"/processes/{name}/runs?state=waiting")} for name in NAMES}
    assert sum(len(runs) for runs in waiting.values()) == 10
    return {name: node.node_id for name, node in owners.items()}, waiting


def expected(nodes: dict[str, str], waiting: dict[str, set[str]]) -> dict[str, Any]:
    return {name: {"node": nodes[name], "state": "suspended", "queue_depth": PLAN[name][2],
                   "dead_letters": PLAN[name][1], "waiting_runs": PLAN[name][0],
                   "waiting": waiting[name], "figures_known": True} for name in NAMES}


def shown(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {row["name"]: {"node": row["node"], "state": row["state"],
                          "queue_depth": row["queue_depth"], "dead_letters": row["dead_letters"],
                          "waiting_runs": row["waiting_runs"],
                          "waiting": {run["run_id"] for run in row["waiting"]},
                          "figures_known": row["figures_known"]} for row in rows}


def status_json(node: Node) -> dict[str, Any]:
    done = run_promptui("status", "--json", "--url", node.url, "--token", TOKEN, timeout=60)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def test_every_node_shows_every_process_with_its_real_counts(cluster: Cluster) -> None:
    start_two(cluster)
    nodes, waiting = load_the_cluster(cluster)
    want = expected(nodes, waiting)
    for node in cluster.nodes:  # the API of each node: the whole cluster, real counts
        poll(lambda n=node: shown(get(n, "/processes")) == want, VIEW_TIMEOUT,
             f"GET /processes of {node.node_id} to show every process's real counts")
    for node in cluster.nodes:  # promptui status of each node: the same
        assert shown(status_json(node)["processes"]) == want
        done = run_promptui("status", "--url", node.url, "--token", TOKEN, "--wide", timeout=60)
        assert done.returncode == 0, done.stderr
        text = done.stdout
        assert "10 run(s) waiting for an operator" in text, text
        for name in NAMES:
            for run_id in waiting[name]:
                assert f"{name} @{nodes[name]}  {run_id[:8]}" in text, text
        # "suspended (operator since 2026-12-06 23:14:15)": the since is checked elsewhere
        table = re.sub(r" since [0-9-]+ [0-9:]+\)", ")",
                       text.split("run(s) waiting for an operator")[0])
        rows = {line.split()[0]: line.split() for line in table.splitlines()
                if line.split() and line.split()[0] in NAMES}
        for name, (wait, dead, queued) in PLAN.items():
            # process node state (why) queue runs fails dead wait ...
            assert rows[name][1:5] == [nodes[name], "suspended", "(operator)",
                                       f"{queued}/1000"], text
            assert rows[name][7:9] == [str(dead), str(wait)], text


def test_a_silent_owner_s_processes_keep_their_last_figures_with_no_node(
        cluster: Cluster) -> None:
    first, second = start_two(cluster)
    nodes, waiting = load_the_cluster(cluster)
    want = expected(nodes, waiting)
    poll(lambda: shown(get(first, "/processes")) == want, VIEW_TIMEOUT,
         "n1's view of every process")
    paused = [name for name in NAMES if nodes[name] == second.node_id]
    second.kill(signal.SIGSTOP)  # silent: its leases run out, n1 has no room to take them
    try:
        def silent() -> dict[str, Any] | None:
            rows = {row["name"]: row for row in get(first, "/processes")}
            old = all(rows[n]["node"] is None and (rows[n]["as_of_age_s"] or 0) >= 5
                      for n in paused)
            return rows if old else None

        rows = poll(silent, VIEW_TIMEOUT, "n2's processes to be between owners, figures old")
        for name in paused:  # the last figures n2 published, marked with no node
            assert shown([rows[name]])[name] == {**want[name], "node": None}
        for name in set(NAMES) - set(paused):
            assert rows[name]["node"] == first.node_id and rows[name]["as_of_age_s"] is None
        done = run_promptui("status", "--url", first.url, "--token", TOKEN, "--wide", timeout=60)
        assert done.returncode == 0, done.stderr
        assert "as of" in done.stdout.splitlines()[1], done.stdout  # the column's heading
        for name in NAMES:  # process node "as of" state ...
            line = next(line.split() for line in done.stdout.splitlines()
                        if line.split() and line.split()[0] == name)
            if name in paused:
                assert line[1] == "-" and line[2].endswith("s") and line[3] == "ago", line
            else:
                assert line[1:4] == [first.node_id, "now", "suspended"], line
    finally:
        second.kill(signal.SIGCONT)
