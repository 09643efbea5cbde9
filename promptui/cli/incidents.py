"""``promptui incidents``: the incidents a journal file records, folded from its ``incident``
entries without starting anything (in the control room: ``I`` on the dashboard)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from promptui.cli.options import JOURNAL_OPTION, check_process, fail, json_option, out
from promptui.format import ago

if TYPE_CHECKING:
    from runtime_core.incidents import Incident

STATE_STYLES = {"open": "bold red", "recovered": "green", "resolved": "cyan"}


def load_incidents(journal: Path, process: str | None) -> list[tuple[str, Incident]]:
    """(process, incident) pairs: open ones first, then the latest seen."""
    from runtime_core.incidents import fold_entries
    from runtime_core.journal.entry import EntryType
    from runtime_core.journal.inspect import process_names, read_entries

    names = [process] if process is not None else process_names(journal)
    found: list[tuple[str, Incident]] = []
    for name in names:
        # A journal keeps at most history_size payloads per incident in its entries anyway.
        entries = read_entries(journal, name, entry_type=EntryType.INCIDENT)
        found += [(name, incident) for incident in fold_entries(e.data for e in entries)]
    return sorted(found, key=lambda pair: (not pair[1].is_open, -pair[1].last_seen))


def incidents(
    process: str | None = typer.Option(None, "--process", "-p", help="Only this process."),
    as_json: bool = json_option("A JSON list, each incident with its payload history."),
    journal: Path = JOURNAL_OPTION,
) -> None:
    """List the incidents recorded in a journal: state, generation, occurrences, runs."""
    from runtime_core.incidents import value_text
    from runtime_core.journal.provider import JournalError

    try:
        if process is not None:
            check_process(journal, process)
        found = load_incidents(journal, process)
    except JournalError as exc:
        raise fail(str(exc)) from None
    if as_json:
        rows: list[dict[str, Any]] = [{"process": name, **incident.to_dict()}
                                      for name, incident in found]
        sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        return
    if not found:
        where = f"process {process!r} in " if process else ""
        out.print(f"no incidents in {escape(where + str(journal))} (a process with "
                  "'incidents:' in its manifest records them)")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("process", "incident", "state", "gen", "ver", "occ", "seen", "runs"):
        table.add_column(column, no_wrap=True)
    table.add_column("fingerprint", no_wrap=True, overflow="ellipsis")  # takes what is left
    for name, incident in found:
        runs = f"{len(incident.run_ids)}" + (f" {incident.run_ids[-1][:8]}"
                                             if incident.run_ids else "")
        table.add_row(escape(name), incident.incident_id[:8],
                      f"[{STATE_STYLES.get(incident.state, '')}]{incident.state}[/]",
                      str(incident.generation), str(incident.version),
                      str(incident.occurrences), ago(incident.last_seen), runs,
                      escape(value_text(incident.fingerprint_value)[:60]))
    out.print(table)
