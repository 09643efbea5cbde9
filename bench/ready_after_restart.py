"""Ready after a restart: how long ``AgentProcess(name, config)`` + ``await start()`` takes on a
journal that already holds many finished runs, in a fresh interpreter with the imports done.

The workload (issue 37): each event is one durable agent run: a scripted model turn asking for
one tool call, the tool (``effect: write``) appends ``ctx.idempotency_key`` to a ledger file,
then a final scripted reply. For each backend (SQLite, PostgreSQL) and each journal length
(``--runs``) a producer subprocess runs that many events and stops cleanly. Then:

- ``clean``: a fresh interpreter imports everything, constructs the process, times the start,
  then stops cleanly; ``--samples`` times, the median reported.
- ``kill``: (each sample on its own copy of the journal) a producer restarts the process,
  injects 50 events whose tool sleeps, and is SIGKILLed once 50 runs are in flight (their
  write intents journaled); then a fresh interpreter times the start, which recovers them
  (each becomes ``waiting``: unknown write outcome).

Each timed start also reports where its time went: perf_counter spans around the start's
steps (journal open, recovery and its reads, the parts' restore, the assembly, triggers,
workers), and with ``--cprofile`` the top functions by cumulative time.

Usage: python bench/ready_after_restart.py [--runs 2000,20000] [--samples 5]
       [--backends sqlite,postgres] [--cases clean,kill] [--cprofile]
Prints JSON: per backend, length and case, the median, all samples and the spans' medians.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NAME = "bench"
#: Modules a start imports lazily (to keep ``import runtime_core`` light): imported before the
#: clock, as a long-running host has them; ``imported_in_start`` lists any the start still
#: imported.
START_IMPORTS = ("runtime_core.process.dispatch", "runtime_core.journal.sqlite.journal",
                 "runtime_core.journal.postgres.journal", "runtime_core.journal.factory",
                 "runtime_core.journal.retention", "runtime_core.journal.memory",
                 "aiosqlite", "pydantic._internal._dataclasses", "runtime_core.process.intake",
                 "runtime_core.process.open_mode", "runtime_core.process.operator",
                 "runtime_core.process.rewinding", "runtime_core.process.takeover")
IN_FLIGHT = 50
TOOL_SOURCE = '''\
"""The bench's write tool: appends the idempotency key to a ledger (then sleeps when asked:
the in-flight case, IN_FLIGHT runs at once, so async)."""
import asyncio
import os

from runtime_core.agent.tools import ToolContext


async def book(ref: str, ctx: ToolContext) -> str:
    """Book a reference in the ledger."""
    fd = os.open(os.environ["LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{ctx.idempotency_key} {ref}\\n".encode())
    finally:
        os.close(fd)
    if os.environ.get("LEDGER_SLEEP"):
        await asyncio.sleep(float(os.environ["LEDGER_SLEEP"]))  # in flight, many at once
    return "booked " + ref
'''


def journal_config(backend: str, target: str) -> dict[str, Any]:
    if backend == "sqlite":
        return {"path": target}
    return {"backend": "postgres", "dsn": target}


def config_dict(backend: str, target: str) -> dict[str, Any]:
    return {
        "model": {"provider": "scripted", "turns": [
            {"tool_calls": [{"name": "book", "args": {"ref": "inv-1"}}]}, {"reply": "booked"}]},
        "tools": [{"path": "ledger_tool:book", "effect": "write"}],
        "journal": journal_config(backend, target),
        "concurrency": IN_FLIGHT,
    }


# -- the child roles ---------------------------------------------------------------------------
async def produce(backend: str, target: str, n: int) -> None:
    """Run ``n`` events (50 at a time) and stop cleanly."""
    from runtime_core import AgentProcess, ProcessConfig, TriggerEvent

    process = AgentProcess(NAME, ProcessConfig.model_validate(config_dict(backend, target)))
    await process.start()
    done = 0
    while done < n:  # waves of IN_FLIGHT: the queue never overflows into dead letters
        wave = min(IN_FLIGHT, n - done)
        target = process.invocation_count + wave
        for i in range(done, done + wave):
            if not await process.inject(TriggerEvent("bench", "manual", {"i": i})):
                raise RuntimeError(f"event {i} was dead-lettered")
        while process.invocation_count < target:
            await asyncio.sleep(0.002)
        done += wave
    await process.stop()


async def produce_in_flight(backend: str, target: str, ledger: Path) -> None:
    """Start, inject IN_FLIGHT events whose tool sleeps, print 'ready' once every one of them
    has its write intent journaled (the ledger holds IN_FLIGHT lines), then wait to be killed."""
    from runtime_core import AgentProcess, ProcessConfig, TriggerEvent

    process = AgentProcess(NAME, ProcessConfig.model_validate(config_dict(backend, target)))
    await process.start()
    before = ledger.read_text().count("\n") if ledger.exists() else 0
    for i in range(IN_FLIGHT):
        await process.inject(TriggerEvent("bench", "manual", {"in_flight": i}))
    while (ledger.read_text().count("\n") if ledger.exists() else 0) < before + IN_FLIGHT:
        await asyncio.sleep(0.005)
    assert process.journal is not None
    await process.journal.flush()
    print("ready", flush=True)
    await asyncio.sleep(3600)


class Spans:
    """perf_counter spans around named steps (wrapped functions), summed per name."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    @contextmanager
    def span(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - t0) * 1000
            self.calls[name] = self.calls.get(name, 0) + 1

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        original: Callable[..., Any] = getattr(owner, attr)
        spans = self
        if asyncio.iscoroutinefunction(original):
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                with spans.span(name):
                    return await original(*args, **kwargs)
            setattr(owner, attr, timed_async)
        else:
            def timed(*args: Any, **kwargs: Any) -> Any:
                with spans.span(name):
                    return original(*args, **kwargs)
            setattr(owner, attr, timed)


