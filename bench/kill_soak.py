"""Kill soak: `promptui serve` under steady webhook load, SIGKILLed again and again.

A manifest with a webhook trigger and a write tool that appends one line per call to a ledger
(the payload's number and the call's idempotency key). Senders POST numbered payloads all the
time; between kills the server runs for a random 0.3-1.5 s. After the last kill a final server
runs until its queue is empty, then stops on SIGTERM. Printed as JSON:

* acknowledged: distinct events a sender got 202 for;
* journaled: of those, the events the journal holds as accepted (must be all);
* ran: of those, events whose run finished, or that wait for an operator (a write the kill
  left unknown: never dispatched again by itself);
* lost: acknowledged and neither ran nor waits (must be 0);
* duplicate_writes: ledger numbers written more than once (must be 0).

    .venv/bin/python bench/kill_soak.py [--kills 40] [--senders 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = """\
version: "1.0"
name: soak
instructions: Book each payment once.
model:
  provider: scripted
  turns:
    - tool_calls: [{{name: book, args: {{n: $payload.n}}}}]
    - reply: booked
tools:
  - {{path: "soak_tools:book", effect: write}}
triggers:
  - {{type: webhook, webhook_host: 127.0.0.1, webhook_port: {port}, webhook_path: /in}}
journal: {{level: checkpoint}}
"""
TOOLS = '''\
import os
from pathlib import Path

from runtime_core import ToolContext


def book(n: int, ctx: ToolContext) -> str:
    """Append the payment's number and the call's idempotency key: one line per execution."""
    with Path(os.environ["SOAK_LEDGER"]).open("a", encoding="utf-8") as ledger:
        ledger.write(f"{n} {ctx.idempotency_key}\\n")
        ledger.flush()
        os.fsync(ledger.fileno())
    return f"booked {n}"
'''


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def start(folder: Path, agents: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(
            [str(Path(sys.executable).with_name("promptui")), "serve", str(agents), "--port",
             "0", "--journal", str(folder / "journal.db")],
            cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=sink)


def wait_ready(proc: subprocess.Popen[bytes], log: Path, seen: int, within: float = 60) -> str:
    """The URL of the newest 'listening' line (the log holds every incarnation's)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = re.findall(r"listening on (http://\S+)", log.read_text(errors="replace"))
        if len(found) > seen:
            return found[-1]
        if proc.poll() is not None:
            raise SystemExit(f"promptui serve exited {proc.returncode}:\n{log.read_text()}")
        time.sleep(0.02)
    raise SystemExit("promptui serve did not start")


class Senders:
    def __init__(self, port: int, count: int) -> None:
        self.url = f"http://127.0.0.1:{port}/in"
        self.count = count
        self.acknowledged: dict[str, int] = {}  # event id -> payload number
        self.answers: Counter[str] = Counter()
        self.next = 0
        self.stop = False

    async def run(self) -> None:
        limits = httpx.Limits(max_connections=self.count)
        async with httpx.AsyncClient(timeout=5, trust_env=False, limits=limits) as client:
            await asyncio.gather(*(self._send(client) for _ in range(self.count)))

    async def _send(self, client: httpx.AsyncClient) -> None:
        while not self.stop:
            n = self.next
            self.next += 1
            try:
                answer = await client.post(self.url, json={"n": n})
            except httpx.HTTPError:
                self.answers["no answer"] += 1  # the server is down: never acknowledged
                await asyncio.sleep(0.05)
                continue
            self.answers[str(answer.status_code)] += 1
            if answer.status_code == 202:
                self.acknowledged[answer.json()["event_id"]] = n
            await asyncio.sleep(0.01)


def read_journal(db: Path) -> dict[str, Any]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        def ids(entry_type: str, where: str = "") -> set[str]:
            rows = conn.execute("SELECT data FROM entries WHERE process = 'soak' AND "
                                f"entry_type = ? {where}", (entry_type,)).fetchall()
            return {json.loads(data)["event_id"] for (data,) in rows}

        accepted = ids("event_accepted")
        done = {json.loads(d)["event_id"] for (d,) in conn.execute(
            "SELECT data FROM entries WHERE process = 'soak' AND entry_type = 'run_finished'")
            if json.loads(d).get("event_done", json.loads(d).get("state") == "succeeded")}
        waiting = {e for (e,) in conn.execute(
            "SELECT event_id FROM open_runs WHERE process = 'soak' AND state = 'waiting'")}
        pending = {e for (e,) in conn.execute(
            "SELECT event_id FROM pending WHERE process = 'soak'")}
        dead = {e for (e,) in conn.execute(
            "SELECT event_id FROM dead_letters WHERE process = 'soak'")}
    return {"accepted": accepted, "done": done, "waiting": waiting, "pending": pending,
            "dead": dead}


async def soak(kills: int, senders_count: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    folder = Path(tempfile.mkdtemp(prefix="promptui-soak-"))
    agents = folder / "agents"
    agents.mkdir()
    port = free_port()
    (agents / "soak.agent").write_text(MANIFEST.format(port=port))
    (agents / "soak_tools.py").write_text(TOOLS)
    ledger = folder / "ledger.txt"
    env = {**os.environ, "SOAK_LEDGER": str(ledger), "PYTHONPATH": str(ROOT)}
    env.pop("PROMPTUI_TOKEN", None)
    log = folder / "serve.log"
    senders = Senders(port, senders_count)
    load = asyncio.create_task(senders.run())
    began = time.monotonic()
    started = 0
    for _ in range(kills):
        proc = start(folder, agents, env, log)
        await asyncio.to_thread(wait_ready, proc, log, started)
        started += 1
        await asyncio.sleep(rng.uniform(0.3, 1.5))
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait)
    senders.stop = True
    await load
    proc = start(folder, agents, env, log)  # the last start: let it finish what is queued
    url = await asyncio.to_thread(wait_ready, proc, log, started)
    token = (folder / ".promptui" / "token").read_text().strip()
    async with httpx.AsyncClient(base_url=f"{url}/api/v1", trust_env=False,
                                 headers={"Authorization": f"Bearer {token}"}) as api:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status = (await api.get("/processes/soak")).json()
            if status["queue_size"] == 0 and status["active_runs"] == 0:
                break
            await asyncio.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    await asyncio.to_thread(proc.wait, 60)
    journal = read_journal(folder / "journal.db")
    acked = set(senders.acknowledged)
    ran = acked & (journal["done"] | journal["waiting"])
    lines = ledger.read_text().split("\n") if ledger.exists() else []
    written = Counter(line.split()[0] for line in lines if line.strip())
    return {
        "kills": kills,
        "seconds": round(time.monotonic() - began, 1),
        "answers": dict(senders.answers),
        "acknowledged": len(acked),
        "journaled": len(acked & journal["accepted"]),
        "ran": len(ran),
        "finished": len(acked & journal["done"]),
        "waiting_for_operator": len(acked & journal["waiting"]),
        "still_pending": len(acked & journal["pending"]),
        "dead_letters": len(acked & journal["dead"]),
        "lost": len(acked - ran - journal["pending"] - journal["dead"]),
        "writes": sum(written.values()),
        "duplicate_writes": sum(1 for count in written.values() if count > 1),
        "serve_exit": proc.returncode,
        "folder": str(folder),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=40)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(soak(args.kills, args.senders, args.seed)), indent=2))


if __name__ == "__main__":
    main()
