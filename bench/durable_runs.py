"""The durable agent run, measured the way issue 37 compares promptui with DBOS and LangGraph.

Each event is one durable agent run: a scripted (instant, offline) model turn asks for one tool
call, the tool is a durable write (``effect: write``) that appends its idempotency key and the
event's id to a ledger file, then a final model turn replies. On the SQLite journal and on the
PostgreSQL journal (a throwaway server from the installed binaries unless --dsn is given),
alternating backends in each round, medians over the rounds:

* ``serial_runs_per_s``: one event injected, its run awaited to its end, then the next;
* ``concurrent_runs_per_s``: 50 producers doing the same at once;
* ``bytes_per_run``: the journal's growth over the serial runs, per run (SQLite: used pages
  after a WAL checkpoint; PostgreSQL: the journal tables' total relation size, after VACUUM);
* ``bytes_per_run_steady``: the same over half as many more runs on that journal, after that
  VACUUM: on PostgreSQL the pages the queue's and the open runs' indexes grew by in the burst
  (their rows are deleted as the runs end; only a VACUUM frees their index entries, as
  autovacuum does) are reused, as they are in a journal that has been running a while;
* ``ready_ms_clean``: a fresh interpreter (imports done) constructs the process and awaits
  ``start()`` on the journal the serial runs left (stopped cleanly): median of 5;
* ``ready_ms_after_kill``: the same after a SIGKILL with 50 runs in flight (their tool asleep);
* ``crash``: 600 events from 50 producers, SIGKILL once the ledger holds 300 lines, restart,
  run what is left: events acknowledged, completed exactly once, duplicated writes, parked
  (waiting for an operator: the kill left their write's outcome unknown), lost.

Also the import of ``from runtime_core import AgentProcess, ProcessConfig`` and ``promptui
--help`` (min of 5 fresh interpreters). Prints JSON.

    .venv/bin/python bench/durable_runs.py [--rounds 3] [--events 2000] [--backends sqlite,postgres]
                                           [--dsn DSN] [--skip crash,ready,import]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOOL_MODULE = "durable_ledger_tool"
TOOL_SOURCE = '''\
"""The benchmark's durable write: one ledger line per call (idempotency key, event id)."""
import asyncio
import os

from runtime_core.agent.tools import ToolContext