def instrument(spans: Spans) -> None:
    """Wrap the start's steps (imports happen here too: all before the timed start)."""
    from runtime_core.delivery.queue import Delivery
    from runtime_core.journal import factory, retention  # noqa: F401  (imported lazily)
    from runtime_core.journal.postgres import journal as pg_journal
    from runtime_core.journal.postgres import schema as pg_schema
    from runtime_core.journal.replay import ReplayEngine
    from runtime_core.journal.sql_reads import SqlReads
    from runtime_core.journal.sqlite import check as sq_check
    from runtime_core.journal.sqlite import journal as sq_journal
    from runtime_core.journal.sqlite import schema as sq_schema
    from runtime_core.process import assembly, journaling, supervisor, triggers
    from runtime_core.runs import recovery

    spans.wrap(journaling, "open_for_writing", "journal.open")
    spans.wrap(sq_journal.SQLiteJournal, "_take", "journal.open/sqlite lock+check")
    spans.wrap(sq_journal, "found_beside", "journal.open/sqlite left behind")
    spans.wrap(sq_journal, "connect_writer", "journal.open/sqlite writer (pragmas, migrate)")
    spans.wrap(sq_check, "find_damage", "journal.open/sqlite check (find_damage)")
    spans.wrap(sq_journal, "connect_reader", "journal.open/sqlite reader")
    spans.wrap(sq_schema, "migrate", "journal.open/sqlite migrate")
    spans.wrap(pg_journal.PostgresJournal, "_connect", "journal.open/pg connect")
    spans.wrap(pg_journal, "migrate", "journal.open/pg migrate")
    spans.wrap(pg_schema, "migrate", "journal.open/pg migrate")
    spans.wrap(pg_journal.AsyncConnectionPool, "open", "journal.open/pg pool")
    spans.wrap(retention, "retain", "retention (background start)")
    spans.wrap(journaling, "recover_process", "recovery")
    spans.wrap(ReplayEngine, "recover", "recovery/checkpoint+since")
    spans.wrap(ReplayEngine, "conversation", "recovery/conversation")
    for method in ("last_checkpoint", "pending_events", "dead_letter_count", "dead_letters",
                   "open_runs", "read"):
        spans.wrap(SqlReads, method, f"recovery/read {method}")
    spans.wrap(recovery, "full_identity", "recovery/full_identity")
    spans.wrap(recovery, "rebuild_run", "recovery/rebuild_run")
    spans.wrap(journaling.ProcessJournal, "_take_back", "restore (health/budget/mission, queue)")
    spans.wrap(assembly.Assembly, "build", "assembly (parts, model, tools, executor)")
    spans.wrap(assembly, "build_tools_within", "assembly/tools import thread")
    spans.wrap(triggers.TriggerSet, "start_all", "triggers start")
    spans.wrap(Delivery, "start_workers", "workers start")
    spans.wrap(supervisor.Supervisor, "_start_locked", "start (under lock)")


async def ready(backend: str, target: str, cprofile: bool) -> dict[str, Any]:
    """Time one start in this (fresh) interpreter, imports done first; then stop cleanly."""
    import ledger_tool  # noqa: F401  (the tool's import is an import: done before the clock)

    from runtime_core import AgentProcess, ProcessConfig

    for module in START_IMPORTS:  # what a start imports lazily: imports, not the start's time
        importlib.import_module(module)
    spans = Spans()
    instrument(spans)
    before = set(sys.modules)
    config = ProcessConfig.model_validate(config_dict(backend, target))
    profiler = None
    if cprofile:
        import cProfile
        profiler = cProfile.Profile()
        profiler.enable()
    t0 = time.perf_counter()
    process = AgentProcess(NAME, config)
    await process.start()
    elapsed = (time.perf_counter() - t0) * 1000
    if profiler is not None:
        profiler.disable()
    imported = sorted(set(sys.modules) - before)
    summary = dict(process.recovered or {})
    await process.stop()
    result: dict[str, Any] = {
        "ms": round(elapsed, 2), "spans": {k: round(v, 2) for k, v in spans.ms.items()},
        "calls": spans.calls, "waiting_runs": summary.get("waiting_runs"),
        "entries_read": summary.get("entries_read"),
        "invocation_count": summary.get("invocation_count"), "imported_in_start": imported}
    if profiler is not None:
        import io
        import pstats
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
        result["cprofile"] = out.getvalue()
    return result


