"""Journal growth soak: one process under steady load for N minutes, without and with a
retention, and the journal's size every few seconds.

The workload is the demo's invoice shape: each event runs a read tool, then a write tool
(each result a few hundred bytes), then a reply: about 3.7 kB of journal a run. Events are
injected at a steady rate (--rate a second; inject returns once the event is durable, and that
latency is measured: a retention window in the writer delays the appends queued behind it).
Prints JSON: per mode, the journal file's bytes at each sample (after a passive WAL
checkpoint), bytes per minute over the first and the second half of the run, the inject
latency (p50, p99, max, ms), and for retention the passes, windows and entries removed.

    .venv/bin/python bench/journal_growth.py [--minutes 3] [--rate 5] [--keep-runs 300]
                                             [--max-age 2m] [--every 15]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from runtime_core import AgentProcess, ProcessConfig, ToolContext, TriggerEvent, tool
from runtime_core.journal import SQLiteJournal

MODEL = {"provider": "scripted", "turns": [
    {"tool_calls": [{"name": "read_invoice", "args": {"path": "$payload.path"}}]},
    {"tool_calls": [{"name": "record_invoice", "args": {"path": "$payload.path"}}]},
    {"reply": "Invoice booked."}]}
FILLER = "line item, quantity, unit price, tax; " * 8  # ~300 bytes, as an invoice reads


def read_invoice(path: str) -> str:
    return f"{path}: {FILLER}"


def record_invoice(ctx: ToolContext, path: str) -> str:
    ctx.set("booked", int(ctx.get("booked", 0)) + 1)
    return f"booked {path}: {FILLER}"


def sizes(path: Path) -> tuple[int, int]:
    """(the file's bytes after a passive checkpoint, the WAL's bytes)."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size, wal.stat().st_size if wal.exists() else 0


def slope(points: list[tuple[float, int]]) -> float:
    """Bytes per minute: the least-squares slope of (seconds, bytes)."""
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return 60.0 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


async def soak(path: Path, minutes: float, rate: float, retention: dict[str, Any] | None,
               sample_every: float) -> dict[str, Any]:
    journal: dict[str, Any] = {"path": str(path)}
    if retention is not None:
        journal["retention"] = retention
    config = ProcessConfig(model=MODEL, journal=journal, queue_size=10_000)
    process = AgentProcess("invoices", config, tools=[tool(read_invoice, effect="read"),
                                                      tool(record_invoice, effect="write")])
    await process.start()
    store = process.journal
    assert isinstance(store, SQLiteJournal)
    latencies: list[float] = []
    samples: list[tuple[float, int, int]] = []
    started = time.monotonic()
    end = started + minutes * 60
    next_sample = started
    n = 0
    try:
        while (now := time.monotonic()) < end:
            if now >= next_sample:
                db, wal = await asyncio.to_thread(sizes, path)
                samples.append((now - started, db, wal))
                next_sample += sample_every
            t0 = time.perf_counter()
            await process.inject(TriggerEvent("inbox", "manual", {"path": f"inv-{n}.json"}))
            latencies.append((time.perf_counter() - t0) * 1000)
            n += 1
            await asyncio.sleep(max(0.0, started + n / rate - time.monotonic()))
        await asyncio.wait_for(_idle(process, n), 120)
        db, wal = await asyncio.to_thread(sizes, path)
        samples.append((time.monotonic() - started, db, wal))
    finally:
        await process.close()
    half = samples[-1][0] / 2
    points = [(t, db) for t, db, _ in samples]
    latencies.sort()
    result: dict[str, Any] = {
        "events": n,
        "runs_per_minute": round(n / minutes, 1),
        "bytes_per_minute_first_half": round(slope([p for p in points if p[0] <= half])),
        "bytes_per_minute_second_half": round(slope([p for p in points if p[0] >= half])),
        "file_bytes_end": samples[-1][1],
        "wal_bytes_end": samples[-1][2],
        "inject_ms": {"p50": round(latencies[len(latencies) // 2], 2),
                      "p99": round(latencies[int(len(latencies) * 0.99)], 2),
                      "max": round(latencies[-1], 2)},
        "samples": " ".join(f"{round(t)}s:{db // 1024}kB" for t, db, _ in samples),
    }
    if retention is not None:
        total = store.retention.total
        result["retention"] = {"passes": store.retention.passes, "windows": total.windows,
                               "entries_removed": total.removed,
                               "runs_removed": sum(total.runs.values()),
                               "pages_given_back": total.pages,
                               "slowest_window_ms": round(total.slowest * 1000, 2)}
    return result


async def _idle(process: AgentProcess, n: int) -> None:
    while process.invocation_count < n:
        await asyncio.sleep(0.05)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=3.0, help="per mode")
    parser.add_argument("--rate", type=float, default=5.0, help="events a second")
    parser.add_argument("--keep-runs", type=int, default=300)
    parser.add_argument("--max-age", default=None, help="e.g. 2m (default: none)")
    parser.add_argument("--every", default="15s", help="seconds between retention passes")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--only", choices=["without", "with"], default=None)
    args = parser.parse_args()
    retention: dict[str, Any] = {"every": args.every}
    if args.keep_runs:
        retention["keep_runs"] = args.keep_runs
    if args.max_age:
        retention["max_age"] = args.max_age
    report: dict[str, Any] = {"benchmark": "journal_growth", "minutes": args.minutes,
                              "rate": args.rate, "retention": retention,
                              "python": sys.version.split()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        if args.only != "with":
            report["without_retention"] = await soak(Path(tmp) / "without.db", args.minutes,
                                                     args.rate, None, args.sample)
        if args.only != "without":
            report["with_retention"] = await soak(Path(tmp) / "with.db", args.minutes,
                                                  args.rate, retention, args.sample)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