async def book(ref: str, ctx: ToolContext) -> str:
    """Book a reference in the ledger."""
    delay = float(os.environ.get("BENCH_TOOL_SLEEP", "0"))
    if delay:  # a run in flight: say so, then sleep until killed
        with open(os.environ["BENCH_LEDGER"] + ".started", "a", encoding="utf-8") as fh:
            fh.write(ctx.event.event_id + "\\n")
        await asyncio.sleep(delay)
    fd = os.open(os.environ["BENCH_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{ctx.idempotency_key} {ctx.event.event_id}\\n".encode())
    finally:
        os.close(fd)
    return "booked " + ref
'''
PROCESS = "bench"


def journal_config(backend: str, where: str) -> dict[str, Any]:
    if backend == "sqlite":
        return {"path": where}
    return {"backend": "postgres", "dsn": where}


def process_config(backend: str, where: str) -> Any:
    from runtime_core import ProcessConfig

    return ProcessConfig(
        model={"provider": "scripted", "turns": [
            {"tool_calls": [{"name": "book", "args": {"ref": "inv-1"}}]},
            {"reply": "booked"}]},
        tools=[{"path": f"{TOOL_MODULE}:book", "effect": "write"}],
        queue_size=2000,
        concurrency=50,  # the serial producer awaits each run: one at a time all the same
        journal=journal_config(backend, where),
    )


# -- in-process measures ---------------------------------------------------------------------
class Runs:
    """Runs a process and awaits each injected event's run end."""

    def __init__(self, process: Any) -> None:
        from runtime_core.events import RunFinished

        self.process = process
        self.ends: dict[str, asyncio.Future[str]] = {}
        loop = asyncio.get_running_loop()

        def on_event(event: object) -> None:
            if isinstance(event, RunFinished):
                future = self.ends.pop(event.event_id, None)
                if future is not None and not future.done():
                    future.set_result(event.state)

        self.loop = loop
        process.notifier.add_callback(on_event)

    async def one(self, i: int) -> str:
        from runtime_core import TriggerEvent

        event = TriggerEvent("bench", "manual", {"i": i})
        future: asyncio.Future[str] = self.loop.create_future()
        self.ends[event.event_id] = future
        await self.process.inject(event)
        return await future


async def throughput(backend: str, where: str, events: int, producers: int) -> dict[str, Any]:
    from runtime_core import AgentProcess

    process = AgentProcess(PROCESS, process_config(backend, where))
    await process.start()
    before = storage_bytes(backend, where)
    runs = Runs(process)
    per = events // producers
    batches_before = getattr(process.journal, "batches", 0)

    async def producer(k: int) -> None:
        for i in range(per):
            state = await runs.one(k * per + i)
            if state != "succeeded":
                raise RuntimeError(f"run ended {state}")

    started = time.perf_counter()
    await asyncio.gather(*(producer(k) for k in range(producers)))
    elapsed = time.perf_counter() - started
    batches = getattr(process.journal, "batches", 0) - batches_before
    await process.stop()
    done = per * producers
    result = {"runs": done, "seconds": round(elapsed, 3), "runs_per_s": round(done / elapsed, 1)}
    if batches:
        result["commits_per_run"] = round(batches / done, 2)
    result["bytes_per_run"] = round((storage_bytes(backend, where) - before) / done, 1)
    return result


def storage_bytes(backend: str, where: str) -> int:
    if backend == "sqlite":
        from sqlite_bytes import used_bytes  # this folder's: the count every benchmark uses

        return used_bytes(Path(where))
    import psycopg

    with psycopg.connect(where, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = current_schema()")]
        for table in tables:
            conn.execute(f"VACUUM {table}")
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname = current_schema()").fetchone()
        return int(row[0]) if row else 0


# -- children (fresh interpreters) -------------------------------------------------------------
async def child_ready(backend: str, where: str) -> None:
    """Print the ms from constructing the process to start() returning, then stop. What a
    start imports lazily is imported first (a warm-up process on a throwaway in-memory journal,
    and the journal backends' modules), as a long-running host has it: ``import_times``
    measures the imports."""
    import importlib

    from runtime_core import AgentProcess

    warm = process_config(backend, where).model_copy(
        update={"journal": process_config("sqlite", "")
                .journal.model_copy(update={"backend": "memory"})})
    warm_up = AgentProcess("warm-up", warm)
    await warm_up.start()
    await warm_up.stop()
    for module in ("runtime_core.journal.sqlite.journal", "runtime_core.journal.postgres.journal",
                   "aiosqlite", "psycopg", "psycopg_pool", "runtime_core.journal.factory"):
        importlib.import_module(module)
    config = process_config(backend, where)
    began = time.perf_counter()
    process = AgentProcess(PROCESS, config)
    await process.start()
    ready = (time.perf_counter() - began) * 1000
    print(json.dumps({"ready_ms": round(ready, 2)}), flush=True)
    await process.stop()


async def child_produce(backend: str, where: str, events: int, producers: int,
                        acks: str) -> None:
    """Inject ``events`` from ``producers`` at once, each run awaited; every acknowledged
    event's id is written to ``acks`` once inject returned. Runs until killed or done."""
    from runtime_core import AgentProcess, TriggerEvent

    process = AgentProcess(PROCESS, process_config(backend, where))
    await process.start()
    with open(acks, "a", buffering=1, encoding="utf-8") as out:

        async def producer(k: int) -> None:
            for i in range(events // producers):
                event = TriggerEvent("bench", "manual", {"i": k * 10_000 + i})
                await process.inject(event)
                out.write(event.event_id + "\n")

        await asyncio.gather(*(producer(k) for k in range(producers)))
        await asyncio.sleep(3600)  # the parent kills us


async def child_finish(backend: str, where: str) -> None:
    """Start on what a kill left, run until nothing is queued or running, print the status."""
    from runtime_core import AgentProcess

    process = AgentProcess(PROCESS, process_config(backend, where))
    await process.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status = process.status()
        if status["queue_size"] == 0 and status["active_runs"] == 0:
            break
        await asyncio.sleep(0.05)
    status = process.status()
    print(json.dumps({"queue_size": status["queue_size"], "active_runs": status["active_runs"],
                      "waiting_runs": status["waiting_runs"]}), flush=True)
    await process.stop()


def spawn(mode: str, backend: str, where: str, env: dict[str, str], *extra: str
          ) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--child", mode, "--backend", backend, "--where", where,
         *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def child_json(proc: subprocess.Popen[str], timeout: float = 180) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"child failed ({proc.returncode}): {err[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def ready_clean(backend: str, where: str, env: dict[str, str], times: int = 5) -> list[float]:
    return [child_json(spawn("ready", backend, where, env))["ready_ms"] for _ in range(times)]


def ledger_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.01)


def ready_after_kill(backend: str, where: str, env: dict[str, str], folder: Path
                     ) -> list[float]:
    """SIGKILL with 50 runs in flight (their tool asleep), then time the restart."""
    samples = []
    for attempt in range(3):
        ledger = folder / f"kill-ledger-{attempt}.txt"
        acks = folder / f"kill-acks-{attempt}.txt"
        slow = {**env, "BENCH_LEDGER": str(ledger), "BENCH_TOOL_SLEEP": "30"}
        proc = spawn("produce", backend, where, slow, "--events", "50", "--producers", "50",
                     "--acks", str(acks))
        started = ledger.with_name(ledger.name + ".started")
        wait_for(lambda started=started: len(ledger_lines(started)) >= 50, 60,
                 "50 runs in their tool")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        samples.append(child_json(spawn("ready", backend, where, env))["ready_ms"])
        # settle what the kill left (parked runs stay parked) so the next attempt starts clean
        child_json(spawn("finish", backend, where, env))
    return samples


def crash_check(backend: str, where: str, env: dict[str, str], folder: Path,
                events: int = 600, kill_at: int = 300) -> dict[str, Any]:
    ledger = folder / "crash-ledger.txt"
    acks = folder / "crash-acks.txt"
    env = {**env, "BENCH_LEDGER": str(ledger)}
    proc = spawn("produce", backend, where, env, "--events", str(events), "--producers", "50",
                 "--acks", str(acks))
    wait_for(lambda: len(ledger_lines(ledger)) >= kill_at or proc.poll() is not None, 120,
             f"{kill_at} ledger lines")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    at_kill = len(ledger_lines(ledger))
    status = child_json(spawn("finish", backend, where, env))
    acked = set(ledger_lines(acks))
    writes = Counter(line.split()[1] for line in ledger_lines(ledger))
    parked = parked_events(backend, where)
    written_once = {e for e, n in writes.items() if n == 1}
    return {
        "acknowledged": len(acked),
        "ledger_lines_at_kill": at_kill,
        "completed_exactly_once": len(acked & written_once),
        "duplicated_writes": sum(n - 1 for n in writes.values() if n > 1),
        "parked": len(acked & parked),
        "lost": len(acked - set(writes) - parked),
        "left_queued": status["queue_size"],
    }


def parked_events(backend: str, where: str) -> set[str]:
    if backend == "sqlite":
        conn = sqlite3.connect(where)
        try:
            rows = conn.execute("SELECT event_id FROM open_runs WHERE state = 'waiting'")
            return {r[0] for r in rows}
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(where) as conn:
        return {r[0] for r in conn.execute(
            "SELECT event_id FROM open_runs WHERE state = 'waiting'")}


def import_times(times: int = 5) -> dict[str, float]:
    def best(args: list[str]) -> float:
        samples = []
        for _ in range(times):
            began = time.perf_counter()
            subprocess.run(args, check=True, capture_output=True)
            samples.append(time.perf_counter() - began)
        return round(min(samples), 3)

    script = Path(sys.executable).with_name("promptui")  # the installed console script
    help_command = [str(script), "--help"] if script.exists() else [
        sys.executable, "-m", "promptui", "--help"]
    return {
        "import_runtime_core_s": best([sys.executable, "-c",
                                       "from runtime_core import AgentProcess, ProcessConfig"]),
        "promptui_help_s": best(help_command),
        "python_bare_s": best([sys.executable, "-c", "pass"]),
    }


# -- the rounds --------------------------------------------------------------------------------
def fresh_store(backend: str, folder: Path, name: str, server: Any) -> str:
    if backend == "sqlite":
        return str(folder / f"{name}.db")
    return str(server.create_database())


def one_round(backend: str, folder: Path, events: int, server: Any, env: dict[str, str],
              skip: set[str]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    where = fresh_store(backend, folder, "serial", server)
    os.environ["BENCH_LEDGER"] = str(folder / "serial-ledger.txt")
    result["serial"] = asyncio.run(throughput(backend, where, events, 1))
    result["steady"] = asyncio.run(throughput(backend, where, events // 2, 1))
    if "ready" not in skip:
        result["ready_ms_clean"] = ready_clean(backend, where, env)
    concurrent = fresh_store(backend, folder, "concurrent", server)
    os.environ["BENCH_LEDGER"] = str(folder / "concurrent-ledger.txt")
    result["concurrent"] = asyncio.run(throughput(backend, concurrent, events, 50))
    if "ready" not in skip:
        result["ready_ms_after_kill"] = ready_after_kill(backend, where, env, folder)
    if "crash" not in skip:
        result["crash"] = crash_check(backend, fresh_store(backend, folder, "crash", server),
                                      env, folder)
    return result


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    def med(values: list[float]) -> float:
        return round(statistics.median(values), 1)

    out: dict[str, Any] = {
        "serial_runs_per_s": med([r["serial"]["runs_per_s"] for r in rounds]),
        "concurrent_runs_per_s": med([r["concurrent"]["runs_per_s"] for r in rounds]),
        "bytes_per_run": med([r["serial"]["bytes_per_run"] for r in rounds]),
        "bytes_per_run_steady": med([r["steady"]["bytes_per_run"] for r in rounds]),
        "serial_commits_per_run": med([r["serial"].get("commits_per_run", 0) for r in rounds]),
    }
    if "ready_ms_clean" in rounds[0]:
        out["ready_ms_clean"] = med([statistics.median(r["ready_ms_clean"]) for r in rounds])
        kills = [v for r in rounds for v in r["ready_ms_after_kill"]]
        out["ready_ms_after_kill"] = [min(kills), max(kills)]
    if "crash" in rounds[0]:
        out["crash"] = {k: sum(r["crash"][k] for r in rounds) for k in rounds[0]["crash"]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--dsn", default=None, help="a PostgreSQL server to create databases in")
    parser.add_argument("--skip", default="", help="comma list of: crash, ready, import")
    parser.add_argument("--child", default=None)
    parser.add_argument("--backend", default="sqlite")
    parser.add_argument("--where", default="")
    parser.add_argument("--producers", type=int, default=50)
    parser.add_argument("--acks", default="")
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, os.environ["BENCH_TOOL_DIR"])
        os.environ.setdefault("BENCH_LEDGER", os.devnull)
        if args.child == "ready":
            asyncio.run(child_ready(args.backend, args.where))
        elif args.child == "produce":
            asyncio.run(child_produce(args.backend, args.where, args.events, args.producers,
                                      args.acks))
        elif args.child == "finish":
            asyncio.run(child_finish(args.backend, args.where))
        return
    tools = Path(tempfile.mkdtemp(prefix="durable-runs-tool-"))
    (tools / f"{TOOL_MODULE}.py").write_text(TOOL_SOURCE, encoding="utf-8")
    sys.path.insert(0, str(tools))
    skip = set(filter(None, args.skip.split(",")))
    backends = args.backends.split(",")
    server = None
    if "postgres" in backends:
        sys.path.insert(0, str(ROOT))
        from tests.helpers.postgres import PgServer

        server = DsnServer(args.dsn) if args.dsn else PgServer()
    env = {**os.environ, "BENCH_TOOL_DIR": str(tools),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tools),
                                                       os.environ.get("PYTHONPATH", "")]))}
    import runtime_core

    report: dict[str, Any] = {"benchmark": "durable_runs", "events": args.events,
                              "rounds": args.rounds, "python": sys.version.split()[0],
                              "runtime_core": str(Path(runtime_core.__file__).parent)}
    per_backend: dict[str, list[dict[str, Any]]] = {b: [] for b in backends}
    try:
        for _ in range(args.rounds):
            for backend in backends:  # alternate: drift in the machine's load hits both
                with tempfile.TemporaryDirectory() as folder:
                    per_backend[backend].append(one_round(backend, Path(folder), args.events,
                                                          server, env, skip))
    finally:
        if server is not None:
            server.cleanup()
    for backend, rounds in per_backend.items():
        report[backend] = {"median": summary(rounds), "rounds": rounds}
    if "import" not in skip:
        report["import"] = import_times()
    print(json.dumps(report, indent=2))


class DsnServer:
    """An existing PostgreSQL server: each store is a fresh database on it."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.count = 0

    def create_database(self) -> str:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        self.count += 1
        name = f"durable_runs_{os.getpid()}_{self.count}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        params = conninfo_to_dict(self.dsn)
        params["dbname"] = name
        return make_conninfo(**params)

    def cleanup(self) -> None:
        """Databases are left for the operator of the server to drop."""


if __name__ == "__main__":
    main()
