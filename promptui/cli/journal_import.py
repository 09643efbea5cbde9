"""``promptui journal import DIR``: bring a reference runtime's FileJournal directory (promptise,
one JSONL file per process) into our journal, so the processes recover where it left them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from promptui.cli.options import (
    DEFAULT_JOURNAL,
    JOURNAL_OPTION,
    err,
    fail,
    journal_problem,
    json_option,
    wrapped,
)

if TYPE_CHECKING:
    from runtime_core.control.offline import ImportReport, ProcessImport

DIRECTORY_ARGUMENT = typer.Argument(..., help="The reference journal directory, e.g. "
                                    ".promptise/journal (one NAME.jsonl file per process).")
VERBS = {"import": "would import", "imported": "imported", "already imported":
         "already imported", "refused": "refused", "empty": "nothing to import"}


def parse_renames(values: list[str]) -> dict[str, str]:
    """``OLD=NEW`` pairs (a bare ``NEW`` renames the directory's only process); each new name
    checked against the rule process names follow."""
    from runtime_core.control.offline import check_new_name

    renames: dict[str, str] = {}
    for value in values:
        old, sep, new = value.partition("=")
        if not sep:
            old, new = "", value
        new = new.strip()
        try:
            check_new_name(new)
        except ValueError as exc:
            raise fail(f"--as {value}: {exc}") from None
        if old.strip() in renames:
            raise fail(f"--as names process {old.strip() or '(the only one)'!r} twice")
        renames[old.strip()] = new
    return renames


def journal_import(
    directory: Path = DIRECTORY_ARGUMENT,
    journal: Path = JOURNAL_OPTION,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be imported, per "
                                 "process; write nothing."),
    rename: list[str] | None = typer.Option(None, "--as", metavar="OLD=NEW", help="Import "
                                            "process OLD under the name NEW (repeatable); a "
                                            "bare NEW renames the directory's only process."),
    only: list[str] | None = typer.Option(None, "--only", metavar="NAME", help="Import only "
                                          "this process (repeatable)."),
    as_json: bool = json_option("The report as one JSON object."),
) -> None:
    """Import a reference (promptise) FileJournal directory into the journal.

    Entries keep their order and times; checkpoints, dead letters, queued events and runs in
    flight come along, so a process of the same name starting on this journal recovers where
    the reference left it. Torn or corrupt lines are reported with file and line and skipped.
    A process the journal already has is refused (use --as); one imported before from the
    same files is left as it is."""
    import asyncio

    from runtime_core.control.offline import (
        JournalError,
        JournalLocked,
        NotAReferenceJournal,
        NothingToImport,
        import_reference,
    )

    renames = parse_renames(rename or [])
    try:
        report = asyncio.run(import_reference(journal, directory, rename=renames,
                                              only=list(only or []) or None, dry_run=dry_run))
    except (NotAReferenceJournal, NothingToImport) as exc:
        raise fail(str(exc)) from None
    except JournalLocked as exc:  # an import needs the file to itself: no --url road here
        raise fail(str(exc)) from None
    except JournalError as exc:
        raise fail(journal_problem(exc)) from None
    except ValueError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print_report(report, directory)
        if journal == DEFAULT_JOURNAL and (directory / "journal.db").is_file():
            wrapped.print(f"note: {escape(str(directory / 'journal.db'))} exists: processes "
                          f"configured with journal path {escape(str(directory))} use that "
                          "file; import into it with --journal "
                          f"{escape(str(directory / 'journal.db'))}")
    if report.refused:
        for row in report.refused:
            err.print(f"[red]error:[/red] {escape(row.message)}")
        err.print("Nothing was written.")
        raise typer.Exit(2)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _process_lines(row: ProcessImport, dry_run: bool) -> list[str]:
    verb = VERBS.get(row.status, row.status)
    if dry_run and row.status == "refused":
        verb = "would be refused"
    head = f"{row.name}"
    if row.name != row.source_name:
        head += f" (from {row.source_name})"
    head += f": {verb}"
    if row.status in ("import", "imported"):
        head += f" {row.entries + 1} entries"
        if row.first_entry:
            head += f" ({row.first_entry} to {row.last_entry})"
    if row.message:
        head += f": {row.message}"
    lines = [head, f"  from {', '.join(row.files)} ({row.lines} lines)"]
    if row.status in ("refused", "empty", "already imported"):
        return lines
    lines.append(f"  entries by type: imported 1 (where they came from), {_counts(row.counts)}")
    waiting = f" ({row.waiting_writes} write(s) waiting for an operator)" \
        if row.waiting_writes else ""
    lines.append(f"  checkpoints {row.checkpoints} · dead letters {row.dead_letters} · queued "
                 f"events {row.queued_events} · runs in flight {row.open_runs}{waiting}")
    keys = ", ".join(row.context_keys) or "none"
    lines.append(f"  recovers: lifecycle {row.lifecycle_state or '-'}, context keys {keys}, "
                 f"{row.conversation_messages} conversation message(s)")
    if row.not_carried:
        lines.append(f"  not carried over: {_counts(row.not_carried)}")
    if row.dropped_keys:
        lines.append(f"  checkpoint keys not carried over: {', '.join(row.dropped_keys)}")
    return lines


def print_report(report: ImportReport, directory: Path) -> None:
    count = len(report.processes)
    wrapped.print(escape(f"Reference journal {directory} ({count} process"
                         f"{'' if count == 1 else 'es'}) into {report.journal}"))
    for row in report.processes:
        for line in _process_lines(row, report.dry_run):
            wrapped.print(escape(line))
    skipped = report.skipped_lines
    if skipped:
        wrapped.print(f"[yellow]damaged lines[/yellow] ({len(skipped)}; what is damaged is "
                      "skipped, never joined to another line):")
        for problem in skipped:
            wrapped.print(escape(f"  {directory / problem.where()}: {problem.message}"))
    others = [p for p in report.problems if p not in skipped]
    if others:
        wrapped.print("[yellow]warnings[/yellow]:")
        for problem in others:
            wrapped.print(escape(f"  {directory / problem.where()}: {problem.message}"))
    if report.dry_run:
        wrapped.print(escape(f"Dry run: nothing written to {report.journal}."))
    elif not report.refused and any(r.status == "imported" for r in report.processes):
        wrapped.print("A process with the same name starting on this journal recovers from "
                      "it; 'promptui logs NAME' lists its entries.")
