"""The HTTP control API as an attached room sees it: a real ``promptui serve`` subprocess on
loopback, read latencies through RemoteControl, and how long an injected event takes to come
back as ``run.finished`` over the SSE stream. Prints JSON.

    .venv/bin/python bench/api_calls.py [--calls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from runtime_core.control import RemoteControl
from runtime_core.events import RunFinished

MANIFEST = """\
version: "1.0"
name: echo
model:
  provider: scripted
  turns:
    - reply: done
journal: {level: checkpoint}
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def figures(values: list[float]) -> dict[str, float]:
    return {"p50_ms": pct(values, 0.5), "p95_ms": pct(values, 0.95), "max_ms": pct(values, 1.0)}


async def timed(calls: int, call: Any) -> list[float]:
    out = []
    for _ in range(calls):
        t = time.perf_counter()
        await call()
        out.append((time.perf_counter() - t) * 1000)
    return out


def start_server(work: Path, env: dict[str, str], port: int) -> tuple[subprocess.Popen[str],
                                                                     str]:
    discovery = work / ".promptui" / "serve.json"
    discovery.unlink(missing_ok=True)
    server = subprocess.Popen(
        [sys.executable, "-m", "promptui.cli", "serve", "echo.agent", "--port", str(port),
         "--log-level", "warning"], cwd=work, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not discovery.exists():
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the server did not start: {server.stderr.read()}"
                             if server.stderr else "the server did not start")
        time.sleep(0.01)
    return server, json.loads(discovery.read_text(encoding="utf-8"))["url"]


async def measure(work: Path, env: dict[str, str], calls: int) -> dict[str, Any]:
    server, url = start_server(work, env, 0)
    remote = RemoteControl(url, token=env["PROMPTUI_TOKEN"])
    stream = remote.subscribe(maxsize=100_000)
    await remote.start_all()
    try:
        deadline = time.monotonic() + 10
        while remote._last_event_id == "" and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        results: dict[str, Any] = {
            "list_processes": figures(await timed(calls, remote.list_processes)),
            "process_detail": figures(await timed(calls, lambda: remote.process_detail("echo"))),
        }
        round_trips = []
        for n in range(calls):
            stream.drain()
            t = time.perf_counter()
            event_id = await remote.inject("echo", {"n": n})
            while True:
                done = [e for e in stream.drain() if isinstance(e, RunFinished)
                        and e.event_id == event_id]
                if done:
                    break
                await asyncio.sleep(0.0005)
            round_trips.append((time.perf_counter() - t) * 1000)
        results["inject_to_run_finished_over_sse"] = figures(round_trips)
        # After the injections, so the journal holds a few thousand entries to page through.
        results["journal_page_200"] = figures(await timed(
            calls, lambda: remote.journal_entries("echo", limit=200)))
        results["events_dropped"] = stream.dropped
        # The server restarts on the same port: how long until the attached side is back.
        server.terminate()
        results["sigterm_exit"] = await asyncio.to_thread(server.wait, 30)
        while not remote.link:
            await remote.list_processes()
            await asyncio.sleep(0.01)
        port = int(url.rsplit(":", 1)[1])
        server, _ = await asyncio.to_thread(start_server, work, env, port)
        t = time.perf_counter()
        while remote.link:
            await asyncio.sleep(0.005)
        results["reconnect_after_restart_ms"] = round((time.perf_counter() - t) * 1000, 1)
        return results
    finally:
        await remote.close()
        server.terminate()
        server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "echo.agent").write_text(MANIFEST, encoding="utf-8")
        env = {**os.environ, "PROMPTUI_TOKEN": "bench-token-0123456789abcdef"}
        found = asyncio.run(measure(work, env, args.calls))
    print(json.dumps({"calls": args.calls, **found}, indent=2))


if __name__ == "__main__":
    main()
