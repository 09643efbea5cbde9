"""The ``promptui`` command: one typer app, one module per command group. Each group imports
only typer, rich and the standard library at start; the runtime, Textual, FastAPI and uvicorn
load inside the command that runs, so ``promptui --help`` stays fast."""

from __future__ import annotations

import typer

from promptui import __version__
from promptui.cli.answer import answer
from promptui.cli.headless import demo, run
from promptui.cli.incidents import incidents_app
from promptui.cli.inject import inject
from promptui.cli.journal import journal_app, logs
from promptui.cli.locate import locate
from promptui.cli.manifest_cmd import manifest
from promptui.cli.manifests import init, validate
from promptui.cli.nodes import nodes_app
from promptui.cli.options import console
from promptui.cli.plain_help import Typer
from promptui.cli.reconcile import reconcile
from promptui.cli.remote import dead_letters, restart, resume, start, status, stop, suspend
from promptui.cli.rewind import fork, rewind
from promptui.cli.runs import runs
from promptui.cli.serve import serve
from promptui.cli.ui import attach, ui

app = Typer(
    add_completion=True,  # --install-completion and --show-completion
    no_args_is_help=False,
    help="promptui: a terminal control room for long-running AI agent processes.",
)
app.command("logs")(logs)
app.command("locate")(locate)
app.command("validate")(validate)
app.command("manifest")(manifest)
app.command("init")(init)
app.command("ui")(ui)
app.command("attach")(attach)
app.command("serve")(serve)
app.command("rewind")(rewind)
app.command("fork")(fork)
app.add_typer(incidents_app, name="incidents")
app.command("runs")(runs)
app.command("status")(status)
app.command("start")(start)
app.command("stop")(stop)
app.command("suspend")(suspend)
app.command("resume")(resume)
app.command("restart")(restart)
app.command("inject")(inject)
app.command("dead-letters")(dead_letters)
app.command("answer")(answer)
app.command("reconcile")(reconcile)
app.add_typer(journal_app, name="journal")
app.add_typer(nodes_app, name="nodes")


@app.callback(invoke_without_command=True)
def main_callback(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    if version:
        console.print(f"promptui {__version__}")
        raise typer.Exit()
    # Traces of runs when OTEL_EXPORTER_OTLP_ENDPOINT is set (free otherwise: stdlib only);
    # what was exported is flushed when the command ends.
    from runtime_core.tracing import configure_from_env
    flush = configure_from_env()
    if flush is not None:
        ctx.call_on_close(flush)
    if ctx.invoked_subcommand is None:
        ctx.invoke(ui, paths=None, journal=None, theme=None, read_only=None, no_mouse=False,
                   refresh=None, low_bandwidth=False)


app.command("run")(run)
app.command("demo")(demo)


def main() -> None:
    app()
