"""Scale-out on one PostgreSQL: events/s with 1, 2 and 3 ``promptui serve --cluster`` nodes, and
how long a takeover takes when the owner is SIGKILLed.

Throughput: for each node count, a fresh schema, PROCESSES processes (each run calls a write
tool that appends to a ledger, so an event costs three durable commits: the tool's intent, its
result and the run's end), the nodes started and split evenly; then EVENTS events are injected
through each process's owner (``POST /api/v1/processes/{name}/inject``) by CLIENTS concurrent
HTTP clients, and the clock stops when the journal holds a durable ``run_finished`` for every
acknowledged event. events/s = events / (first inject to last durable run end).

Takeover: 2 nodes under a light load (4 processes, 4 HTTP clients injecting all the time),
KILLS rounds of: SIGKILL the owner of p0 (a new node starts at once, as a supervisor would
restart it), then SIGSTOP the owner of p0 (SIGCONT once the takeover is seen: it must step
down by itself). Each is timed from the signal to the first run of p0 on its new owner (the
first run entry in the journal under a later lease epoch). Afterwards the journal is checked:
every acknowledged event finished exactly once, no write ran twice (runs a takeover left
waiting on a write are reconciled against the ledger first).

Prints JSON. Usage:
    python bench/cluster.py [--events 3000] [--processes 6] [--clients 64] [--nodes 1,2,3]
                            [--kills 6] [--ttl 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.cluster import (  # noqa: E402
    TOKEN,
    Cluster,
    Journal,
    Load,
    ledger_lines,
    reconcile_waiting,
    write_agents,
)
from tests.helpers.polling import poll as wait_until  # noqa: E402
from tests.helpers.postgres import PgServer  # noqa: E402


class Connection:
    """One keep-alive HTTP/1.1 connection, spoken by hand: on a 2-core box a full HTTP client
    would take the CPU the nodes need (httpx spent more per request than a node did)."""

    def __init__(self, url: str) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.host, self.port = host, int(port)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(b"POST %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n"
                          b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                          % (path.encode(), self.host.encode(), self.port, TOKEN.encode(),
                             len(body), body))
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def inject(targets: dict[str, str], names: list[str], events: int, clients: int
                 ) -> tuple[int, int]:
    """``events`` injects spread over ``names``, each to its owner's URL by ``clients``
    concurrent connections; (acknowledged, refused and sent again)."""
    acked = retries = 0
    next_i = 0

    async def worker() -> None:
        nonlocal acked, retries, next_i
        connections = {url: Connection(url) for url in set(targets.values())}
        try:
            while next_i < events:
                i, next_i = next_i, next_i + 1
                name = names[i % len(names)]
                body = json.dumps({"payload": {"i": f"{name}-{i}"}}).encode()
                while True:
                    status, _ = await connections[targets[name]].post(
                        f"/api/v1/processes/{name}/inject", body)
                    if status == 202:
                        acked += 1
                        break
                    retries += 1
                    await asyncio.sleep(0.01)
        finally:
            for connection in connections.values():
                connection.close()

    await asyncio.gather(*(worker() for _ in range(clients)))
    return acked, retries


def run_ends(journal: Journal) -> int:
    return int(journal.rows("SELECT count(*) FROM entries WHERE entry_type = 'run_finished'")
               [0][0])


def throughput(server: PgServer, root: Path, nodes: int, args: argparse.Namespace
               ) -> dict[str, Any]:
    dsn = server.create_schema()
    names = [f"p{i}" for i in range(args.processes)]
    folder = root / f"throughput-{nodes}"
    cluster = Cluster(folder, dsn, write_agents(folder, names), folder / "ledger.txt",
                      ttl=args.ttl)
    try:
        started = [cluster.start(f"n{k + 1}", wait=False) for k in range(nodes)]
        for node in started:
            cluster.wait_listening(node)
        even = sorted([args.processes // nodes + (k < args.processes % nodes)
                       for k in range(nodes)])
        wait_until(lambda: sorted(cluster.split(names).values()) == even, 60, "an even split")
        targets = {name: node.url for name, node in cluster.owners().items()}
        journal = Journal(dsn)
        began = time.perf_counter()
        acked, retries = asyncio.run(inject(targets, names, args.events, args.clients))
        injected = time.perf_counter() - began
        wait_until(lambda: run_ends(journal) >= acked, 300, "every run's end")
        took = time.perf_counter() - began
        ends = run_ends(journal)
        return {"nodes": nodes, "processes": args.processes, "events": acked,
                "events_per_s": round(acked / took, 1),
                "inject_per_s": round(acked / injected, 1), "seconds": round(took, 2),
                "run_ends": ends, "retries": retries, "clients": args.clients}
    finally:
        for node in cluster.nodes:
            node.stop()


def first_run_after(journal: Journal, process: str, epoch: int) -> float | None:
    """The wall-clock time of the first run entry ``process``'s journal holds under a later
    epoch than ``epoch`` (a run on the new owner), or None."""
    rows = journal.rows("SELECT min(ts) FROM entries WHERE process = %s AND epoch > %s AND "
                        "run_id IS NOT NULL", (process, epoch))
    return None if not rows or rows[0][0] is None else float(rows[0][0])


def lease_epoch(journal: Journal, process: str) -> int:
    return int(journal.rows("SELECT epoch FROM cluster_leases WHERE process = %s",
                            (process,))[0][0])


def takeover_once(cluster: Cluster, journal: Journal, names: list[str], sig: int, index: int,
                  args: argparse.Namespace) -> float:
    """Signal the owner of p0 and time until the first run of p0 on its new owner. A killed
    owner is replaced by a new node at once (as a supervisor would); a stopped one is woken
    once the takeover is seen, and must step down by itself."""
    victim = cluster.owners()["p0"]
    epoch = lease_epoch(journal, "p0")
    began = time.time()
    victim.kill(sig)
    joining = None
    if sig == signal.SIGKILL:
        victim.proc.wait(10)
        joining = cluster.start(f"n{index + 3}", wait=False)
    ran_at = wait_until(lambda: first_run_after(journal, "p0", epoch), args.ttl + 30,
                        "a run of p0 on its new owner", interval=0.05)
    if sig == signal.SIGSTOP:
        victim.kill(signal.SIGCONT)
    else:
        assert joining is not None
        cluster.wait_listening(joining)
    wait_until(lambda: sorted(cluster.split(names).values()) == [2, 2], 60, "a 2/2 split")
    return float(ran_at) - began


def takeovers(server: PgServer, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    dsn = server.create_schema()
    names = [f"p{i}" for i in range(4)]
    folder = root / "takeover"
    cluster = Cluster(folder, dsn, write_agents(folder, names), folder / "ledger.txt",
                      ttl=args.ttl)
    times: dict[str, list[float]] = {"SIGKILL": [], "SIGSTOP": []}
    journal = Journal(dsn)
    try:
        for node_id in ("n1", "n2"):
            cluster.start(node_id)
        wait_until(lambda: sorted(cluster.split(names).values()) == [2, 2], 60, "a 2/2 split")
        load = Load(cluster, names, threads=4).start()
        try:
            for kill in range(args.kills):
                for name, sig in (("SIGKILL", signal.SIGKILL), ("SIGSTOP", signal.SIGSTOP)):
                    times[name].append(takeover_once(cluster, journal, names, sig,
                                                     kill, args))
        finally:
            load.stop()
        not_applied: set[str] = set()

        def settled() -> bool:
            reconcile_waiting(cluster, names, cluster.ledger, not_applied)
            return journal.accepted() <= set(journal.finished()) and not journal.pending()

        wait_until(settled, 180, "every accepted event to finish")
        finished = journal.finished()
        keys = Counter(key for key, _, _ in ledger_lines(cluster.ledger))
        figures: dict[str, Any] = {"kills_each": args.kills, "ttl_s": args.ttl}
        for name, taken in times.items():
            figures[name] = {"median_s": round(statistics.median(taken), 2),
                             "max_s": round(max(taken), 2),
                             "within_ttl_plus_1": sum(t <= args.ttl + 1 for t in taken),
                             "times_s": [round(t, 2) for t in taken]}
        return {**figures, "acked": len(load.acked), "accepted": len(journal.accepted()),
                "lost_acked": len(set(load.acked) - set(finished)),
                "ran_twice": sum(1 for n in finished.values() if n > 1),
                "writes_twice": sum(1 for n in keys.values() if n > 1),
                "reconciled_not_applied": len(not_applied)}
    finally:
        for node in cluster.nodes:
            node.kill(signal.SIGCONT)  # a node left stopped would not stop
            node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--nodes", default="1,2,3")
    parser.add_argument("--kills", type=int, default=6,
                        help="takeover rounds (each a SIGKILL and a SIGSTOP); 0: none")
    parser.add_argument("--ttl", type=float, default=10.0, help="the lease TTL, seconds")
    args = parser.parse_args()
    server = PgServer()
    root = Path(tempfile.mkdtemp(prefix="promptui-cluster-bench-"))
    try:
        result: dict[str, Any] = {"throughput": [
            throughput(server, root, int(n), args) for n in args.nodes.split(",") if n]}
        if args.kills:
            result["takeover"] = takeovers(server, root, args)
    finally:
        server.cleanup()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
