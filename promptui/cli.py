"""The ``promptui`` command."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer
from rich.console import Console

from promptui import __version__
from promptui.attach_cli import attach
from promptui.headless import BUNDLED_DEMO, load_or_exit, run_headless
from promptui.incidents_cli import incidents
from promptui.journal_cli import journal_app, logs
from promptui.locate_cli import locate
from promptui.manifest_cli import init, validate
from promptui.remote_cli import dead_letters, restart, resume, start, status, stop, suspend
from promptui.rewind_cli import fork, rewind
from promptui.serve_cli import serve
from promptui.ui_cli import ui

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="promptui: a terminal control room for long-running AI agent processes.",
)
console = Console()
err = Console(stderr=True, soft_wrap=True, highlight=False)
app.command("logs")(logs)
app.command("locate")(locate)
app.command("validate")(validate)
app.command("init")(init)
app.command("ui")(ui)
app.command("attach")(attach)
app.command("serve")(serve)
app.command("rewind")(rewind)
app.command("fork")(fork)
app.command("incidents")(incidents)
app.command("status")(status)
app.command("start")(start)
app.command("stop")(stop)
app.command("suspend")(suspend)
app.command("resume")(resume)
app.command("restart")(restart)
app.command("dead-letters")(dead_letters)
app.add_typer(journal_app, name="journal")


@app.callback(invoke_without_command=True)
def main_callback(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    if version:
        console.print(f"promptui {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        ctx.invoke(ui, paths=None, journal=None, theme=None, read_only=None, no_mouse=False,
                   refresh=None, low_bandwidth=False)


@app.command()
def run(
    paths: list[Path] = typer.Argument(None, help="Manifest files or folders of .agent files "
                                       "(default: the bundled demo)."),
    seconds: float | None = typer.Option(None, "--seconds", "-s", min=0.1,
                                         help="Stop after this long instead of at Ctrl+C."),
    as_json: bool = typer.Option(False, "--json", help="Print the final status as JSON."),
) -> None:
    """Run processes headless with a live status table; Ctrl+C stops them cleanly."""
    runtime = load_or_exit(paths, err)
    final = asyncio.run(run_headless(runtime, seconds=seconds, live=not as_json,
                                     console=console))
    if as_json:
        print(json.dumps(final, indent=2, default=str))
    else:
        dead = sum(p["dead_letter_count"] for p in final["processes"].values())
        console.print(f"Stopped cleanly. {dead} event(s) in dead letters, kept in the journal "
                      "for redelivery.")


@app.command()
def demo(
    seconds: float | None = typer.Option(None, "--seconds", "-s", min=0.1,
                                         help="Stop after this long instead of at Ctrl+C."),
    as_json: bool = typer.Option(False, "--json", help="Print the final status as JSON."),
) -> None:
    """Run the bundled offline demo (the same as 'promptui run' with no paths)."""
    run(paths=[BUNDLED_DEMO], seconds=seconds, as_json=as_json)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
