"""Push N injected events through one process with an instant scripted model.

Prints JSON: for each number of producers (default: 1, the reference's serial shape, and 50)
and each N, events/s, group commits per event and peak RSS (memory should stay flat as N
grows); with --journal, also journal bytes per event (used pages after a WAL checkpoint).
Each producer injects its share one event after another, each inject returning only once its
event is durable (a webhook under load acknowledges many events at once); the run counts as
done when every run's end is durable (that is when it is announced).
Usage: python bench/e2e_events.py [--scales 10000,20000,40000] [--journal none|checkpoint|full]
                                  [--producers 1,50] [--subscriber]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from sqlite_bytes import used_bytes  # this folder's: the count every benchmark uses

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.events import RunFinished


def rss_mb() -> float:
    # ru_maxrss is the peak resident set size, in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


async def run_once(n: int, level: str, producers: int, subscriber: bool, tmp: Path
                   ) -> dict[str, float]:
    tmp.mkdir(parents=True, exist_ok=True)
    db = tmp / f"journal-{n}.db"
    config = ProcessConfig(
        model={"provider": "scripted", "turns": [{"reply": "ok"}]},
        queue_size=max(1000, producers * 2),
        journal={"level": level, "path": str(db)},
    )
    process = AgentProcess("bench", config)
    sub = process.notifier.subscribe(maxsize=10_000) if subscriber else None
    await process.start()
    base_bytes = used_bytes(db) if level != "none" else 0
    done = asyncio.Event()
    finished = 0
    per_producer = n // producers

    def check(event: object) -> None:  # a run's end is announced once it is durable
        nonlocal finished
        if isinstance(event, RunFinished):
            finished += 1
            if finished >= per_producer * producers:
                done.set()

    process.notifier.add_callback(check)

    async def producer(k: int) -> None:
        for i in range(per_producer):
            await process.inject(TriggerEvent("bench", "manual", {"i": i, "p": k}))
            if i % 200 == 199:
                await asyncio.sleep(0)  # let workers run while we keep injecting
                if sub is not None:
                    sub.drain()

    commits_before = getattr(process.journal, "batches", 0)
    started = time.perf_counter()
    await asyncio.gather(*(producer(k) for k in range(producers)))
    await asyncio.wait_for(done.wait(), timeout=600)
    elapsed = time.perf_counter() - started
    journal = process.journal
    commits = getattr(journal, "batches", 0) - commits_before
    await process.close()
    total = per_producer * producers
    result = {"events": total, "seconds": round(elapsed, 3),
              "events_per_s": round(total / elapsed, 1), "peak_rss_mb": round(rss_mb(), 1)}
    if level != "none":
        result["commits_per_event"] = round(commits / total, 3)
        result["journal_bytes_per_event"] = round((used_bytes(db) - base_bytes) / total, 1)
    return result


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scales", default="10000,20000,40000")
    parser.add_argument("--journal", default="checkpoint", choices=["none", "checkpoint", "full"])
    parser.add_argument("--producers", default="1,50")
    parser.add_argument("--subscriber", action="store_true",
                        help="attach a UI-like event subscriber while measuring")
    args = parser.parse_args()
    report: dict[str, object] = {
        "benchmark": "e2e_events",
        "journal": args.journal,
        "synchronous": "FULL" if args.journal != "none" else None,
        "model": "scripted instant reply",
        "subscriber": args.subscriber,
        "python": sys.version.split()[0],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for producers in (int(x) for x in args.producers.split(",")):
            results = []
            for n in (int(x) for x in args.scales.split(",")):
                results.append(await run_once(n, args.journal, producers, args.subscriber,
                                              Path(tmp) / f"p{producers}"))
            report[f"producers_{producers}"] = {
                "runs": results,
                "events_per_s_first": results[0]["events_per_s"],
                "rss_growth_mb_first_to_last": round(
                    results[-1]["peak_rss_mb"] - results[0]["peak_rss_mb"], 1),
            }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
