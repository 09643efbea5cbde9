"""``promptui logs`` and ``promptui journal ...``: read a journal file without changing it."""

from __future__ import annotations

import json
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from runtime_core.journal.entry import JournalEntry
from runtime_core.journal.inspect import process_names, read_entries, verify
from runtime_core.journal.provider import JournalError

DEFAULT_JOURNAL = Path(".promptui/journal.db")
JOURNAL_OPTION = typer.Option(DEFAULT_JOURNAL, "--journal", "-j",
                              help="The journal file (default .promptui/journal.db).")

journal_app = typer.Typer(help="Export and verify a journal file.", no_args_is_help=True)
err = Console(stderr=True, soft_wrap=True, highlight=False)


def _fail(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(2)


def _check_process(path: Path, process: str) -> None:
    names = process_names(path)
    if process not in names:
        known = ", ".join(names) or "none yet"
        raise _fail(f"{path} has no entries for process {process!r} (processes: {known})")


def format_entry(entry: JournalEntry, width: int = 100) -> str:
    stamp = datetime.fromtimestamp(entry.timestamp).strftime("%H:%M:%S.%f")[:-3]
    summary = json.dumps(entry.data, separators=(",", ":"), ensure_ascii=False)
    head = f"{entry.seq:>7} {stamp} {entry.entry_type:<18} {entry.run_id or '-':<16} "
    room = max(20, width - len(head))
    if len(summary) > room:
        summary = summary[: room - 1] + "…"
    return head + summary


def _emit(entries: list[JournalEntry], as_json: bool, width: int) -> None:
    for entry in entries:
        if as_json:
            sys.stdout.write(json.dumps(entry.to_dict(), ensure_ascii=False) + "\n")
        else:
            sys.stdout.write(format_entry(entry, width) + "\n")
    sys.stdout.flush()


def logs(
    process: str = typer.Argument(..., help="The process name."),
    lines: int = typer.Option(20, "-n", "--lines", min=1, help="How many recent entries."),
    entry_type: str | None = typer.Option(None, "--type", "-t", help="Only this entry type."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
    follow: bool = typer.Option(False, "-f", "--follow", help="Keep printing new entries."),
    journal: Path = JOURNAL_OPTION,
) -> None:
    """Show a process's journal entries, newest last."""
    width = shutil.get_terminal_size((160, 24)).columns
    try:
        _check_process(journal, process)
        recent = read_entries(journal, process, entry_type=entry_type, limit=lines,
                              newest_first=True)
        recent.reverse()
        _emit(recent, as_json, width)
        if not follow:
            return
        last = recent[-1].seq if recent else 0
        if not recent:  # nothing of that type yet: follow from the current end
            newest = read_entries(journal, process, limit=1, newest_first=True)
            last = newest[0].seq if newest else 0
        while True:
            time.sleep(0.5)
            new = read_entries(journal, process, entry_type=entry_type, since_seq=last)
            if new:
                _emit(new, as_json, width)
                last = new[-1].seq
    except JournalError as exc:
        raise _fail(str(exc)) from None
    except KeyboardInterrupt:
        return


@journal_app.command("export")
def export(
    process: str = typer.Argument(..., help="The process name."),
    journal: Path = JOURNAL_OPTION,
) -> None:
    """Write every entry of PROCESS as JSON lines to standard output."""
    try:
        _check_process(journal, process)
        since = 0
        while True:  # in pages, so a long journal never sits in memory at once
            page = read_entries(journal, process, since_seq=since, limit=5000)
            if not page:
                break
            _emit(page, True, 0)
            since = page[-1].seq
    except JournalError as exc:
        raise _fail(str(exc)) from None


@journal_app.command("verify")
def verify_command(journal: Path = JOURNAL_OPTION) -> None:
    """Check the file, each process's chain of seqs, checksums and checkpoints."""
    report = verify(journal)
    out = Console(soft_wrap=True, highlight=False)
    for name, count in sorted(report.processes.items()):
        cps = report.checkpoints.get(name, 0)
        out.print(f"{escape(name)}: {count} entries, {cps} checkpoints")
    if report.ok:
        out.print(f"[green]ok[/green]: {escape(str(journal))} is sound")
        return
    for problem in report.problems:
        out.print(f"[red]damaged[/red]: {escape(problem)}")
    raise typer.Exit(1)
