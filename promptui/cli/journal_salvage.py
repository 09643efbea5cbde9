"""``promptui journal salvage PATH``: a new journal from every entry a damaged one still holds,
and what was rescued and lost. The damaged file is never changed."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import typer
from rich.markup import escape

from promptui.cli.options import fail, json_option, wrapped

PATH_ARGUMENT = typer.Argument(..., help="The damaged journal file, e.g. .promptui/journal.db "
                               "(or a journal.db.damaged-TIME a start moved aside).")
OUTPUT_OPTION = typer.Option(None, "--output", "-o", help="Where to write the new journal "
                             "(default PATH.salvaged-TIME.db beside it); never overwritten.")


def journal_salvage(
    path: Path = PATH_ARGUMENT,
    output: Path | None = OUTPUT_OPTION,
    as_json: bool = json_option("The report as one JSON object."),
) -> None:
    """Write a new journal from every entry a damaged journal can still give.

    The file is read page by page, the way SQLite's .recover does, so a cut file or a damaged
    schema page still gives what it holds; every entry is checked against its checksum. The
    new journal keeps each entry it read (a lost one is marked 'lost'), queues again the
    events that never started, keeps finished runs finished, and puts every run whose outcome
    is unknown (its end or a write's result was lost) to wait for an operator with
    unknown_write_outcome: nothing runs twice by itself. The damaged file is left as it is.
    Exit 1 when the new journal does not pass 'promptui journal verify'."""
    from runtime_core.control.offline import JournalError, report_lines, salvage

    try:
        report = salvage(path, output)
    except JournalError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        for line in report_lines(report):
            wrapped.print(escape(line))
        for problem in report.verify_problems:
            wrapped.print(f"[red]damaged[/red]: {escape(problem)}")
        if not report.verify_problems:
            _next_steps(path, report.output)
    if report.verify_problems:
        raise typer.Exit(1)


def _next_steps(path: Path, output: Path) -> None:
    """What to run to use the salvaged journal."""
    new, old = shlex.quote(str(output)), shlex.quote(str(path))
    wrapped.print(f"[green]ok[/green]: {escape(str(output))} passes 'promptui journal verify'. "
                  "The damaged file was not changed. To use the new journal, with the runtime "
                  "stopped, either point the runtime at it:")
    wrapped.print(escape(f"  promptui serve AGENTS --journal {new}   (or the manifests' "
                         "journal.path)"))
    wrapped.print("or put it in the damaged one's place (keeping that one):")
    wrapped.print(escape(f"  mv {old} {old}.damaged && mv {new} {old}"))
    wrapped.print("Runs put to wait for an operator are listed by 'promptui status' and "
                  "settled with 'promptui reconcile' (or in the room).")
