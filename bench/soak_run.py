"""Stop-and-kill soak of `promptui run` under signed webhook load (issue 31).

A manifest with a GitHub-signed webhook trigger (a delivery id per event) and a write tool that
appends one ledger line per execution: the payload's number and the call's idempotency key
(`run_id:step`), so a write made twice shows. Sender threads post numbered events all the time,
each under its own delivery id; one that gets no answer, a 503 or a connection error posts it
again later under the same id, as GitHub redelivers. `promptui run` is started again and again
on the same journal and each incarnation ends by a stop (SIGTERM, SIGINT, or the end of
--seconds, in turn) or a SIGKILL, alternately. After the last one a final `promptui run`
redelivers what was never acknowledged, runs until its queue is empty and stops on SIGTERM.
Printed as one JSON object:

* acknowledged: distinct events a sender got 202 (or, for a redelivery, 200 "duplicate": the
  first try was accepted, its answer lost) for; acknowledged_202: those that got a 202;
* ran_once: acknowledged events the ledger holds exactly once (not waiting); ran_twice: more
  than once (must be 0);
* waiting_for_operator: acknowledged events whose run waits for an operator (a write a SIGKILL
  left unknown: never run again by itself), and how many of those did write before the kill
  (an operator reconciles them "applied"); ran_once + waiting_for_operator = acknowledged;
* never_ran: acknowledged, no ledger line, not waiting (must be 0);
* dead_letters_process_stopped: dead letters "process stopped" (must be 0); dead_letters: all;
* duplicate_writes: idempotency keys or numbers written more than once (must be 0);
* kept_at_stops: the closing lines' "N queued event(s) kept" summed; stop_exit_codes.

    .venv/bin/python bench/soak_run.py [--stops 15] [--kills 15] [--senders 4]
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
SECRET = "soak-run-webhook-secret"
MANIFEST = """\
version: "1.0"
name: books
instructions: Book each payment once.
model:
  provider: scripted
  turns:
    - tool_calls: [{{name: book, args: {{n: $payload.n}}}}]
    - reply: booked
tools:
  - {{path: "soak_tools:book", effect: write}}
triggers:
  - type: webhook
    webhook_host: 127.0.0.1
    webhook_port: {port}
    webhook_path: /in
    signature_scheme: github
    hmac_secret: ${{SOAK_SECRET}}
journal: {{level: checkpoint}}
config:
  queue_size: 500
