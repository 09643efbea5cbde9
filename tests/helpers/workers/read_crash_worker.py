"""A runtime in a subprocess that dies inside a read: its ``lookup`` tool (effect read) notes
each execution in an outside file, and with ``--kill-at N`` SIGKILLs its own process inside
the N-th execution. The scripted model asks for three lookups in three turns; the run budget
allows two tool calls. Prints ``ACK <id>`` once its event is acknowledged and ``IDLE <json>``
when the process has nothing left to do."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import sys
from pathlib import Path

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent, tool

READS: Path
DB: Path
KILL_AT = 0


def lookup(q: int) -> str:
    """A trusted read with an outside trace: one line per execution, with how many tool intents
    a second connection to the journal finds durable on the adapter's first line."""
    with sqlite3.connect(DB) as probe:
        (durable,) = probe.execute("SELECT COUNT(*) FROM entries WHERE process = 'reader' AND "
                                   "entry_type = 'tool_intent'").fetchone()
    with READS.open("a") as trace:
        trace.write(f"{q}:{durable}\n")
        trace.flush()
        os.fsync(trace.fileno())
    if KILL_AT and len(READS.read_text().splitlines()) == KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)  # inside the adapter, after its effect
    return f"found {q}"


async def main() -> None:
    global READS, DB, KILL_AT
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--reads", required=True)
    parser.add_argument("--inject", action="store_true")
    parser.add_argument("--kill-at", type=int, default=0)
    args = parser.parse_args()
    READS, DB, KILL_AT = Path(args.reads), Path(args.db), args.kill_at
    config = ProcessConfig(
        model={"provider": "scripted", "turns": [
            {"tool_calls": [{"name": "lookup", "args": {"q": 1}}]},
            {"tool_calls": [{"name": "lookup", "args": {"q": 2}}]},
            {"tool_calls": [{"name": "lookup", "args": {"q": 3}}]},
            {"reply": "done"},
        ]},
        run_budget={"max_tool_calls": 2},
        journal={"level": "checkpoint", "path": args.db},
    )
    process = AgentProcess("reader", config, tools=[tool(lookup, effect="read")])
    await process.start()
    if args.inject and await process.inject(TriggerEvent("t", "manual", {}, event_id="ev-1")):
        print("ACK ev-1", flush=True)
    while process.status()["queue_size"] or process.active_runs():
        await asyncio.sleep(0.01)
    run = process.recent_runs()[-1] if process.recent_runs() else None
    print("IDLE", json.dumps({
        "recovered": process.recovered,
        "run": None if run is None else {"run_id": run.run_id, "state": run.state.value,
                                         "reason": run.reason, "tool_calls": run.tool_calls,
                                         "event_id": run.event.event_id},
    }), flush=True)
    await process.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