# -- the driver --------------------------------------------------------------------------------
def child(role: str, backend: str, target: str, folder: Path, *extra: str,
          wait: bool = True) -> Any:
    env = dict(os.environ, LEDGER=str(folder / "ledger.txt"),
               PYTHONPATH=os.pathsep.join([str(folder), str(ROOT)]))
    if role == "in-flight":
        env["LEDGER_SLEEP"] = "600"
    cmd = [sys.executable, __file__, "--role", role, "--backend", backend, "--target", target,
           *extra]
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{role} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1]) if role == "ready" else None


def kill_in_flight(backend: str, target: str, folder: Path) -> None:
    proc = child("in-flight", backend, target, folder, wait=False)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"the in-flight producer said {line!r}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    names = sorted({k for s in samples for k in s["spans"]})
    return {
        "median_ms": round(statistics.median(s["ms"] for s in samples), 2),
        "samples_ms": [s["ms"] for s in samples],
        "spans_median_ms": {n: round(statistics.median(s["spans"].get(n, 0.0)
                                                       for s in samples), 2) for n in names},
        "span_calls": samples[-1]["calls"],
        "waiting_runs": samples[-1]["waiting_runs"],
        "entries_read": samples[-1]["entries_read"],
        "imported_in_start": samples[-1]["imported_in_start"],
        **({"cprofile": samples[-1]["cprofile"]} if "cprofile" in samples[-1] else {}),
    }


class Backend:
    """Where journals live for one backend: SQLite files, or PostgreSQL databases."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.kind, self.folder = kind, folder
        self.server: Any = None
        if kind == "postgres":
            from tests.helpers.postgres import PgServer
            self.server = PgServer()

    def new(self, label: str) -> str:
        if self.kind == "sqlite":
            return str(self.folder / f"{label}.db")
        return str(self.server.create_database())

    def copy(self, source: str, label: str) -> str:
        if self.kind == "sqlite":
            target = str(self.folder / f"{label}.db")
            shutil.copyfile(source, target)  # a clean stop folded the WAL in
            return target
        import psycopg
        name = source.split("///")[1].split("?")[0]
        admin = source.replace(f"///{name}", "///postgres")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{label}" TEMPLATE "{name}"')
        return source.replace(f"///{name}", f"///{label}")

    def close(self) -> None:
        if self.server is not None:
            self.server.cleanup()


def drive(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ready-") as tmp:
        folder = Path(tmp)
        (folder / "ledger_tool.py").write_text(TOOL_SOURCE)
        for kind in args.backends.split(","):
            backend = Backend(kind, folder)
            try:
                for n in (int(x) for x in args.runs.split(",")):
                    base = backend.new(f"base{n}")
                    t0 = time.perf_counter()
                    child("produce", kind, base, folder, "--n", str(n))
                    fill_s = time.perf_counter() - t0
                    extra = ["--cprofile"] if args.cprofile else []
                    for case in args.cases.split(","):
                        samples = []
                        for i in range(args.samples):
                            if case == "clean":
                                target = base
                            else:
                                target = backend.copy(base, f"k{n}x{i}")
                                kill_in_flight(kind, target, folder)
                            samples.append(child("ready", kind, target, folder, *extra))
                        results[f"{kind}/{n}/{case}"] = {"fill_s": round(fill_s, 1),
                                                         **summarise(samples)}
                        print(f"{kind}/{n}/{case}: {results[f'{kind}/{n}/{case}']['median_ms']}"
                              " ms", file=sys.stderr, flush=True)
            finally:
                backend.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="2000,20000")
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--cases", default="clean,kill")
    parser.add_argument("--cprofile", action="store_true")
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "produce":
        asyncio.run(produce(args.backend, args.target, args.n))
    elif args.role == "in-flight":
        asyncio.run(produce_in_flight(args.backend, args.target,
                                      Path(os.environ["LEDGER"])))
    elif args.role == "ready":
        print(json.dumps(asyncio.run(ready(args.backend, args.target, args.cprofile))))
    else:
        print(json.dumps({"benchmark": "ready_after_restart", "results": drive(args)},
                         indent=2))


if __name__ == "__main__":
    main()
