"""``promptui serve --cluster`` nodes as OS processes, and a load that injects through the
owners' APIs, for the scale-out tests and bench/cluster.py (which waits with ``polling.poll``).

Every node runs in a folder of its own (its discovery file and log), on port 0 of 127.0.0.1,
with one token for all. The manifests (``write_agents``) give each process a write tool that
appends ``<idempotency key> <event id> <item>`` to one ledger file shared by every node, so a
write executed twice shows. ``Journal`` reads the exact counts from PostgreSQL's tables.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from tests.helpers.cli import promptui_command
from tests.helpers.polling import poll

TOKEN = "cluster-test-token-0123456789abcdefghijklmnopq"
START_TIMEOUT = 60.0

AGENT = """\
version: "1.0"
name: {name}
instructions: Record the item.
model:
  provider: scripted
  turns:
    - tool_calls: [{{name: record, args: {{item: $payload.i}}}}]
    - reply: recorded
tools:
  - {{path: "cluster_ledger:record", effect: write}}
journal: {{level: checkpoint}}
config:
  concurrency: 4
  queue_size: 20000
  trigger_delivery: {{max_retries: 0}}
  max_consecutive_failures: 1000000
"""
LEDGER_TOOL = '''\
"""The write tool of the cluster tests: one ledger line per call, on every node."""

import os

from runtime_core import ToolContext


def record(item: str, ctx: ToolContext) -> str:
    """Append this call's idempotency key, event id and item to the shared ledger."""
    line = f"{ctx.idempotency_key} {ctx.event.event_id} {item}\\n".encode()
    fd = os.open(os.environ["CLUSTER_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:  # one write(2) of a short line: a kill cannot leave half a line behind
        os.write(fd, line)
    finally:
        os.close(fd)
    return "written"
'''


#: p0 of write_agents with a GitHub-signed webhook on a fixed port (``${HOOK_PORT}``, secret
#: ``${HOOK_SECRET}``), served by every node; ``{trigger_extra}`` and ``{config_extra}`` add
#: lines (indented) to the trigger and to the config.
HOOKED_AGENT = """\
version: "1.0"
name: p0
instructions: Record the item.
model:
  provider: scripted
  turns:
    - tool_calls: [{{name: record, args: {{item: $payload.i}}}}]
    - reply: recorded
tools:
  - {{path: "cluster_ledger:record", effect: write}}
triggers:
  - type: webhook
    webhook_path: /hooks/p0
    webhook_port: ${{HOOK_PORT}}
    signature_scheme: github
    hmac_secret: ${{HOOK_SECRET}}
{trigger_extra}journal: {{level: checkpoint}}
config:
  concurrency: 4
  trigger_delivery: {{max_retries: 0}}
{config_extra}"""


def hooked_agent(trigger_extra: str = "", config_extra: str = "") -> str:
    """HOOKED_AGENT with the extra trigger and config lines."""
    return HOOKED_AGENT.format(trigger_extra=trigger_extra, config_extra=config_extra)


async def age_node(dsn: str, node_id: str, seconds: float) -> None:
    """Make a node's last beat ``seconds`` old (by the database's clock)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("UPDATE cluster_nodes SET heartbeat_at = clock_timestamp() "
                           "- make_interval(secs => %s) WHERE node_id = %s", (seconds, node_id))


def write_agents(folder: Path, names: list[str]) -> Path:
    agents = folder / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    for name in names:
        (agents / f"{name}.agent").write_text(AGENT.format(name=name))
    (agents / "cluster_ledger.py").write_text(LEDGER_TOOL)
    return agents


@dataclass
class Node:
    """One ``promptui serve --cluster`` process."""

    node_id: str
    proc: subprocess.Popen[bytes]
    folder: Path
    log: Path
    url: str = ""

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def listening(self) -> str | None:
        """The URL its log says it listens on, once it does."""
        found = re.search(r"promptui serve: listening on (http://\S+)", self.text())
        return found.group(1) if found else None

    def client(self, timeout: float = 5.0) -> httpx.Client:
        return httpx.Client(base_url=f"{self.url}/api/v1", timeout=timeout,
                            headers={"Authorization": f"Bearer {TOKEN}"})

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive:
            self.proc.send_signal(sig)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait; SIGKILL after ``timeout`` (and -9 is returned)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused node must hear the SIGTERM
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            return -9


@dataclass
class Cluster:
    """Nodes on one DSN and one folder of manifests."""

    root: Path
    dsn: str
    agents: Path
    ledger: Path
    ttl: float = 2.0
    nodes: list[Node] = field(default_factory=list)
    extra_args: tuple[str, ...] = ()

    def start(self, node_id: str, *, wait: bool = True,
              env: dict[str, str] | None = None) -> Node:
        """A node; ``env``: more of its environment (a manifest's ``${VAR}``, say)."""
        folder = self.root / node_id
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"serve-{len(self.nodes)}.log"
        env = {**os.environ, "PROMPTUI_TOKEN": TOKEN, "CLUSTER_LEDGER": str(self.ledger),
               "PROMPTUI_DSN": self.dsn, **(env or {})}
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                [*promptui_command(), "serve", str(self.agents), "--port", "0",
                 "--cluster", "env", "--node-id", node_id, "--lease-ttl", str(self.ttl),
                 "--drain-timeout", "0", *self.extra_args],
                cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=sink)
        node = Node(node_id, proc, folder, log)
        self.nodes.append(node)
        if wait:
            self.wait_listening(node)
        return node

    def start_all(self, *node_ids: str, env: dict[str, str] | None = None) -> list[Node]:
        """Nodes started together (their imports overlap), each waited for until it listens."""
        nodes = [self.start(node_id, wait=False, env=env) for node_id in node_ids]
        for node in nodes:
            self.wait_listening(node)
        return nodes

    def wait_listening(self, node: Node) -> None:
        def listening() -> str | None:
            if not node.alive:
                raise RuntimeError(f"node {node.node_id} exited {node.proc.returncode}:\n"
                                   f"{node.text()}")
            return node.listening()

        node.url = poll(listening, START_TIMEOUT, f"node {node.node_id} to listen")

    def split(self, names: list[str]) -> Counter[str]:
        """How many of ``names`` run on each node (empty until all of them run)."""
        placed = self.running(names)
        return Counter(placed.values()) if placed else Counter()

    def live(self) -> list[Node]:
        """The nodes running and listening (a node still starting once it says where)."""
        for node in self.nodes:
            if not node.url and node.alive:
                node.url = node.listening() or ""
        return [n for n in self.nodes if n.alive and n.url]

    def close(self) -> None:
        for node in self.nodes:
            if node.alive:
                node.stop(10)

    # -- what the cluster says --------------------------------------------------------------------
    def nodes_view(self, via: Node | None = None) -> list[dict[str, Any]] | None:
        for node in [via] if via is not None else self.live():
            try:
                with node.client(2.0) as client:
                    answer = client.get("/cluster/nodes")
                if answer.status_code == 200:
                    rows: list[dict[str, Any]] = answer.json()
                    return rows
            except httpx.HTTPError:
                continue
        return None

    def owners(self) -> dict[str, Node]:
        """process -> the live node (of ours) holding its lease."""
        view = self.nodes_view() or []
        by_id = {n.node_id: n for n in self.live()}
        return {process: by_id[row["node_id"]] for row in view if row["live"]
                and row["node_id"] in by_id for process in row["processes"]}

    def running(self, names: list[str]) -> dict[str, str] | None:
        """process -> node id once every one of ``names`` runs on a live node; else None."""
        owners = self.owners()
        placed: dict[str, str] = {}
        for name in names:
            node = owners.get(name)
            if node is None:
                return None
            try:
                with node.client(2.0) as client:
                    status = client.get(f"/processes/{name}")
            except httpx.HTTPError:
                return None
            if status.status_code != 200 or status.json().get("state") != "running" or \
                    status.json().get("node") != node.node_id:
                return None
            placed[name] = node.node_id
        return placed


class Load:
    """Threads injecting ``{"i": ...}`` events through each process's owner, re-finding the
    owner whenever a node refuses or does not answer. Only a 202 is an acknowledgement."""

    REFRESH = 0.1  # seconds between two look-ups of the owners

    def __init__(self, cluster: Cluster, names: list[str], *, total: int | None = None,
                 threads: int = 8, timeout: float = 3.0) -> None:
        self.cluster, self.names, self.total = cluster, names, total
        self.timeout = timeout
        self.acked: dict[str, str] = {}  # event id -> item
        self.refusals = Counter[str]()
        self._next = 0
        self._lock = threading.Lock()
        self._owners: dict[str, Node] = {}
        self._owners_lock = threading.Lock()
        self._read_at = 0.0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._work, daemon=True,
                                          name=f"load-{n}") for n in range(threads)]

    def start(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in self._threads):
            self.stop()
            raise TimeoutError(f"the load did not finish within {timeout:g} s "
                               f"({len(self.acked)} acknowledged; refusals {self.refusals})")

    def _take(self) -> int | None:
        with self._lock:
            if self.total is not None and self._next >= self.total:
                return None
            self._next += 1
            return self._next - 1

    def _owner(self, name: str, fresh: bool) -> Node | None:
        with self._owners_lock:  # one look-up at a time, at most every REFRESH seconds
            stale = time.monotonic() - self._read_at > self.REFRESH
            if name not in self._owners or (fresh and stale):
                self._owners = self.cluster.owners()
                self._read_at = time.monotonic()
            return self._owners.get(name)

    def _work(self) -> None:
        clients: dict[str, httpx.Client] = {}
        try:
            while not self._stop.is_set():
                i = self._take()
                if i is None:
                    return
                self._send(i, clients)
        finally:
            for client in clients.values():
                client.close()

    def _send(self, i: int, clients: dict[str, httpx.Client]) -> None:
        name, fresh = self.names[i % len(self.names)], False
        while not self._stop.is_set():
            node = self._owner(name, fresh)
            fresh = True
            if node is None:
                self.refusals["no owner"] += 1
                self._stop.wait(0.05)  # between polls for a new owner
                continue
            client = clients.get(node.url)
            if client is None:
                client = clients[node.url] = node.client(self.timeout)
            try:
                answer = client.post(f"/processes/{name}/inject",
                                     json={"payload": {"i": f"{name}-{i}"}})
            except httpx.HTTPError as exc:
                self.refusals[type(exc).__name__] += 1
                clients.pop(node.url).close()
                continue
            if answer.status_code == 202:
                with self._lock:
                    self.acked[answer.json()["event_id"]] = f"{name}-{i}"
                return
            self.refusals[str(answer.status_code)] += 1
            self._stop.wait(0.02)  # refused (moving, or the journal catching up): try again


class Journal:
    """Exact counts from the cluster's PostgreSQL."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, connect_timeout=5) as conn:
            return [tuple(r) for r in conn.execute(sql, params).fetchall()]  # type: ignore

    def finished(self) -> Counter[str]:
        """event id -> how many succeeded run ends the journal holds for it."""
        return Counter({str(e): int(n) for e, n in self.rows(
            "SELECT data::json->>'event_id', count(*) FROM entries WHERE entry_type = "
            "'run_finished' AND data::json->>'state' = 'succeeded' GROUP BY 1")})

    def accepted(self) -> set[str]:
        return {str(r[0]) for r in self.rows(
            "SELECT data::json->>'event_id' FROM entries WHERE entry_type = 'event_accepted'")}

    def pending(self) -> int:
        return int(self.rows("SELECT count(*) FROM pending")[0][0])

    def in_inbox(self) -> int:
        """Events a non-owner took (202) that no owner has journaled yet."""
        return int(self.rows("SELECT count(*) FROM cluster_inbox")[0][0])

    def trail(self, event_id: str) -> list[str]:
        """What the journal holds of one event and its runs: 'process seq epoch type state'
        lines, for a failure message."""
        return [" ".join(str(c) for c in row) for row in self.rows(
            "SELECT process, seq, epoch, entry_type, data::json->>'state' FROM entries WHERE "
            "data::json->>'event_id' = %s OR run_id IN (SELECT run_id FROM entries WHERE "
            "data::json->>'event_id' = %s AND run_id IS NOT NULL) ORDER BY process, seq",
            (event_id, event_id))]

    def epochs_in_order(self) -> dict[str, list[int]]:
        """process -> the epochs its entries were written under, in seq order, runs of one
        epoch collapsed (fencing holds when every list only grows)."""
        found: dict[str, list[int]] = {}
        for process, epoch in self.rows("SELECT process, epoch FROM entries ORDER BY "
                                        "process, seq"):
            seen = found.setdefault(str(process), [])
            if epoch is not None and (not seen or seen[-1] != epoch):
                seen.append(int(epoch))
        return found


def ledger_lines(path: Path) -> list[tuple[str, str, str]]:
    if not path.exists():
        return []
    return [tuple(line.split(" ", 2)) for line in  # type: ignore[misc]
            path.read_text().splitlines() if line.strip()]


def reconcile_waiting(cluster: Cluster, names: list[str], ledger: Path,
                      not_applied: set[str] | None = None,
                      refused: dict[str, str] | None = None) -> int:
    """Settle every run left waiting on a write whose outcome is unknown (its node died inside
    the write) the way an operator would: applied when the ledger holds its idempotency key,
    else not applied (then the run goes on without it: its event id is added to
    ``not_applied``). How many it settled; ``refused`` gets the last refusal of each run
    (run id -> the answer's status and text), for a failure message."""
    keys = {key for key, _, _ in ledger_lines(ledger)}
    settled = 0
    for name, node in cluster.owners().items():
        if name not in names:
            continue
        try:
            settled += _reconcile_on(node, name, keys, not_applied, refused)
        except httpx.HTTPError:  # a node moving or busy: the caller polls, it comes again
            continue
    return settled


def _reconcile_on(node: Node, name: str, keys: set[str], not_applied: set[str] | None,
                  refused: dict[str, str] | None) -> int:
    settled = 0
    with node.client(10.0) as client:
        runs = client.get(f"/processes/{name}/runs", params={"state": "waiting"})
        if runs.status_code != 200:
            return 0
        for run in runs.json():
            detail = client.get(f"/processes/{name}/runs/{run['run_id']}/waiting").json()
            applied = detail.get("idempotency_key") in keys
            answer = client.post(f"/processes/{name}/runs/{run['run_id']}/reconcile",
                                 json={"outcome": "applied" if applied else "not_applied",
                                       "result": "written" if applied else None,
                                       "note": "checked the ledger"})
            settled += answer.status_code == 200
            if answer.status_code != 200 and refused is not None:
                refused[f"{name}/{run['run_id']}@{node.node_id}"] = \
                    f"{answer.status_code} {answer.text[:300]}"
            if answer.status_code == 200 and not applied and not_applied is not None:
                not_applied.add(run["event_id"])
    return settled


def summary(cluster: Cluster, load: Load, journal: Journal) -> dict[str, Any]:
    finished = journal.finished()
    lines = ledger_lines(cluster.ledger)
    accepted = journal.accepted()
    stuck = sorted(accepted - set(finished))[:5]
    return {"acked": len(load.acked), "accepted": len(accepted),
            "finished": len(finished), "ledger": len(lines),
            "refusals": dict(load.refusals), "nodes": [n.node_id for n in cluster.nodes],
            "pending": journal.pending(), "in_inbox": journal.in_inbox(),
            "unfinished": {event: journal.trail(event) for event in stuck}}


def dump_logs(cluster: Cluster) -> str:
    return "\n".join(f"--- {n.node_id} ({n.log}):\n{n.text()[-6000:]}" for n in cluster.nodes)


def as_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True)
