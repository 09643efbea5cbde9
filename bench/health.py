"""Throughput of HealthMonitor.record_tool_call with loop_window=20.

A realistic mix: a new run every 50 calls; most calls vary their arguments (search pages, reads
of different documents), some repeat (status polls), and short loops and stuck stretches occur
so detection, cooldown and reporting paths are exercised too.
Usage: python bench/health.py [--calls 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from typing import Any

from runtime_core.governance.health import HealthConfig, HealthMonitor, args_hash


def workload(n: int, seed: int = 7) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    out: list[tuple[str, dict[str, Any]]] = []
    while len(out) < n:
        roll = rng.random()
        if roll < 0.55:  # varying arguments
            out.append(("search", {"query": f"topic {rng.randrange(10_000)}", "page": 1}))
        elif roll < 0.75:
            out.append(("read", {"doc_id": rng.randrange(5_000), "section": "body"}))
        elif roll < 0.88:  # repeating poll
            out.append(("get_status", {"queue": "jobs"}))
        elif roll < 0.95:  # a short loop
            pattern: list[tuple[str, dict[str, Any]]] = [
                ("search", {"query": "x"}),
                ("read", {"doc_id": 1}),
            ]
            out.extend(pattern * rng.randrange(2, 4))
        else:  # a stuck stretch
            out.extend([("fetch", {"url": "https://example.com/a"})] * rng.randrange(3, 6))
    return out[:n]


async def run(n: int) -> dict[str, Any]:
    calls = workload(n)
    monitor = HealthMonitor(HealthConfig(enabled=True, loop_window=20), "bench")
    record = monitor.record_tool_call
    start = time.perf_counter()
    for i, (name, args) in enumerate(calls):
        if i % 50 == 0:
            monitor.begin_invocation()
        await record(name, args)
    elapsed = time.perf_counter() - start

    hash_start = time.perf_counter()
    for _, args in calls:
        args_hash(args)
    hash_elapsed = time.perf_counter() - hash_start
    status = monitor.health_status()
    return {
        "calls": n,
        "loop_window": 20,
        "seconds": round(elapsed, 3),
        "calls_per_second": round(n / elapsed),
        "args_hash_share": round(hash_elapsed / elapsed, 2),
        "anomalies_reported": status["anomaly_count"],
        "anomalies_by_type": status["anomalies_by_type"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200_000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.calls)), indent=2))


if __name__ == "__main__":
    main()
