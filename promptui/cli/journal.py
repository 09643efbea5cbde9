"""``promptui logs`` and ``promptui journal ...``: read a process's journal (from the server, else
the file, or a cluster's PostgreSQL: journal_postgres) without changing it."""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from promptui.cli.journal_compact import journal_compact
from promptui.cli.journal_import import journal_import
from promptui.cli.journal_postgres import (
    export_postgres,
    journal_dsn,
    logs_postgres,
    verify_report,
)
from promptui.cli.journal_salvage import journal_salvage
from promptui.cli.options import (
    CLUSTER_JOURNAL_OPTION,
    JOURNAL_OR_DSN_OPTION,
    NAME_ARGUMENT,
    TIME_OPTION,
    TOKEN_OPTION,
    URL_OPTION,
    ServerTarget,
    check_process,
    fail,
    json_option,
    on_server,
    server_for,
    wrapped,
)
from promptui.cli.plain_help import Typer
from promptui.format import date_time_ms, relative

if TYPE_CHECKING:
    from runtime_core.control.offline import JournalEntry
    from runtime_core.control.remote import RemoteControl
    from runtime_core.control.views import JournalEntryView

FOLLOW_SECONDS = 0.5
PAGE = 1000

journal_app = Typer(help="Export, verify, import and salvage journals.", no_args_is_help=True)
journal_app.command("import")(journal_import)
journal_app.command("salvage")(journal_salvage)
journal_app.command("compact")(journal_compact)


def format_entry(entry: JournalEntry, width: int = 100, time_format: str = "iso") -> str:
    summary = json.dumps(entry.data, separators=(",", ":"), ensure_ascii=False)
    return _line(entry.seq, entry.timestamp, entry.entry_type, entry.run_id, summary, width,
                 time_format)


def _line(seq: int, ts: float, entry_type: str, run_id: str | None, summary: str,
          width: int, time_format: str = "iso") -> str:
    # --time: the local date and time to the millisecond, or how long ago (lined up)
    when = f"{relative(ts, time.time()):>12}" if time_format == "relative" else date_time_ms(ts)
    head = f"{seq:>7} {when} {entry_type:<18} {run_id or '-':<16} "
    room = max(20, width - len(head))
    if len(summary) > room:
        summary = summary[: room - 1] + "…"
    return head + summary


def _emit(entries: list[JournalEntry], as_json: bool, width: int,
          time_format: str = "iso") -> None:
    for entry in entries:
        if as_json:
            sys.stdout.write(json.dumps(entry.to_dict(), ensure_ascii=False) + "\n")
        else:
            sys.stdout.write(format_entry(entry, width, time_format) + "\n")
    sys.stdout.flush()


