"""A program that stops its processes exits (DESIGN: "What a part starts, its stop ends").

Each test runs a program in a subprocess: one process with every trigger type (cron, interval,
webhook on port 0, file_watch, event, message), an MCP server over stdio and a SQLite journal.
It fires every trigger it can and waits for the runs, ends the process (``stop()``,
``close()`` or ``AgentRuntime.stop_all()``), starts it again and runs it once more (what the
end closed is opened again), ends it again and returns from ``asyncio.run()``. The program must
then exit by itself, status 0, within 5 s. If it does not, a daemon watchdog inside it prints
the threads still alive (the ones that hold the interpreter) and ends it with status 3.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers.workers import LEDGER_SERVER

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXIT_WITHIN = 5.0  # seconds from main() returning to the interpreter having exited
WHOLE_PROGRAM = 120.0  # a cold stdio MCP server imports the SDK first; slow boxes need room

PROGRAM = textwrap.dedent('''
    import asyncio, json, os, sys, threading, time, urllib.request

    from runtime_core import (AgentProcess, AgentRuntime, JournalConfig, ProcessConfig,
                              ToolContext, TriggerEvent)
    from runtime_core.journal import SQLiteJournal

    MODE, TMP = sys.argv[1], sys.argv[2]
    WATCHED = os.path.join(TMP, "watched")
    JOURNAL = os.path.join(TMP, "journal.db")
    CONFIG = ProcessConfig(
        model={"provider": "scripted",
               "turns": [{"tool_calls": [{"name": "peek"}]}, {"reply": "checked"}]},
        journal=JournalConfig(level="checkpoint", path=JOURNAL),
        servers={"ledger": {"type": "stdio", "command": sys.executable,
                            "args": [LEDGER_SERVER], "env": {"LEDGER": os.path.join(TMP, "l")},
                            "timeout": 60}},
        triggers=[
            {"type": "cron", "cron_expression": "0 0 1 1 *"},
            {"type": "interval", "seconds": 3600},
            {"type": "webhook", "webhook_host": "127.0.0.1", "webhook_port": 0,
             "webhook_path": "/hook"},
            {"type": "file_watch", "watch_path": WATCHED, "debounce": 0.05},
            {"type": "event", "event_type": "thing.happened"},
            {"type": "message", "topic": "news"},
        ])

    async def condition(predicate, what, timeout=30.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}")
            await asyncio.sleep(0.01)

    async def server_pid(process):
        ctx = ToolContext(process.name, "r", 1, TriggerEvent("t", "manual", {}), {})
        return json.loads(await process.tools()["whoami"].invoke({}, ctx))["pid"]

    def post(port):
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/hook", data=b'{"n": 1}', method="POST",
            headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 202, answer.status

    async def every_trigger(process, runtime):
        """Fire each trigger that can be fired on demand; wait for all of their runs."""
        before = process.invocation_count
        webhook = next(t for t in process.status()["triggers"] if t["type"] == "webhook")
        await asyncio.to_thread(post, webhook["port"])
        with open(os.path.join(WATCHED, f"f{before}.txt"), "w") as handle:
            handle.write("x")
        process.event_bus.emit("thing.happened", {"n": 1}, source="test")
        process.broker.publish("news", "hello", sender="test")
        await process.inject(TriggerEvent("manual", "manual", {"reason": "ad-hoc check"}))
        await condition(lambda: process.invocation_count >= before + 5, "five runs")

    async def main():
        runtime = AgentRuntime() if MODE == "stop_all" else None
        journal = SQLiteJournal(JOURNAL) if MODE == "given_journal" else None
        if runtime is not None:
            process = runtime.add_process("all-triggers", CONFIG)
        else:
            process = AgentProcess("all-triggers", CONFIG, journal=journal)
        pids = []
        for cycle in (1, 2):
            await (runtime.start_all() if runtime is not None else process.start())
            pids.append(await server_pid(process))
            if cycle == 1:
                await every_trigger(process, runtime)
                if MODE == "no_stop":  # a script that forgets stop(): main() just returns
                    print("SERVERS", json.dumps(pids), flush=True)
                    return
                if MODE == "raises":  # or one that fails half-way
                    print("SERVERS", json.dumps(pids), flush=True)
                    raise RuntimeError("the script failed")
            else:  # started again: the journal, the triggers and the server work again
                await process.inject(TriggerEvent("manual", "manual", {"cycle": 2}))
                await condition(lambda: process.invocation_count >= 6, "the sixth run")
            if MODE == "close":
                await process.close()
            elif MODE == "stop_all":
                await runtime.stop_all()
            else:
                await process.stop()
            if journal is not None:
                await journal.close()  # the caller's journal: its own close is enough
            assert process.state.value == "stopped", process.state
        left = [t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        print("TASKS", json.dumps(left), flush=True)
        print("SERVERS", json.dumps(pids), flush=True)
        print("RUNS", process.invocation_count, flush=True)

    def watchdog():
        time.sleep(EXIT_WITHIN - 1)
        alive = [f"{t.name} (daemon={t.daemon})" for t in threading.enumerate()
                 if t is not threading.current_thread()]
        print("STILL ALIVE", json.dumps(alive), file=sys.stderr, flush=True)
        os._exit(3)

    try:
        asyncio.run(main())
    except RuntimeError as exc:
        print("RAISED", json.dumps(str(exc)), flush=True)
    print("MAIN RETURNED", time.time(), flush=True)
    threading.Thread(target=watchdog, name="watchdog", daemon=True).start()
''')


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited; it only waits for its parent to reap it
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def run_program(mode: str, tmp: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run PROGRAM; returns its outcome and the seconds between main() returning and the
    program's exit as seen here."""
    (tmp / "watched").mkdir()
    header = (f"LEDGER_SERVER = {str(LEDGER_SERVER)!r}\nEXIT_WITHIN = {EXIT_WITHIN!r}\n")
    code = header + PROGRAM
    child = subprocess.Popen([sys.executable, "-c", code, mode, str(tmp)], cwd=tmp,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        out, errors = child.communicate(timeout=WHOLE_PROGRAM)
        exited = time.time()
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    done = subprocess.CompletedProcess(child.args, child.returncode, out, errors)
    returned = [line for line in out.splitlines() if line.startswith("MAIN RETURNED")]
    assert returned, f"main() did not return (status {child.returncode}):\n{out}\n{errors}"
    return done, exited - float(returned[0].split()[-1])


def line(done: subprocess.CompletedProcess[str], key: str) -> object:
    found = next(lin for lin in done.stdout.splitlines() if lin.startswith(key + " "))
    return json.loads(found[len(key) + 1:])


@pytest.mark.parametrize("mode", ["stop", "close", "stop_all", "given_journal"])
def test_a_program_that_stops_its_process_exits(mode: str, tmp_path: Path) -> None:
    done, took = run_program(mode, tmp_path)
    assert done.returncode == 0, (
        f"status {done.returncode} (3: threads still running {EXIT_WITHIN - 1:g}s after "
        "main() returned)"
        f"\n{done.stdout}\n{done.stderr[-3000:]}")
    assert took < EXIT_WITHIN, f"exited {took:.1f}s after main() returned"
    assert line(done, "TASKS") == [], "tasks left on the loop after the stop"
    assert line(done, "RUNS") == 6
    pids = line(done, "SERVERS")
    assert isinstance(pids, list) and len(set(pids)) == 2  # the second start reconnected
    assert not [pid for pid in pids if alive(pid)], "an MCP server outlived its process"
    assert "Traceback" not in done.stderr and "CRITICAL" not in done.stderr, done.stderr
    # Both ends were journaled, each after its checkpoint: the journal was open again for the
    # second cycle, and closed cleanly after it.
    with sqlite3.connect(tmp_path / "journal.db") as db:
        rows = db.execute("SELECT entry_type, data FROM entries WHERE process = ? ORDER BY seq",
                          ("all-triggers",)).fetchall()
    stops = [i for i, (kind, data) in enumerate(rows) if kind == "state_transition"
             and json.loads(data)["to_state"] == "stopped"]
    assert len(stops) == 2
    assert all(rows[i - 1][0] == "checkpoint" for i in stops)


@pytest.mark.parametrize("mode", ["no_stop", "raises"])
def test_a_program_that_never_stops_its_process_still_exits(mode: str, tmp_path: Path) -> None:
    """No thread of ours keeps a finished program alive: a script that returns from
    asyncio.run() without stop(), or raises, exits; what it acknowledged is in the journal
    (its runs ended there), and its MCP server goes with it."""
    done, took = run_program(mode, tmp_path)
    assert done.returncode == 0, (
        f"status {done.returncode} (3: threads still running {EXIT_WITHIN - 1:g}s after "
        f"main() returned)\n{done.stdout}\n{done.stderr[-3000:]}")
    assert took < EXIT_WITHIN, f"exited {took:.1f}s after main() returned"
    if mode == "raises":
        assert line(done, "RAISED") == "the script failed"
    pids = line(done, "SERVERS")
    assert isinstance(pids, list) and len(pids) == 1
    deadline = time.monotonic() + 10  # the server sees its stdin close, then exits
    while alive(pids[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pids[0]), "an MCP server outlived its program"
    with sqlite3.connect(tmp_path / "journal.db") as db:
        ends = db.execute("SELECT count(*) FROM entries WHERE process = ? AND entry_type = "
                          "'run_finished'", ("all-triggers",)).fetchone()[0]
    assert ends == 5  # the five runs the script waited for are durable
