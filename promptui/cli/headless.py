"""``promptui run`` and ``promptui demo``: the runtime without the control room, with a live
status table."""

from __future__ import annotations

import contextlib
import json
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich import box
from rich.console import Console
from rich.live import Live
from rich.logging import RichHandler
from rich.markup import escape
from rich.table import Table

from promptui.cli.options import (
    BUNDLED_DEMO,
    DRAIN_OPTION,
    PATHS_ARGUMENT,
    console,
    err,
    json_option,
    load_or_exit,
)

if TYPE_CHECKING:
    from runtime_core.runtime import AgentRuntime

SECONDS_OPTION = typer.Option(None, "--seconds", "-s", min=0.1, metavar="SECONDS",
                              help="Stop once the processes have run this long (counted "
                                   "from the end of their start) instead of at Ctrl+C.")


def run(
    paths: list[Path] = PATHS_ARGUMENT,
    seconds: float | None = SECONDS_OPTION,
    as_json: bool = json_option("Print the final status as JSON."),
    drain_timeout: float = DRAIN_OPTION,
) -> None:
    """Run processes headless with a live status table; Ctrl+C stops them cleanly."""
    import asyncio

    runtime = load_or_exit(paths)
    try:
        final = asyncio.run(run_headless(runtime, seconds=seconds, live=not as_json,
                                         console=console, drain_timeout=drain_timeout))
    except StartFailed as failed:
        raise failed.exit() from None
    if as_json:
        print(json.dumps(final, indent=2, default=str))
    else:
        console.print(closing_line(final["stopped"]))


def closing_line(stopped: dict[str, Any]) -> str:
    """What ``promptui run`` (and ``demo``) say as they end: what the journal keeps."""
    return (f"Stopped cleanly. {stopped['kept']} queued event(s) kept in the journal for the "
            f"next start; {stopped['dead_letters']} dead letter(s) kept for redelivery.")


def demo(
    seconds: float | None = SECONDS_OPTION,
    as_json: bool = json_option("Print the final status as JSON."),
) -> None:
    """Run the bundled offline demo (the same as 'promptui run' with no paths)."""
    run(paths=[BUNDLED_DEMO], seconds=seconds, as_json=as_json, drain_timeout=30.0)


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
        if status.get("draining"):
            state = f"draining ({status['draining']['runs_left']} left)"
        if status.get("journal_fault"):
            state += " [journal degraded]"
        table.add_row(name, state, str(status["invocation_count"]),
                      str(status["consecutive_failures"]), str(status["restart_count"]),
                      str(status["queue_size"]), str(status["pending_retries"]),
                      str(status["dead_letter_total"]), str(status["waiting_runs"]),
                      last_outcome(process))
    return table


def last_outcome(process: Any) -> str:
    runs = process.recent_runs()
    if not runs:
        return ""
    last = runs[-1]
    return str(last.reply if last.state.value == "succeeded" else
               f"{last.state.value}: {last.error}")


class StartFailed(Exception):
    """Processes did not start; ``lines`` says which, where (manifest file, field) and why."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines

    def exit(self) -> typer.Exit:
        """Print each line as an error; the exit (status 1) to raise."""
        for line in self.lines:
            err.print(f"[red]error:[/red] {escape(line)}")
        return typer.Exit(1)


async def start_or_fail(runtime: AgentRuntime) -> None:
    """Start every process, or, if one cannot start, shut them all down as for a service
    restart (whatever the others took back from the journal waits for the next start, nothing
    is dead-lettered) and raise StartFailed. Nothing is left running either way."""
    try:
        await runtime.start_all()
    except Exception as exc:
        problems = runtime.start_problems() or [str(exc)]
        await runtime.shutdown()
        raise StartFailed(problems) from None
    except BaseException:  # cancelled while starting: still nothing left running
        await runtime.shutdown()
        raise


def snapshot(runtime: AgentRuntime) -> dict[str, Any]:
    status = runtime.status()
    for name, process in runtime.processes.items():
        status["processes"][name]["last_outcome"] = last_outcome(process)
    return status


async def run_headless(runtime: AgentRuntime, *, seconds: float | None, live: bool,
                       console: Console, drain_timeout: float = 0.0) -> dict[str, Any]:
    """Start, show the table until ``seconds`` or a signal, then stop as ``promptui serve``
    does (AgentRuntime.shutdown): the runs in flight may finish first (``drain_timeout``; a
    second signal cuts it short), what is still queued stays in the journal for the next
    start. The final status says how much under "stopped": {"kept", "dead_letters",
    "processes": each one's counts}."""
    import asyncio

    # Log lines go through the live display's console so they print above the table.
    log_console = console if live else Console(stderr=True)  # keep --json output clean
    handler = RichHandler(console=log_console, show_path=False, rich_tracebacks=False)
    from runtime_core.log_redaction import redact_handler

    redact_handler(handler, lambda: runtime.processes.values())  # a tool may log a secret
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level > logging.WARNING or root.level == logging.NOTSET:
        root.setLevel(logging.WARNING)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():  # a second signal: the drain ends now
            runtime.end_drains()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
    try:
        await start_or_fail(runtime)
    except BaseException:
        root.removeHandler(handler)
        raise
    started = loop.time()  # --seconds is how long the processes run, however slow the start
    stopping: asyncio.Task[dict[str, dict[str, int]]] | None = None
    try:
        with Live(console=console, auto_refresh=False, transient=False) as view:
            while not stop.is_set():
                elapsed = loop.time() - started
                if seconds is not None and elapsed >= seconds:
                    break
                if live:
                    view.update(status_table(runtime, elapsed, console.width), refresh=True)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.5):
                        await stop.wait()
            stop.set()  # a signal from here on cuts the drain short
            stopping = asyncio.ensure_future(runtime.shutdown(drain_timeout))
            while not stopping.done():  # the table shows the drain as it goes
                if live:
                    view.update(status_table(runtime, loop.time() - started, console.width),
                                refresh=True)
                await asyncio.wait((stopping,), timeout=0.5)
    finally:
        try:
            counts = await (runtime.shutdown(0.0) if stopping is None else stopping)
        finally:
            root.removeHandler(handler)
    final = snapshot(runtime)
    final["stopped"] = {"kept": sum(c["pending"] for c in counts.values()),
                        "dead_letters": sum(c["dead_letters"] for c in counts.values()),
                        "processes": counts}
    return final
