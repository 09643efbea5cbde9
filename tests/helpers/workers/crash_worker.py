"""A runtime in a subprocess, for the SIGKILL tests.

It opens (and recovers) one journaled process whose write tool appends to an outside ledger
file with its idempotency key (a Python tool, or with --mcp a tool of an MCP stdio server),
injects new events (printing ``ACK <id>`` once each is
acknowledged), optionally reconciles runs left waiting by checking the ledger (what a
connector-specific reconciliation would do), and reports ``IDLE <json>`` when everything has run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from runtime_core import AgentProcess, ProcessConfig, ToolContext, TriggerEvent, tool

LEDGER: Path
LEDGER_SERVER = Path(__file__).resolve().parent / "ledger_server.py"


def peek(ctx: ToolContext) -> int:
    """A read: how many records so far."""
    return int(ctx.get("count", 0))


def record(item: str, ctx: ToolContext) -> str:
    """A write with an outside effect: one ledger line per call, keyed for deduplication."""
    line = f"{ctx.idempotency_key} {ctx.event.event_id} {item}\n".encode()
    fd = os.open(LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:  # one write(2) of a short line: a kill cannot leave half a line behind
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    ctx.set("count", int(ctx.get("count", 0)) + 1)
    return "written"


def ledger_keys() -> set[str]:
    if not LEDGER.exists():
        return set()
    return {line.split()[0] for line in LEDGER.read_text().splitlines() if line.strip()}


def say(*parts: Any) -> None:
    print(*parts, flush=True)


async def main() -> None:
    global LEDGER
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--inject", type=int, default=0)
    parser.add_argument("--prefix", default="ev")
    parser.add_argument("--reconcile", action="store_true")
    parser.add_argument("--exit-when-idle", action="store_true")
    parser.add_argument("--mcp", action="store_true",
                        help="peek and record are tools of an MCP stdio server")
    parser.add_argument("--reply-only", action="store_true",
                        help="the model only replies: runs that call no tool")
    parser.add_argument("--recover", choices=("true", "false", "strict"), default="true",
                        help="the journal's recover_on_start")
    parser.add_argument("--on-damage", choices=("refuse", "start_fresh"), default="refuse",
                        help="the journal's on_damage")
    args = parser.parse_args()
    LEDGER = Path(args.ledger)
    record_args = {"item": "$payload.i"}
    servers: dict[str, Any] = {}
    tools = [tool(peek, effect="read"), tool(record, effect="write")]
    if args.mcp:
        record_args["event_id"] = "$event_id"
        servers = {"ledger": {"command": "python", "args": [str(LEDGER_SERVER)],
                              "env": {"LEDGER": str(LEDGER)}, "timeout": 60}}
        tools = []
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "peek", "args": {}}, {"name": "record", "args": record_args}]},
        {"reply": "ok"},
    ]
    if args.reply_only:
        turns, tools, servers = [{"reply": "ok"}], [], {}
    config = ProcessConfig(
        model={"provider": "scripted", "turns": turns},
        servers=servers,
        journal={"level": "checkpoint", "path": args.db,
                 "recover_on_start": {"true": True, "false": False}.get(args.recover,
                                                                        args.recover),
                 "on_damage": args.on_damage},
        trigger_delivery={"max_retries": 0},
        max_consecutive_failures=1000,
    )
    process = AgentProcess("crashy", config, tools=tools)
    await process.start()
    say("READY", json.dumps(process.recovered))
    reconciled: list[dict[str, Any]] = []
    if args.reconcile:
        keys = ledger_keys()
        for run in process.waiting_runs():
            detail = process.waiting_detail(run.run_id)
            applied = detail["idempotency_key"] in keys
            await process.reconcile(run.run_id, "applied" if applied else "not_applied",
                                    result="written" if applied else None,
                                    note="checked the ledger", actor="crash-test")
            reconciled.append({**detail, "outcome": "applied" if applied else "not_applied"})
    for i in range(args.inject):
        event = TriggerEvent("crash-test", "manual", {"i": f"{args.prefix}-{i}"},
                             event_id=f"{args.prefix}-{i}")
        if await process.inject(event):
            say("ACK", event.event_id)
    while process.status()["queue_size"] or process.active_runs():
        await asyncio.sleep(0.01)
    status = process.status()
    say("IDLE", json.dumps({
        "count": process.context.get("count", 0),
        "invocation_count": status["invocation_count"],
        "waiting": [process.waiting_detail(r.run_id) for r in process.waiting_runs()],
        "reconciled": reconciled,
        "dead_letters": [{"event_id": d["event"].event_id, "reason": d["reason"]}
                         for d in process.dead_letters],
        "recovered": process.recovered,
    }))
    if not args.exit_when_idle:
        await asyncio.Event().wait()
    await process.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
