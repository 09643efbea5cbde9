"""Rewind on a long journal: plan and apply against a SQLite journal of N entries (default
100,000), targets early, in the middle and late. Prints JSON. Target: plan <= 200 ms."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from runtime_core import AgentProcess, ProcessConfig
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.sqlite.journal import SQLiteJournal

NAME = "bench"
PER_RUN = 8  # entries one synthetic run writes


def run_entries(i: int) -> list[tuple[str, dict[str, Any], str | None]]:
    """What one run of a booking agent journals (event, steps, result, context, checkpoint)."""
    run = f"run{i:06d}"
    invoice = f"INV-{i}"
    effect = "write" if i % 4 == 0 else "read"
    return [
        (EntryType.EVENT_ACCEPTED, {"event_id": f"e{i}", "trigger_id": "t",
                                    "trigger_type": "manual"}, None),
        (EntryType.RUN_STARTED, {"event_id": f"e{i}", "attempt": 1}, run),
        (EntryType.MODEL_USAGE, {"turn": 1, "input_tokens": 120, "output_tokens": 12}, run),
        (EntryType.TOOL_INTENT, {"step": 1, "tool": "book", "call_id": "c1", "effect": effect,
                                 "args": {"invoice": invoice},
                                 "idempotency_key": f"{run}:1"}, run),
        (EntryType.TOOL_RESULT, {"step": 1, "tool": "book", "call_id": "c1", "ok": True,
                                 "result": f"booked {invoice}",
                                 "updates": {"booked": i, "last": invoice}}, run),
        (EntryType.CONTEXT_UPDATE, {"key": "note", "value": f"after {invoice}",
                                    "source": "agent"}, None),
        (EntryType.RUN_FINISHED, {"event_id": f"e{i}", "state": "succeeded", "reason": "",
                                  "error": "", "reply": "Booked.", "event_done": True,
                                  "messages": [{"role": "user", "content": f"book {invoice}"},
                                               {"role": "assistant", "content": "Booked."}]},
         run),
        (EntryType.CHECKPOINT, {"context_state": {"booked": i, "last": invoice,
                                                  "note": f"after {invoice}"},
                                "lifecycle_state": "running", "invocation_count": i}, None),
    ]


async def fill(journal: SQLiteJournal, entries: int) -> None:
    runs = entries // PER_RUN
    for start in range(0, runs, 500):
        futures = []
        for i in range(start + 1, min(runs, start + 500) + 1):
            for kind, data, run in run_entries(i):
                event = {"event_id": f"e{i}", "trigger_id": "t", "trigger_type": "manual",
                         "payload": {}, "timestamp": "2026-12-02T00:00:00+00:00",
                         "metadata": {}} if kind == EntryType.EVENT_ACCEPTED else None
                futures.append(journal.submit(JournalEntry(NAME, kind, data, run_id=run),
                                              attachment=event))
        await asyncio.gather(*futures)


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


async def main(entries: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "journal.db"
        journal = SQLiteJournal(path)
        await journal.open()
        started = time.perf_counter()
        await fill(journal, entries)
        fill_s = time.perf_counter() - started
        config = ProcessConfig(model="echo", journal={"level": "checkpoint", "backend": "sqlite",
                                                      "path": str(path)})
        process = AgentProcess(NAME, config, journal=journal)
        started = time.perf_counter()
        await process.start()
        start_s = time.perf_counter() - started
        total = entries // PER_RUN * PER_RUN
        out: dict[str, Any] = {"entries": total, "fill_seconds": round(fill_s, 1),
                               "start_with_recovery_ms": ms(start_s),
                               "plan_ms": {}, "apply_ms": {}}
        for label, seq in (("late", total - 40), ("middle", total // 2),
                           ("early", 10)):
            times = []
            plan = None
            for _ in range(repeats):
                t = time.perf_counter()
                plan = await process.rewind_plan(f"{NAME}:{seq}")
                times.append(time.perf_counter() - t)
            assert plan is not None
            out["plan_ms"][label] = {
                "p50": ms(statistics.median(times)), "max": ms(max(times)),
                "entries_affected": plan.entries_affected,
                "outside_effects_listed": len(plan.outside_effects),
                "context_changes": len(plan.context_changes),
                "messages_dropped": plan.messages_dropped}
        for label, seq in (("late", total - 40), ("middle", total // 2)):
            t = time.perf_counter()
            await process.rewind(f"{NAME}:{seq}")
            out["apply_ms"][label] = ms(time.perf_counter() - t)
        out["target_plan_ms"] = 200
        out["plan_meets_target"] = all(v["p50"] <= 200 for v in out["plan_ms"].values())
        await process.stop()
        await journal.close()
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.entries, args.repeats)), indent=2))
