"""Push N injected events through one process with an instant scripted model, no journal.

Prints JSON: events/s for each N, and peak RSS after each (memory should stay flat as N grows).
Usage: python bench/e2e_events.py [--events 10000] [--scales 10000,20000,40000] [--subscriber]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent


def rss_mb() -> float:
    # ru_maxrss is the peak resident set size, in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


async def run_once(n: int, subscriber: bool) -> dict[str, float]:
    config = ProcessConfig(
        model={"provider": "scripted", "turns": [{"reply": "ok"}]},
        queue_size=n + 1,
        context={"conversation_max_messages": 100},
    )
    process = AgentProcess("bench", config)
    sub = process.notifier.subscribe(maxsize=10_000) if subscriber else None
    await process.start()
    done = asyncio.Event()
    target = process.invocation_count + n

    def check(_: object) -> None:
        if process.invocation_count >= target:
            done.set()

    process.notifier.add_callback(check)
    started = time.perf_counter()
    for i in range(n):
        await process.inject(TriggerEvent("bench", "manual", {"i": i}))
        if i % 500 == 499:
            await asyncio.sleep(0)  # let workers run while we keep injecting
            if sub is not None:
                sub.drain()
    await asyncio.wait_for(done.wait(), timeout=600)
    elapsed = time.perf_counter() - started
    await process.stop()
    assert process.invocation_count == n, process.invocation_count
    return {"events": n, "seconds": round(elapsed, 3), "events_per_s": round(n / elapsed, 1),
            "peak_rss_mb": round(rss_mb(), 1)}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scales", default="10000,20000,40000")
    parser.add_argument("--subscriber", action="store_true",
                        help="attach a UI-like event subscriber while measuring")
    args = parser.parse_args()
    results = []
    for n in (int(x) for x in args.scales.split(",")):
        results.append(await run_once(n, args.subscriber))
    print(json.dumps({
        "benchmark": "e2e_events",
        "journal": "none",
        "model": "scripted instant reply",
        "subscriber": args.subscriber,
        "python": sys.version.split()[0],
        "runs": results,
        "events_per_s_at_10k": results[0]["events_per_s"],
        "rss_growth_mb_first_to_last": round(
            results[-1]["peak_rss_mb"] - results[0]["peak_rss_mb"], 1
        ),
    }, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
