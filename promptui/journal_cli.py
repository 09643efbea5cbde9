"""``promptui logs`` and ``promptui journal ...``: read a journal file without changing it."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from runtime_core.journal.entry import JournalEntry
from runtime_core.journal.inspect import process_names, read_entries, verify
from runtime_core.journal.provider import JournalError

if TYPE_CHECKING:
    from promptui.server_target import ServerTarget
    from runtime_core.api.client import RemoteControl
    from runtime_core.control import JournalEntryView

DEFAULT_JOURNAL = Path(".promptui/journal.db")
JOURNAL_OPTION = typer.Option(DEFAULT_JOURNAL, "--journal", "-j",
                              help="The journal file (default .promptui/journal.db).")
URL_OPTION = typer.Option(None, "--url", help="A served runtime (promptui serve), e.g. "
                          "http://127.0.0.1:8765 (default: PROMPTUI_URL, or the server "
                          "running in this folder).")
TOKEN_OPTION = typer.Option(None, "--token", help="The server's token (default: "
                            "PROMPTUI_TOKEN, or the token file of the server running here).")
FOLLOW_SECONDS = 0.5
PAGE = 1000

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
    summary = json.dumps(entry.data, separators=(",", ":"), ensure_ascii=False)
    return _line(entry.seq, entry.timestamp, entry.entry_type, entry.run_id, summary, width)


def _line(seq: int, ts: float, entry_type: str, run_id: str | None, summary: str,
          width: int) -> str:
    stamp = datetime.fromtimestamp(ts).strftime("%H:%M:%S.%f")[:-3]
    head = f"{seq:>7} {stamp} {entry_type:<18} {run_id or '-':<16} "
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
    url: str | None = URL_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """Show a process's journal entries, newest last.

    From the server given by --url or PROMPTUI_URL (or running here), else from the journal
    file."""
    from promptui.remote_cli import server_for  # imported here: remote_cli imports this module

    width = shutil.get_terminal_size((160, 24)).columns
    target = server_for(url, token, journal)
    if target is not None:
        _logs_from_server(target, process, lines, entry_type, as_json, follow, width)
        return
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


def _logs_from_server(target: ServerTarget, process: str, lines: int, entry_type: str | None,
                      as_json: bool, follow: bool, width: int) -> None:
    """The same listing over the API (summaries, redacted by the server, instead of the raw
    data); ``follow`` polls for entries after the newest one printed until Ctrl+C."""
    from promptui.remote_cli import on_server

    def emit(views: list[JournalEntryView]) -> None:
        for view in views:
            if as_json:
                text = json.dumps({"process": process, **asdict(view)}, ensure_ascii=False)
            else:
                text = _line(view.seq, view.timestamp, view.entry_type, view.run_id,
                             view.summary, width)
            sys.stdout.write(text + "\n")
        sys.stdout.flush()

    async def go(control: RemoteControl) -> None:
        recent = await control.journal_entries(process, entry_type=entry_type, limit=lines)
        emit(recent[::-1])
        if not follow:
            return
        if recent:
            last = recent[0].seq
        else:  # nothing of that type yet: follow from the current end
            newest = await control.journal_entries(process, limit=1)
            last = newest[0].seq if newest else 0
        while True:
            await asyncio.sleep(FOLLOW_SECONDS)
            new = await _entries_after(control, process, entry_type, last)
            if new:
                emit(new)
                last = new[-1].seq

    try:
        on_server(target, go)
    except KeyboardInterrupt:
        return


async def _entries_after(control: RemoteControl, process: str, entry_type: str | None,
                         after: int) -> list[JournalEntryView]:
    """Every entry after seq ``after``, oldest first, in pages (the API answers newest first)."""
    found: list[JournalEntryView] = []
    before: int | None = None
    while True:
        page = await control.journal_entries(process, entry_type=entry_type, after_seq=after,
                                             before_seq=before, limit=PAGE)
        found.extend(page)
        if len(page) < PAGE:
            return found[::-1]
        before = page[-1].seq


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
