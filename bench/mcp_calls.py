"""MCP tool calls through the runtime's link: connect time and per-call latency, stdio and
streamable HTTP on loopback, against the demo's MCP server. Prints JSON.

    .venv/bin/python bench/mcp_calls.py [--calls 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from runtime_core import ToolContext, TriggerEvent
from runtime_core.agent.mcp_config import HttpServerConfig, StdioServerConfig
from runtime_core.agent.mcp_tools import McpToolbox

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


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
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
    print(json.dumps({"benchmark": "mcp_calls", "server": "demo_manifests/promptui_demo_mcp.py",
                      "stdio": stdio, "http": http}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
