"""The ``promptui`` command."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from promptui import __version__
from promptui.journal_cli import journal_app, logs

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="promptui: a terminal control room for long-running AI agent processes.",
)
console = Console()
app.command("logs")(logs)
app.add_typer(journal_app, name="journal")


def _status_table(status: dict[str, Any], elapsed: float) -> Table:
    table = Table(title=f"promptui demo runtime — {elapsed:4.1f}s", title_justify="left")
    table.add_column("process", no_wrap=True, min_width=14)
    table.add_column("state", no_wrap=True, min_width=9)
    for column in ("ok", "fail", "rst", "queue", "retry", "dead"):
        table.add_column(column, no_wrap=True, justify="right", min_width=len(column))
    table.add_column("last reply / error", overflow="ellipsis", no_wrap=True, max_width=28)
    for name, proc in status["processes"].items():
        table.add_row(
            name,
            proc["state"] + (f" ({proc['suspend_reason']})" if proc["suspend_reason"] else ""),
            str(proc["invocation_count"]),
            str(proc["consecutive_failures"]),
            str(proc["restart_count"]),
            str(proc["queue_size"]),
            str(proc["pending_retries"]),
            str(proc["dead_letter_count"]),
            proc.get("last_outcome", ""),
        )
    return table


async def _run_demo(seconds: float, as_json: bool) -> dict[str, Any]:
    from promptui.demo import build_demo_runtime, drive_demo

    runtime = build_demo_runtime()
    loop = asyncio.get_running_loop()
    started = loop.time()

    def snapshot() -> dict[str, Any]:
        status = runtime.status()
        for name, proc in runtime.processes.items():
            runs = proc.recent_runs()
            if runs:
                last = runs[-1]
                text = last.reply if last.state.value == "succeeded" else (
                    f"{last.state.value}: {last.error}")
                status["processes"][name]["last_outcome"] = text[:60]
        return status

    await runtime.start_all()
    tick = 0
    try:
        with Live(console=console, auto_refresh=False, transient=False) as live:
            while loop.time() - started < seconds:
                await drive_demo(runtime, tick)
                tick += 1
                for _ in range(4):
                    if not as_json:
                        live.update(_status_table(snapshot(), loop.time() - started), refresh=True)
                    await asyncio.sleep(0.25)
    finally:
        await runtime.stop_all()
    return snapshot()


@app.callback(invoke_without_command=True)
def main_callback(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    if version:
        console.print(f"promptui {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        ctx.invoke(demo)


@app.command()
def demo(
    seconds: float = typer.Option(8.0, "--seconds", "-s", min=0.5,
                                  help="How long to run the demo before stopping."),
    as_json: bool = typer.Option(False, "--json", help="Print the final status as JSON."),
) -> None:
    """Run the built-in offline demo processes headless and show their status live."""
    final = asyncio.run(_run_demo(seconds, as_json))
    if as_json:
        print(json.dumps(final, indent=2, default=str))
    else:
        console.print(
            "[dim]The full control room arrives with the Textual UI; this is the runtime "
            "running headless.[/dim]"
        )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
