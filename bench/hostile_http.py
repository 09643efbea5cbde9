"""Hostile clients against a real ``promptui serve`` (under a 256-file limit, as an ops box
might have) while legitimate clients go on: what the legitimate ones are answered.

- ``slow_bodies``: 170 unauthenticated clients each send a webhook request's headers, then
  its body one byte every 5 s (34 bytes/s in all), reconnecting when closed.
- ``api_hold``: 250 unauthenticated clients hold API connections (headers one line every 5 s),
  reconnecting when closed.

Meanwhile a sender posts to the webhook and an operator asks the API (token) twice a second,
each on a new connection. Prints JSON: per scenario, the legitimate answers by status, and the
attackers' connections (opened, how they ended, the longest one held). Bounded: ``--seconds``
per scenario. Run against another checkout with PYTHONPATH=/that/checkout.

    .venv/bin/python bench/hostile_http.py [--seconds 20] [--attackers 170] [--pause 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

TOKEN = "bench-token-0123456789abcdef"
FILE_LIMIT = 256
GAP = 5.0  # seconds between an attacker's bytes
MANIFEST = """\
version: "1.0"
name: hook
instructions: Do the task.
model: {provider: scripted, turns: [{reply: ok}]}
journal: {level: checkpoint}
triggers:
  - {type: webhook, webhook_host: 127.0.0.1, webhook_port: 0, webhook_path: /hook}
"""


def _low_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


def start_serve(folder: Path) -> tuple[subprocess.Popen[bytes], str, int, Path]:
    """``promptui serve`` on port 0: (process, API URL, webhook port, log)."""
    (folder / "agents").mkdir(parents=True)
    (folder / "agents" / "hook.agent").write_text(MANIFEST)
    log = folder / "serve.log"
    env = {**os.environ, "PROMPTUI_TOKEN": TOKEN}
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "promptui.cli", "serve", "--port", "0", "agents"],
            cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=sink, preexec_fn=_low_file_limit)
    deadline = time.monotonic() + 60
    while True:
        found = re.search(r"listening on (http://\S+)", log.read_text(errors="replace"))
        if found:
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"promptui serve did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)
    url = found.group(1)
    triggers = httpx.get(f"{url}/api/v1/processes/hook/triggers", trust_env=False,
                         headers={"Authorization": f"Bearer {TOKEN}"}).json()
    return proc, url, int(triggers[0]["port"]), log


@dataclass
class Attack:
    opened: int = 0
    ended: Counter[str] = field(default_factory=Counter)
    longest: float = 0.0
    connect_errors: int = 0


async def attacker(port: int, head: bytes, drip: bytes, stop: asyncio.Event,
                   attack: Attack, pause: float) -> None:
    """One client: connects, sends ``head``, then ``drip`` every GAP s until closed; then
    again after ``pause`` s."""
    first = True
    while not stop.is_set():
        if not first and pause:
            await asyncio.sleep(pause)
        first = False
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            attack.connect_errors += 1
            await asyncio.sleep(0.5)
            continue
        attack.opened += 1
        opened = time.monotonic()
        ended = "held to the end"
        try:
            writer.write(head)
            answer = b""
            while not stop.is_set():
                try:
                    chunk = await asyncio.wait_for(reader.read(4096), GAP)
                except TimeoutError:
                    writer.write(drip)
                    await writer.drain()
                    continue
                if not chunk:
                    found = re.match(rb"HTTP/1.1 (\d+)", answer)
                    ended = f"closed with {found.group(1).decode()}" if found \
                        else "closed without an answer"
                    break
                answer += chunk
        except OSError:
            ended = "reset"
        attack.ended[ended] += 1
        attack.longest = max(attack.longest, time.monotonic() - opened)
        writer.close()


async def legitimate(url: str, hook_port: int, stop: asyncio.Event) -> dict[str, Counter[str]]:
    answers: dict[str, Counter[str]] = {"webhook": Counter(), "api": Counter()}

    async def ask(kind: str, method: str, target: str, **kwargs: Any) -> None:
        try:  # a new connection each time, as a sender's retry or a new CLI call
            async with httpx.AsyncClient(trust_env=False, timeout=5) as client:
                status = str((await client.request(method, target, **kwargs)).status_code)
        except httpx.TimeoutException:
            status = "timeout"
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        answers[kind][status] += 1

    n = 0
    while not stop.is_set():
        n += 1
        await asyncio.gather(
            ask("webhook", "POST", f"http://127.0.0.1:{hook_port}/hook", json={"n": n}),
            ask("api", "GET", f"{url}/api/v1/processes",
                headers={"Authorization": f"Bearer {TOKEN}"}))
        await asyncio.sleep(0.5)
    return answers


async def scenario(name: str, url: str, hook_port: int, seconds: float,
                   attackers: int, pause: float) -> dict[str, Any]:
    api_port = int(url.rsplit(":", 1)[1])
    if name == "slow_bodies":
        port, head, drip = hook_port, (b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type:"
                                       b" application/json\r\nContent-Length: 10000\r\n\r\n{"), b" "
    else:
        port, head, drip = api_port, b"GET /api/v1/processes HTTP/1.1\r\nHost: 127.0.0.1\r\n", \
            b"X-Hold: 1\r\n"
    stop = asyncio.Event()
    attack = Attack()
    tasks = [asyncio.create_task(attacker(port, head, drip, stop, attack, pause))
             for _ in range(attackers)]
    await asyncio.sleep(1.0)  # the attack is in place before the first legitimate request
    legit = asyncio.create_task(legitimate(url, hook_port, stop))
    await asyncio.sleep(seconds)
    stop.set()
    answers = await legit
    await asyncio.wait(tasks, timeout=GAP + 5)
    return {"attackers": attackers, "seconds": seconds, "reconnect_pause_s": pause,
            "legitimate": {kind: dict(c) for kind, c in answers.items()},
            "attack": {"connections_opened": attack.opened, "ended": dict(attack.ended),
                       "longest_held_s": round(attack.longest, 1),
                       "connect_errors": attack.connect_errors}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--attackers", type=int, default=170, help="slow-body clients")
    parser.add_argument("--holders", type=int, default=250, help="API connection holders")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds an attacker waits before reconnecting (0: at once)")
    args = parser.parse_args()
    results: dict[str, Any] = {"file_limit": FILE_LIMIT, "pythonpath": os.environ.get(
        "PYTHONPATH", "")}
    for name, count in (("slow_bodies", args.attackers), ("api_hold", args.holders)):
        with tempfile.TemporaryDirectory() as tmp:
            proc, url, hook_port, _log = start_serve(Path(tmp))
            try:
                results[name] = asyncio.run(scenario(name, url, hook_port, args.seconds, count,
                                                    args.pause))
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
