"""Issue 37's durable agent run on the systems users would pick instead, on SQLite: DBOS
Transact (a durable workflow whose tool call is a step) and LangGraph (a model -> tool -> model
graph with a SQLite checkpointer, durability "sync"), each at its documented durable default.

The peers are not promptui's dependencies: install them into a venv of their own and run this
with it (``bench/durable_runs.py`` measures promptui on the same workload)::

    python -m venv /tmp/peers && /tmp/peers/bin/pip install dbos langgraph \\
        langgraph-checkpoint-sqlite aiosqlite
    /tmp/peers/bin/python bench/durable_peers.py --rounds 3

It prints serial and 50-producer runs/s and the bytes each run adds to the store, as JSON:
medians over the rounds, the systems alternating within each round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypedDict

from sqlite_bytes import used_bytes  # this folder's: the count durable_runs uses

LEDGER = Path(tempfile.gettempdir()) / "durable-peers-ledger.txt"


def book(ref: str, key: str) -> str:
    """The durable write: one ledger line with the call's idempotency key."""
    fd = os.open(LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key} {ref}\n".encode())
    finally:
        os.close(fd)
    return "booked " + ref


def model_turn(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The instant offline model: first a call of ``book``, then a reply."""
    if not any(m.get("role") == "tool" for m in history):
        return {"role": "assistant", "tool_call": {"name": "book", "args": {"ref": "inv-1"}}}
    return {"role": "assistant", "content": "booked"}


async def measure(run: Callable[[int], Awaitable[None]], events: int, producers: int,
                  store: Path, offset: int) -> dict[str, float]:
    """Runs/s for ``events`` runs from ``producers`` at once, and the bytes each adds."""
    before = used_bytes(store)
    per = events // producers

    async def producer(k: int) -> None:
        for i in range(per):
            await run(offset + k * per + i)

    started = time.perf_counter()
    await asyncio.gather(*(producer(k) for k in range(producers)))
    elapsed = time.perf_counter() - started
    done = per * producers
    return {"runs_per_s": round(done / elapsed, 1),
            "bytes_per_run": round((used_bytes(store) - before) / done, 1)}


# -- DBOS ----------------------------------------------------------------------------------------
async def dbos_round(folder: Path, events: int) -> dict[str, Any]:
    from dbos import DBOS

    store = folder / "dbos.sqlite"
    DBOS(config={"name": "durable-peers", "system_database_url": f"sqlite:///{store}"})

    @DBOS.step()
    async def book_step(ref: str, key: str) -> str:
        return book(ref, key)

    @DBOS.workflow()
    async def agent_run(i: int) -> str:
        history: list[dict[str, Any]] = [{"role": "user", "content": f"event {i}"}]
        turn = model_turn(history)
        history.append(turn)
        call = turn["tool_call"]
        key = f"{DBOS.workflow_id}:1"
        history.append({"role": "tool", "content": await book_step(call["args"]["ref"], key)})
        return str(model_turn(history)["content"])

    DBOS.launch()
    try:
        async def run(i: int) -> None:
            await agent_run(i)

        serial = await measure(run, events, 1, store, 0)
        concurrent = await measure(run, events, 50, store, 1_000_000)
    finally:
        DBOS.destroy()
    return {"serial": serial, "concurrent": concurrent}


# -- LangGraph -----------------------------------------------------------------------------------
class State(TypedDict):
    """The graph's state: the conversation, and the thread (the run's id)."""

    history: list[dict[str, Any]]
    thread: str


async def langgraph_round(folder: Path, events: int) -> dict[str, Any]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, StateGraph

    def model(state: State) -> dict[str, Any]:
        return {"history": [*state["history"], model_turn(state["history"])]}

    def tool(state: State) -> dict[str, Any]:
        call = state["history"][-1]["tool_call"]
        result = book(call["args"]["ref"], f"{state['thread']}:1")
        return {"history": [*state["history"], {"role": "tool", "content": result}]}

    def route(state: State) -> str:
        return "tool" if "tool_call" in state["history"][-1] else END

    builder = StateGraph(State)
    builder.add_node("model", model)
    builder.add_node("tool", tool)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tool", END])
    builder.add_edge("tool", "model")
    store = folder / "langgraph.sqlite"
    async with AsyncSqliteSaver.from_conn_string(str(store)) as saver:
        await saver.setup()
        graph = builder.compile(checkpointer=saver)

        async def run(i: int) -> None:
            thread = f"t{i}"
            await graph.ainvoke({"history": [{"role": "user", "content": f"event {i}"}],
                                 "thread": thread},
                                {"configurable": {"thread_id": thread}}, durability="sync")

        serial = await measure(run, events, 1, store, 0)
        concurrent = await measure(run, events, 50, store, 1_000_000)
    return {"serial": serial, "concurrent": concurrent}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--systems", default="dbos,langgraph")
    args = parser.parse_args()
    systems = {"dbos": dbos_round, "langgraph": langgraph_round}
    chosen = args.systems.split(",")
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in chosen}
    for _ in range(args.rounds):
        for name in chosen:  # alternate: drift in the machine's load hits every system
            with tempfile.TemporaryDirectory() as folder:
                rounds[name].append(asyncio.run(systems[name](Path(folder), args.events)))
    report: dict[str, Any] = {"benchmark": "durable_peers", "events": args.events,
                              "python": sys.version.split()[0]}
    for name, results in rounds.items():
        report[name] = {
            "median": {
                f"{phase}_{figure}": statistics.median(r[phase][figure] for r in results)
                for phase in ("serial", "concurrent")
                for figure in ("runs_per_s", "bytes_per_run")},
            "rounds": results}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
