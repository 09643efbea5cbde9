"""``promptui run``: the runtime without the control room, with a live status table."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.live import Live
from rich.logging import RichHandler
from rich.markup import escape
from rich.table import Table

from runtime_core import AgentRuntime

BUNDLED_DEMO = Path(__file__).resolve().parent.parent / "demo_manifests"


def load_runtime(paths: list[Path], *,
                 journal: Path | None = None) -> tuple[AgentRuntime, list[str]]:
    """A runtime with every process the given files and folders declare, and their warnings.
    ``journal`` moves every journaling process's journal to that file. Raises ManifestError
    listing every problem."""
    from runtime_core.manifest import Manifest, ManifestError, load_directory, load_manifest

    manifests: list[Manifest] = []
    problems = []
    for path in paths:
        try:
            if path.is_dir():
                manifests.extend(load_directory(path))
            else:
                manifests.append(load_manifest(path))
        except ManifestError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ManifestError(problems)
    if journal is not None:
        for manifest in manifests:
            if manifest.config.journal.level != "none":
                manifest.config.journal.path = str(journal)
    runtime = AgentRuntime()
    runtime._add_manifests(manifests)  # one validated batch
    return runtime, [w for m in manifests for w in m.warnings]


def load_or_exit(paths: list[Path] | None, err: Console, *,
                 journal: Path | None = None) -> AgentRuntime:
    """``load_runtime`` for a command (the bundled demo when no path is given): every problem
    printed and exit 1, or the runtime with its warnings printed."""
    from runtime_core.manifest import ManifestError

    try:
        runtime, warnings = load_runtime(list(paths) if paths else [BUNDLED_DEMO],
                                         journal=journal)
    except ManifestError as exc:
        for problem in exc.problems:
            err.print(escape(str(problem)))
        raise typer.Exit(1) from None
    for warning in warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    return runtime


def status_table(runtime: AgentRuntime, elapsed: float, width: int = 120) -> Table:
    # A light box keeps all the counters on an 80-column SSH terminal; the reply column
    # takes whatever room is left.
    table = Table(title=f"promptui runtime — {elapsed:5.1f}s  (Ctrl+C stops cleanly)",
                  title_justify="left", expand=False, box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("process", no_wrap=True, overflow="ellipsis", max_width=16)
    table.add_column("state", no_wrap=True, min_width=9, max_width=18)
    for column in ("ok", "fail", "rst", "queue", "retry", "dead", "wait"):
        table.add_column(column, no_wrap=True, justify="right", min_width=len(column))
    table.add_column("last reply / error", overflow="ellipsis", no_wrap=True,
                     max_width=max(10, width - 75))
    for name, process in runtime.processes.items():
        status = process.status()
        state = status["state"] + (f" ({status['suspend_reason']})"
                                   if status["suspend_reason"] else "")
        table.add_row(name, state, str(status["invocation_count"]),
                      str(status["consecutive_failures"]), str(status["restart_count"]),
                      str(status["queue_size"]), str(status["pending_retries"]),
                      str(status["dead_letter_count"]), str(status["waiting_runs"]),
                      last_outcome(process))
    return table


def last_outcome(process: Any) -> str:
    runs = process.recent_runs()
    if not runs:
        return ""
    last = runs[-1]
    return str(last.reply if last.state.value == "succeeded" else
               f"{last.state.value}: {last.error}")


def snapshot(runtime: AgentRuntime) -> dict[str, Any]:
    status = runtime.status()
    for name, process in runtime.processes.items():
        status["processes"][name]["last_outcome"] = last_outcome(process)
    return status


async def run_headless(runtime: AgentRuntime, *, seconds: float | None, live: bool,
                       console: Console) -> dict[str, Any]:
    # Log lines go through the live display's console so they print above the table.
    log_console = console if live else Console(stderr=True)  # keep --json output clean
    handler = RichHandler(console=log_console, show_path=False, rich_tracebacks=False)
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level > logging.WARNING or root.level == logging.NOTSET:
        root.setLevel(logging.WARNING)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    started = loop.time()
    await runtime.start_all()
    try:
        with Live(console=console, auto_refresh=False, transient=False) as view:
            while not stop.is_set():
                elapsed = loop.time() - started
                if seconds is not None and elapsed >= seconds:
                    break
                if live:
                    view.update(status_table(runtime, elapsed, console.width), refresh=True)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
    finally:
        await runtime.stop_all()
        final = snapshot(runtime)
        await runtime.close()
        root.removeHandler(handler)
    return final
