"""Bursts against a real webhook: `promptui run` in a subprocess on a manifest with a webhook, a
small and the default queue, N concurrent POSTs. Prints JSON per queue size: answers by status,
events journaled as accepted, runs finished (distinct events, and any event run twice), dead
letters. The promise: every 202 runs exactly once, everything else got 503.

    .venv/bin/python bench/webhook_burst.py [--requests 2000] [--concurrency 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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

MANIFEST = """\
name: burst
model: {{provider: scripted, turns: [{{sleep: {work}}}, {{reply: ok}}]}}
triggers:
  - {{type: webhook, webhook_host: 127.0.0.1, webhook_port: {port}, webhook_path: /in}}
journal: {{level: checkpoint, path: {db}}}
config:
  queue_size: {queue}
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def journal_counts(db: Path) -> dict[str, Any]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        def ids(entry_type: str) -> list[str]:
            rows = conn.execute("SELECT data FROM entries WHERE process = 'burst' AND "
                                "entry_type = ?", (entry_type,)).fetchall()
            return [json.loads(data)["event_id"] for (data,) in rows]

        finished = ids("run_finished")
        (dead,) = conn.execute("SELECT COUNT(*) FROM dead_letters").fetchone()
        return {"accepted": ids("event_accepted"), "finished": finished, "dead": int(dead)}


async def wait_listening(port: int, proc: subprocess.Popen[bytes], within: float) -> None:
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(trust_env=False) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"promptui run exited with {proc.returncode}")
            try:
                if (await client.get(f"http://127.0.0.1:{port}/health")).status_code < 500:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise TimeoutError("the webhook did not start listening")


async def burst(queue: int, requests: int, concurrency: int, work: float) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="promptui-burst-"))
    port, db = free_port(), folder / "journal.db"
    (folder / "burst.agent").write_text(MANIFEST.format(port=port, db=db, queue=queue,
                                                        work=work))
    proc = subprocess.Popen([sys.executable, "-m", "promptui.cli", "run", str(folder)],
                            cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        await wait_listening(port, proc, 30)
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits,
                                     timeout=60, trust_env=False) as client:
            gate = asyncio.Semaphore(concurrency)

            async def send(n: int) -> tuple[int, str]:
                async with gate:
                    answer = await client.post("/in", json={"n": n})
                    event_id = answer.json().get("event_id", "") if answer.status_code == 202 \
                        else ""
                    return answer.status_code, event_id

            t0 = time.perf_counter()
            answers = await asyncio.gather(*(send(n) for n in range(requests)))
            seconds = time.perf_counter() - t0
        acked = [event_id for status, event_id in answers if status == 202]
        deadline = time.monotonic() + 120
        counts = journal_counts(db)
        while len(set(counts["finished"])) < len(acked) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            counts = journal_counts(db)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    finished = Counter(counts["finished"])
    return {
        "queue_size": queue, "requests": requests, "concurrency": concurrency,
        "burst_seconds": round(seconds, 2),
        "answers": {str(k): v for k, v in sorted(Counter(s for s, _ in answers).items())},
        "journaled_accepted": len(counts["accepted"]),
        "ran": len(finished), "ran_twice": sum(1 for n in finished.values() if n > 1),
        "acknowledged_not_run": len(set(acked) - set(finished)),
        "dead_letters": counts["dead"],
        "every_202_ran_once": set(acked) == set(finished) and all(
            n == 1 for n in finished.values()) and sorted(acked) == sorted(counts["accepted"]),
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--work", type=float, default=0.005,
                        help="seconds each run's model takes")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    for queue in (20, 1000):
        print(json.dumps(await burst(queue, args.requests, args.concurrency, args.work)),
              flush=True)


if __name__ == "__main__":
    asyncio.run(main())
