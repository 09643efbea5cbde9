"""``promptui incidents``: the incidents a journal file records, folded from its ``incident``
entries without starting anything (in the control room: ``I`` on the dashboard); ``promptui
incidents resolve ID`` and ``reopen ID`` settle one on the served runtime, as the room's ``r``
and ``o`` do (refused by a read-only server)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from promptui.cli.options import (
    JOURNAL_OPTION,
    NO_SERVER,
    TIME_OPTION,
    TOKEN_OPTION,
    URL_OPTION,
    WIDE_OPTION,
    check_process,
    fail,
    json_option,
    on_server,
    out,
    print_table,
    server_for,
    stamp,
)
from promptui.cli.plain_help import Typer

if TYPE_CHECKING:
    from runtime_core.control.remote import RemoteControl
    from runtime_core.control.views import IncidentView

STATE_STYLES = {"open": "bold red", "recovered": "green", "resolved": "cyan"}


incidents_app = Typer(help="The incidents a journal records (state, generation, occurrences, "
                           "runs); resolve or reopen one on the served runtime.")
PROCESS_OPTION = typer.Option(None, "--process", "-p", help="Only this process.")
ID_ARGUMENT = typer.Argument(..., metavar="ID", help="The incident's id (its first characters "
                             "will do), as 'promptui incidents' lists it.")
NOTE_OPTION = typer.Option("", "--note", help="Why, for the incident's history.")


@incidents_app.callback(invoke_without_command=True)
def incidents(
    ctx: typer.Context,
    process: str | None = PROCESS_OPTION,
    as_json: bool = json_option("A JSON list, each incident with its payload history."),
    time_format: str = TIME_OPTION,
    wide: bool = WIDE_OPTION,
    journal: Path = JOURNAL_OPTION,
) -> None:
    """List the incidents recorded in a journal: state, generation, occurrences, runs."""
    if ctx.invoked_subcommand is not None:
        return
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
    now = time.time()
    table = Table(box=None, pad_edge=False)
    for column in ("process", "incident", "state", "gen", "ver", "occ", "last seen", "runs"):
        table.add_column(column, no_wrap=True)
    table.add_column("fingerprint", no_wrap=True, overflow="ellipsis")  # takes what is left
    for name, incident in found:
        runs = f"{len(incident.run_ids)}" + (f" {incident.run_ids[-1][:8]}"
                                             if incident.run_ids else "")
        table.add_row(escape(name), incident.incident_id[:8],
                      f"[{STATE_STYLES.get(incident.state, '')}]{incident.state}[/]",
                      str(incident.generation), str(incident.version),
                      str(incident.occurrences), stamp(incident.last_seen, time_format, now),
                      runs, escape(value_text(incident.fingerprint_value)[:60]))
    print_table(table, wide=wide)


@incidents_app.command("resolve")
def resolve(incident_id: str = ID_ARGUMENT, note: str = NOTE_OPTION,
            process: str | None = PROCESS_OPTION, url: str | None = URL_OPTION,
            token: str | None = TOKEN_OPTION) -> None:
    """Resolve an open incident (an operator's decision: the next occurrence of its
    fingerprint opens a new generation)."""
    _settle("resolve", incident_id, note, process, url, token)


@incidents_app.command("reopen")
def reopen(incident_id: str = ID_ARGUMENT, note: str = NOTE_OPTION,
           process: str | None = PROCESS_OPTION, url: str | None = URL_OPTION,
           token: str | None = TOKEN_OPTION) -> None:
    """Reopen a resolved or recovered incident."""
    _settle("reopen", incident_id, note, process, url, token)


def _settle(action: str, incident_id: str, note: str, process: str | None, url: str | None,
            token: str | None) -> None:
    """Find the incident on the served runtime by its id (or the start of it), then resolve
    or reopen it at the generation and version just read (refused if it moved meanwhile)."""
    target = server_for(url, token)
    if target is None:  # a change goes through the runtime that owns the incident book
        raise fail(f"{action} changes the runtime's incident book: {NO_SERVER} (or press "
                   f"{'r' if action == 'resolve' else 'o'} on it in the room, I)")

    async def go(control: RemoteControl) -> IncidentView:
        from runtime_core.control.plane import ControlError

        views = await control.incidents(process)
        found = [v for v in views if v.incident_id == incident_id] or [
            v for v in views if v.incident_id.startswith(incident_id)]
        if len(found) != 1:
            listed = ", ".join(f"{v.incident_id[:8]} ({v.process}, {v.state})"
                               for v in views[:10]) or "none"
            raise ControlError(
                f"{incident_id!r} matches {len(found)} incidents; give more of the id"
                if found else f"no incident {incident_id!r} (incidents: {listed})",
                "UNKNOWN_INCIDENT")
        view = found[0]
        call = control.resolve_incident if action == "resolve" else control.reopen_incident
        return await call(view.process, view.incident_id, generation=view.generation,
                          version=view.version, note=note)

    done = on_server(target, go)
    out.print(f"{escape(done.process)}: incident {done.incident_id[:8]} {escape(done.state)} "
              f"(generation {done.generation})")