def logs(
    process: str = NAME_ARGUMENT,
    lines: int = typer.Option(20, "-n", "--lines", min=1, help="How many recent entries."),
    entry_type: str | None = typer.Option(None, "--type", "-t", help="Only this entry type "
                                          "(e.g. run_finished, tool_intent, dead_lettered)."),
    as_json: bool = json_option("One JSON object per line."),
    follow: bool = typer.Option(False, "-f", "--follow", help="Keep printing new entries."),
    time_format: str = TIME_OPTION,
    journal: str = JOURNAL_OR_DSN_OPTION,
    cluster: str | None = CLUSTER_JOURNAL_OPTION,
    url: str | None = URL_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """Show a process's journal entries, newest last.

    From the server given by --url or PROMPTUI_URL (or running here), else from the journal
    file. With --cluster (or a DSN as --journal): from the cluster's PostgreSQL, read-only,
    while its nodes run."""
    from runtime_core.control.offline import JournalError, check_entry_type, read_entries

    if entry_type is not None:
        try:  # a type nothing journals would match nothing: say so instead of printing nothing
            check_entry_type(entry_type)
        except ValueError as exc:
            raise fail(str(exc)) from None
    width = shutil.get_terminal_size((160, 24)).columns
    dsn = journal_dsn(journal, cluster, url)
    if dsn is not None:
        logs_postgres(dsn, process, lines, entry_type, follow,
                      lambda entries: _emit(entries, as_json, width, time_format))
        return
    target = server_for(url, token, Path(journal))
    if target is not None:
        _logs_from_server(target, process, lines, entry_type, as_json, follow, width,
                          time_format)
        return
    journal_path = Path(journal)
    try:
        check_process(journal_path, process)
        recent = read_entries(journal_path, process, entry_type=entry_type, limit=lines,
                              newest_first=True)
        recent.reverse()
        _emit(recent, as_json, width, time_format)
        if not follow:
            return
        last = recent[-1].seq if recent else 0
        if not recent:  # nothing of that type yet: follow from the current end
            newest = read_entries(journal_path, process, limit=1, newest_first=True)
            last = newest[0].seq if newest else 0
        while True:
            time.sleep(FOLLOW_SECONDS)
            new = read_entries(journal_path, process, entry_type=entry_type, since_seq=last)
            if new:
                _emit(new, as_json, width, time_format)
                last = new[-1].seq
    except JournalError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        return


def _logs_from_server(target: ServerTarget, process: str, lines: int, entry_type: str | None,
                      as_json: bool, follow: bool, width: int, time_format: str = "iso"
                      ) -> None:
    """The same listing over the API (summaries, redacted by the server, instead of the raw
    data); ``follow`` polls for entries after the newest one printed until Ctrl+C."""
    import asyncio

    def emit(views: list[JournalEntryView]) -> None:
        for view in views:
            if as_json:
                text = json.dumps({"process": process, **asdict(view)}, ensure_ascii=False)
            else:
                text = _line(view.seq, view.timestamp, view.entry_type, view.run_id,
                             view.summary, width, time_format)
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
    process: str = NAME_ARGUMENT,
    journal: str = JOURNAL_OR_DSN_OPTION,
    cluster: str | None = CLUSTER_JOURNAL_OPTION,
) -> None:
    """Write every entry of PROCESS as JSON lines to standard output (from the journal file,
    or with --cluster from the cluster's PostgreSQL)."""
    from runtime_core.control.offline import JournalError, read_entries

    dsn = journal_dsn(journal, cluster)
    if dsn is not None:
        export_postgres(dsn, process, lambda entries: _emit(entries, True, 0))
        return
    path = Path(journal)
    try:
        check_process(path, process)
        since = 0
        while True:  # in pages, so a long journal never sits in memory at once
            page = read_entries(path, process, since_seq=since, limit=5000)
            if not page:
                break
            _emit(page, True, 0)
            since = page[-1].seq
    except JournalError as exc:
        raise fail(str(exc)) from None


@journal_app.command("verify")
def verify_command(
    journal: str = JOURNAL_OR_DSN_OPTION,
    cluster: str | None = CLUSTER_JOURNAL_OPTION,
) -> None:
    """Check the file, each process's chain of seqs, checksums and checkpoints.

    With --cluster (or a DSN as --journal), the cluster's PostgreSQL journal, read-only while
    the nodes run: each process's chain of seqs and its head, checksums, checkpoints, and the
    queued events, dead letters, open runs and deliveries it keeps."""
    from runtime_core.control.offline import verify

    dsn = journal_dsn(journal, cluster)
    if dsn is not None:
        pg = verify_report(dsn)
        where, problems = pg.where, pg.problems
        for name, count in sorted(pg.processes.items()):
            wrapped.print(f"{escape(name)}: {count} entries, {pg.checkpoints.get(name, 0)} "
                          f"checkpoints, {pg.dead_letters.get(name, 0)} dead letters, "
                          f"{pg.pending.get(name, 0)} queued")
    else:
        report = verify(Path(journal))
        where, problems = journal, report.problems
        for name, count in sorted(report.processes.items()):
            cps = report.checkpoints.get(name, 0)
            mark = report.retained.get(name)
            retained = f" (retention removed entries before seq {mark})" if mark else ""
            wrapped.print(f"{escape(name)}: {count} entries, {cps} checkpoints{retained}")
    if not problems:
        wrapped.print(f"[green]ok[/green]: {escape(where)} is sound")
        return
    for problem in problems:
        wrapped.print(f"[red]damaged[/red]: {escape(problem)}")
    raise typer.Exit(1)
