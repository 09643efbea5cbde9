"""Durable appends to the SQLite journal from many concurrent producers (WAL, synchronous=FULL).

Each append returns only once its entry is committed; the writer thread group-commits whatever
is queued. Prints JSON: appends/s, batches, mean batch size, p50/p99 append latency, and the
mean time the writer spent in a commit (its statements and the fsync): with ``--producers 1``
the append latency less that is the cost of the hops between the event loop and the writer.
Usage: python bench/journal_appends.py [--producers 50] [--per-producer 400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from runtime_core.journal import JournalEntry, SQLiteJournal


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--producers", type=int, default=50)
    parser.add_argument("--per-producer", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        journal = SQLiteJournal(Path(tmp) / "bench.db")
        await journal.open()
        latencies: list[float] = []

        async def producer(k: int) -> None:
            for i in range(args.per_producer):
                t0 = time.perf_counter()
                await journal.append(JournalEntry(f"proc-{k % 10}", "bench",
                                                  {"producer": k, "i": i, "note": "x" * 64}))
                latencies.append(time.perf_counter() - t0)

        started = time.perf_counter()
        await asyncio.gather(*(producer(k) for k in range(args.producers)))
        elapsed = time.perf_counter() - started
        total = args.producers * args.per_producer
        batches = journal.batches
        commits = journal.commit_times.snapshot()
        await journal.close()
    latencies.sort()
    print(json.dumps({
        "benchmark": "journal_appends",
        "synchronous": "FULL",
        "journal_mode": "WAL",
        "producers": args.producers,
        "appends": total,
        "seconds": round(elapsed, 3),
        "appends_per_s": round(total / elapsed, 1),
        "batches": batches,
        "mean_batch": round(total / max(batches, 1), 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 2),
        "commit_mean_ms": round(commits.total_seconds / max(commits.count, 1) * 1000, 3),
    }, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