"""
TOOLS = '''\
import asyncio
import os
from pathlib import Path

from runtime_core import ToolContext


async def book(n: int, ctx: ToolContext) -> str:
    """Takes SOAK_BOOK_SECONDS, then appends the number and the idempotency key."""
    await asyncio.sleep(float(os.environ.get("SOAK_BOOK_SECONDS", "0")))
    with Path(os.environ["SOAK_LEDGER"]).open("a", encoding="utf-8") as ledger:
        ledger.write(f"{n} {ctx.idempotency_key}\\n")
        ledger.flush()
        os.fsync(ledger.fileno())
    return f"booked {n}"
'''
KEPT = re.compile(r"Stopped cleanly\. (\d+) queued event\(s\) kept")


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def promptui() -> list[str]:
    exe = Path(sys.executable).with_name("promptui")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "promptui.cli"]


class Senders:
    """Threads posting numbered, signed events; a refused or unanswered one is posted again
    later under the same delivery id."""

    def __init__(self, port: int, threads: int, pause: float) -> None:
        self.url = f"http://127.0.0.1:{port}/in"
        self.acked_202: set[int] = set()
        self.acked_duplicate: set[int] = set()
        self.answers: Counter[str] = Counter()
        self.retry: list[int] = []
        self.pause = pause
        self._rng = random.Random(31)
        self._next = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._work, daemon=True)
                         for _ in range(threads)]

    @property
    def acknowledged(self) -> set[int]:
        return self.acked_202 | self.acked_duplicate

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _take(self) -> int:
        with self._lock:
            if self.retry and self._rng.random() < 0.5:
                return self.retry.pop(0)
            self._next += 1
            return self._next - 1

    def post(self, client: httpx.Client, n: int) -> bool:
        """Post ``n``; True once it is acknowledged."""
        body = json.dumps({"n": n}).encode()
        digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        headers = {"X-Hub-Signature-256": f"sha256={digest}", "X-GitHub-Event": "push",
                   "X-GitHub-Delivery": f"soak-{n}", "Content-Type": "application/json"}
        try:
            answer = client.post(self.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            with self._lock:
                self.answers[type(exc).__name__] += 1
            return False
        with self._lock:
            self.answers[str(answer.status_code)] += 1
            if answer.status_code == 202:
                self.acked_202.add(n)
                return True
            if answer.status_code == 200 and answer.json().get("status") == "duplicate":
                self.acked_duplicate.add(n)
                return True
        return False

    def _work(self) -> None:
        with httpx.Client(timeout=5, trust_env=False) as client:
            while not self._stop.is_set():
                n = self._take()
                if not self.post(client, n):
                    with self._lock:
                        self.retry.append(n)
                    self._stop.wait(0.05)  # the server is down or full: back off a little
                elif self.pause:
                    self._stop.wait(self.pause)

    def redeliver_all(self) -> None:
        """Post every event never acknowledged until each is (the final run is up)."""
        with httpx.Client(timeout=10, trust_env=False) as client:
            while True:
                with self._lock:
                    left = sorted(set(self.retry) - self.acknowledged)
                    self.retry = []
                if not left:
                    return
                for n in left:
                    if not self.post(client, n):
                        with self._lock:
                            self.retry.append(n)
                        time.sleep(0.05)


class Runs:
    """`promptui run` incarnations on one folder (one journal, one ledger)."""

    def __init__(self, folder: Path, agents: Path, port: int) -> None:
        self.folder, self.agents, self.port = folder, agents, port
        self.ledger = folder / "ledger.txt"
        self.journal = folder / ".promptui" / "journal.db"
        self.count = 0

    def start(self, *args: str, book_seconds: float) -> tuple[subprocess.Popen[bytes], Path]:
        env = {**os.environ, "SOAK_SECRET": SECRET, "SOAK_LEDGER": str(self.ledger),
               "SOAK_BOOK_SECONDS": str(book_seconds), "PYTHONPATH": str(ROOT),
               "PROMPTUI_URL": "", "PROMPTUI_TOKEN": "", "COLUMNS": "200"}
        self.count += 1
        out = self.folder / f"run-{self.count}.out"
        with out.open("wb") as stdout, (self.folder / f"run-{self.count}.err").open("wb") as err:
            proc = subprocess.Popen([*promptui(), "run", str(self.agents), *args],
                                    cwd=self.folder, env=env, stdin=subprocess.DEVNULL,
                                    stdout=stdout, stderr=err)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"promptui run exited {proc.returncode}: "
                                 f"{(self.folder / f'run-{self.count}.err').read_text()}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=1,
                             trust_env=False).status_code == 200:
                    return proc, out
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise SystemExit("promptui run did not start")

    def state(self) -> dict[str, Any]:
        with sqlite3.connect(f"file:{self.journal}?mode=ro", uri=True) as conn:
            pending = {e: json.loads(ev)["payload"]["n"] for e, ev in conn.execute(
                "SELECT event_id, event FROM pending WHERE process = 'books'")}
            waiting_ids = {e for (e,) in conn.execute(
                "SELECT event_id FROM open_runs WHERE process = 'books' AND state = 'waiting'")}
            dead = [(json.loads(ev)["payload"]["n"], reason) for ev, reason in conn.execute(
                "SELECT event, reason FROM dead_letters WHERE process = 'books'")]
        waiting = {n for e, n in pending.items() if e in waiting_ids}
        return {"queued": set(pending.values()) - waiting, "waiting": waiting, "dead": dead}

    def ledger_lines(self) -> list[tuple[int, str]]:
        text = self.ledger.read_text() if self.ledger.exists() else ""
        return [(int(n), key) for n, key in (line.split() for line in text.splitlines()
                                               if line.strip())]


def soak(stops: int, kills: int, senders_count: int, seed: int, pause: float,
         book_seconds: float, folder: Path | None = None) -> dict[str, Any]:
    rng = random.Random(seed)
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="promptui-soak-run-"))
    agents = folder / "agents"
    agents.mkdir()
    port = free_port()
    (agents / "books.agent").write_text(MANIFEST.format(port=port))
    (agents / "soak_tools.py").write_text(TOOLS)
    runs = Runs(folder, agents, port)
    senders = Senders(port, senders_count, pause)
    began = time.monotonic()
    plan = []
    for i in range(max(stops, kills)):
        if i < stops:
            plan.append(("SIGTERM", "SIGINT", "--seconds")[i % 3])
        if i < kills:
            plan.append("SIGKILL")
    ends: Counter[str] = Counter()
    exit_codes: Counter[str] = Counter()
    kept_at_stops = 0
    senders.start()
    try:
        for how in plan:
            window = rng.uniform(0.8, 2.0)
            args = ("--seconds", f"{window + 1.5:.2f}") if how == "--seconds" else ()
            proc, out = runs.start(*args, book_seconds=book_seconds)
            if how == "--seconds":
                code = proc.wait(60)
            else:
                time.sleep(window)
                proc.send_signal(getattr(signal, how))
                code = proc.wait(60)
            ends[how] += 1
            exit_codes[f"{how}:{code}"] += 1
            if how != "SIGKILL":
                found = KEPT.search(" ".join(out.read_text(errors="replace").split()))
                kept_at_stops += int(found.group(1)) if found else 0
    finally:
        senders.stop()
    # The last run: redeliver what was never acknowledged, run the queue to its end, stop.
    proc, out = runs.start("--json", book_seconds=0.0)
    senders.redeliver_all()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and runs.state()["queued"]:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    final_code = proc.wait(120)
    final = json.loads(out.read_text())
    state = runs.state()
    lines = runs.ledger_lines()
    by_number = Counter(n for n, _ in lines)
    by_key = Counter(key for _, key in lines)
    acked = senders.acknowledged
    waiting = acked & state["waiting"]
    return {
        "stops": {k: v for k, v in ends.items() if k != "SIGKILL"},
        "kills": ends["SIGKILL"],
        "seconds": round(time.monotonic() - began, 1),
        "answers": dict(senders.answers),
        "acknowledged": len(acked),
        "acknowledged_202": len(senders.acked_202),
        "ran_once": sum(1 for n in acked - waiting if by_number[n] == 1),
        "ran_twice": sum(1 for n in acked if by_number[n] > 1),
        "waiting_for_operator": len(waiting),
        "waiting_that_wrote": sum(1 for n in waiting if by_number[n]),
        "never_ran": sum(1 for n in acked - waiting if not by_number[n]),
        "still_queued": len(state["queued"]),
        "dead_letters_process_stopped": sum(1 for _, r in state["dead"]
                                            if r == "process stopped"),
        "dead_letters": len(state["dead"]),
        "duplicate_writes": sum(1 for c in by_key.values() if c > 1)
        + sum(1 for c in by_number.values() if c > 1),
        "writes_not_acknowledged": len(set(by_number) - acked),
        "kept_at_stops": kept_at_stops,
        "stop_exit_codes": dict(exit_codes),
        "final_exit": final_code,
        "final_stopped": final.get("stopped"),
        "folder": str(folder),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--stops", type=int, default=15)
    parser.add_argument("--kills", type=int, default=15)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--pause", type=float, default=0.01,
                        help="seconds a sender waits after an acknowledged post")
    parser.add_argument("--book-seconds", type=float, default=0.02,
                        help="how long the write tool takes (a queue builds under load)")
    parser.add_argument("--folder", type=Path, help="work here (default: a new temp folder)")
    args = parser.parse_args()
    print(json.dumps(soak(args.stops, args.kills, args.senders, args.seed, args.pause,
                          args.book_seconds, args.folder), indent=2))


if __name__ == "__main__":
    main()
