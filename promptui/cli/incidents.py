"""``promptui incidents``: the incidents a journal file records, folded from its ``incident``
entries without starting anything (in the control room: ``I`` on the dashboard)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from promptui.cli.options import JOURNAL_OPTION, check_process, fail, json_option, out
from promptui.format import ago

STATE_STYLES = {"open": "bold red", "recovered": "green", "resolved": "cyan"}


def incidents(
    process: str | None = typer.Option(None, "--process", "-p", help="Only this process."),
    as_json: bool = json_option("A JSON list, each incident with its payload history."),
    journal: Path = JOURNAL_OPTION,
) -> None:
    """List the incidents recorded in a journal: state, generation, occurrences, runs."""
    from runtime_core.control.offline import JournalError, value_text
    from runtime_core.control.offline import incidents as load_incidents

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
