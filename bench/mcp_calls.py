"""MCP tool calls through the runtime's link: connect time and per-call latency, stdio and
streamable HTTP on loopback, against the demo's MCP server; then reconnect time after a server
restart: from the moment the restart begins (the old server is killed) to the first successful
call, for stdio (the link starts a new server) and HTTP (the server is started again on the same
port; the call is refused for its lost session and sent again on a new one; also from the new
server listening, which leaves out its own start-up). ``http_outage``:
the HTTP server down for ``--down`` seconds while a call waits; from the server being back to
that call's success (what the backoff costs). Prints JSON.

    .venv/bin/python bench/mcp_calls.py [--calls 500] [--restarts 5] [--down 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from runtime_core import ToolContext, TriggerEvent
from runtime_core.agent.mcp.config import HttpServerConfig, StdioServerConfig
from runtime_core.agent.mcp.tools import McpToolbox

DEMO_SERVER = Path(__file__).resolve().parents[1] / "demo_manifests" / "promptui_demo_mcp.py"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


async def measure(config: StdioServerConfig | HttpServerConfig, calls: int) -> dict[str, Any]:
    toolbox = McpToolbox({"demo": config})
    t0 = time.perf_counter()
    tools = await toolbox.connect(set())
    connect_ms = (time.perf_counter() - t0) * 1000
    ctx = ToolContext("bench", "run", 1, TriggerEvent("bench", "manual", {}), {})
    read_ms: list[float] = []
    for _ in range(calls):
        t = time.perf_counter()
        await tools["lookup_build"].invoke({"build": 2}, ctx)
        read_ms.append((time.perf_counter() - t) * 1000)
    await toolbox.close()
    toolbox.release()
    return {"connect_ms": round(connect_ms, 1), "calls": calls,
            "call_p50_ms": pct(read_ms, 0.5), "call_p95_ms": pct(read_ms, 0.95),
            "call_mean_ms": round(statistics.fmean(read_ms), 3),
            "calls_per_s": round(calls / (sum(read_ms) / 1000), 1)}


async def http_server(port: int) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(DEMO_SERVER), "--http", "--port", str(port),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert proc.stdout is not None
    await proc.stdout.readline()  # LISTENING: the socket is bound and listening
    return proc


def child_pids() -> set[int]:
    """This program's child processes (the stdio server the link started)."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid():
                found.add(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def summary(values: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(values), 1), "max_ms": round(max(values), 1),
            "min_ms": round(min(values), 1)}


async def reconnect_stdio(config: StdioServerConfig, restarts: int) -> dict[str, Any]:
    toolbox = McpToolbox({"demo": config})
    tools = await toolbox.connect(set())
    ctx = ToolContext("bench", "run", 1, TriggerEvent("bench", "manual", {}), {})
    times: list[float] = []
    try:
        for _ in range(restarts):
            await tools["lookup_build"].invoke({"build": 2}, ctx)
            [pid] = child_pids() - {0}
            t0 = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            await tools["lookup_build"].invoke({"build": 2}, ctx)  # waits for the new server
            times.append((time.perf_counter() - t0) * 1000)
            await asyncio.to_thread(os.waitpid, -1, os.WNOHANG)
    finally:
        await toolbox.close()
        toolbox.release()
    return {"restarts": restarts, **summary(times),
            "connections": toolbox.links["demo"].connections}


async def reconnect_http(restarts: int, down: float) -> dict[str, Any]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = await http_server(port)
    toolbox = McpToolbox({"demo": HttpServerConfig(type="http",
                                                   url=f"http://127.0.0.1:{port}/mcp")})
    tools = await toolbox.connect(set())
    ctx = ToolContext("bench", "run", 1, TriggerEvent("bench", "manual", {}), {})
    restart_ms: list[float] = []
    listening_ms: list[float] = []
    outage_ms: list[float] = []
    try:
        for _ in range(restarts):  # killed and started again: the session is gone
            await tools["lookup_build"].invoke({"build": 2}, ctx)
            t0 = time.perf_counter()
            proc.kill()
            await proc.wait()
            proc = await http_server(port)
            t1 = time.perf_counter()
            await tools["lookup_build"].invoke({"build": 2}, ctx)
            done = time.perf_counter()
            restart_ms.append((done - t0) * 1000)
            listening_ms.append((done - t1) * 1000)
        for _ in range(restarts):  # down for a while, a call waiting meanwhile
            await tools["lookup_build"].invoke({"build": 2}, ctx)
            proc.kill()
            await proc.wait()
            waiting = asyncio.create_task(tools["lookup_build"].invoke({"build": 2}, ctx))
            await asyncio.sleep(down)
            proc = await http_server(port)
            t0 = time.perf_counter()
            await waiting
            outage_ms.append((time.perf_counter() - t0) * 1000)
    finally:
        await toolbox.close()
        toolbox.release()
        proc.kill()
        await proc.wait()
    return {"restart": {"restarts": restarts, **summary(restart_ms),
                        "from_listening": summary(listening_ms)},
            "outage": {"down_s": down, "restarts": restarts, **summary(outage_ms)},
            "connections": toolbox.links["demo"].connections}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--down", type=float, default=2.0,
                        help="seconds the HTTP server stays down in the outage measurement")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {"PROMPTUI_DEMO_DIR": tmp}
        stdio = await measure(StdioServerConfig(command="python", args=[str(DEMO_SERVER)],
                                                env=env), args.calls)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(DEMO_SERVER), "--http", "--port", "0",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        assert proc.stdout is not None
        url = (await proc.stdout.readline()).decode().split()[1]
        try:
            http = await measure(HttpServerConfig(type="http", url=url), args.calls)
        finally:
            proc.terminate()
            await proc.wait()
        stdio_back = await reconnect_stdio(StdioServerConfig(
            command="python", args=[str(DEMO_SERVER)], env=env), args.restarts)
        http_back = await reconnect_http(args.restarts, args.down)
    print(json.dumps({"benchmark": "mcp_calls", "server": "demo_manifests/promptui_demo_mcp.py",
                      "stdio": stdio, "http": http,
                      "reconnect_after_restart": {"stdio": stdio_back,
                                                  "http": http_back["restart"],
                                                  "http_outage": http_back["outage"]}},
                     indent=2))


if __name__ == "__main__":
    asyncio.run(main())
