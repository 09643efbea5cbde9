"""Recovery cost after N events, for several N: recovery should be flat in the journal's length.

For each N a journaled process (checkpoint level, instant scripted model) handles N events and is
then abandoned without a clean stop, as after a crash. A fresh Python process then opens the
journal and starts a new process object of the same name; we time the recovery (cold, without
tracemalloc, which slows every allocation), then run it again under tracemalloc for the memory it
takes (its peak, and the RSS growth of the timed pass).
Usage: python bench/recovery.py [--scales 1000,10000,50000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.journal import SQLiteJournal
from runtime_core.journal.recorder import ProcessRecorder
from runtime_core.runs.recovery import recover_process


def config(db: Path) -> ProcessConfig:
    return ProcessConfig(
        model={"provider": "scripted", "turns": [{"reply": "ok"}]},
        journal={"level": "checkpoint", "path": str(db)},
        context={"initial_state": {"counter": 0}},
    )


async def produce(db: Path, n: int) -> None:
    process = AgentProcess("worker", config(db))
    await process.start()
    done = asyncio.Event()
    process.notifier.add_callback(
        lambda _: done.set() if process.invocation_count >= n else None)

    async def producer(k: int, count: int) -> None:
        for i in range(count):
            await process.inject(TriggerEvent("bench", "manual", {"i": i, "p": k}))

    await asyncio.gather(*(producer(k, n // 50) for k in range(50)))
    await done.wait()
    # The worst case for recovery: the longest tail after the last checkpoint (a checkpoint
    # every journal.checkpoint_every runs; these runs come one by one, none of them checkpointed).
    tail = process.config.journal.checkpoint_every - 1
    n += tail
    await producer(50, tail)
    await _until(process, n)
    assert process.journal is not None
    await process.journal.flush()  # abandoned without stop(), like a crash
    await process.journal.close()


async def _until(process: AgentProcess, n: int) -> None:
    while process.invocation_count < n:
        await asyncio.sleep(0.001)


def rss_kb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def recover(db: Path) -> dict[str, float]:
    journal = SQLiteJournal(db)
    t_open = time.perf_counter()
    await journal.open()
    open_ms = (time.perf_counter() - t_open) * 1000
    # Timed first, without tracemalloc: it slows every allocation down a few times over.
    rss_before = rss_kb()
    t0 = time.perf_counter()
    recorder = ProcessRecorder(journal, "worker", "bench-recovery", "checkpoint")
    recovery = await recover_process(journal, recorder, "worker", 100)
    elapsed = (time.perf_counter() - t0) * 1000
    rss_after = rss_kb()
    # Then the same recovery again, for the memory it takes (the pages are cached by now).
    tracemalloc.start()
    t_traced = time.perf_counter()
    await recover_process(journal, ProcessRecorder(journal, "worker", "bench-recovery-2",
                                                   "checkpoint"), "worker", 100)
    traced_ms = (time.perf_counter() - t_traced) * 1000
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # And the whole public path: a new process object's start(), recovery included.
    process = AgentProcess("worker", config(db), journal=journal)
    t1 = time.perf_counter()
    await process.start()
    start_ms = (time.perf_counter() - t1) * 1000
    assert recovery is not None and process.recovered is not None
    await process.stop()
    await journal.close()
    return {"recovery_ms": round(elapsed, 2), "start_with_recovery_ms": round(start_ms, 2),
            "journal_open_ms": round(open_ms, 2),
            "recovery_under_tracemalloc_ms": round(traced_ms, 2),
            "tracemalloc_peak_mb": round(peak / 2**20, 2),
            "rss_growth_mb": round((rss_after - rss_before) / 1024, 2),
            "entries_read": recovery.summary["entries_read"],
            "invocation_count": recovery.summary["invocation_count"]}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scales", default="1000,10000,50000")
    parser.add_argument("--recover", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.recover:
        print(json.dumps(await recover(Path(args.recover))))
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.scales.split(",")):
            db = Path(tmp) / f"journal-{n}.db"
            await produce(db, n)
            out = subprocess.run([sys.executable, __file__, "--recover", str(db)],
                                 capture_output=True, text=True, check=True)
            result = {"events": n, "journal_mb": round(db.stat().st_size / 2**20, 2),
                      **json.loads(out.stdout)}
            results.append(result)
    print(json.dumps({"benchmark": "recovery", "synchronous": "FULL", "runs": results,
                      "peak_rss_mb_producer": round(
                          resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)},
                     indent=2))


if __name__ == "__main__":
    asyncio.run(main())
