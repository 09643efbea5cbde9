"""``promptui runs NAME``: a process's runs, newest first, as the room's Runs tab lists them;
``--waiting`` keeps the runs waiting for an operator (a write to reconcile, evidence, a
question to answer) with the command that settles each.

Against a served runtime (``--url``, ``PROMPTUI_URL`` or the ``promptui serve`` running here)
it lists what the runtime holds; without one, what the folder's journal recorded (run started,
waiting, finished), as ``promptui status`` does."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from promptui.cli.options import (
    JOURNAL_OPTION,
    NAME_ARGUMENT,
    START_ONE,
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
from promptui.format import clip, elapsed

if TYPE_CHECKING:
    from runtime_core.control.remote import RemoteControl

#: how an operator settles a waiting run, by its reason (else: in the room)
SETTLE = {"unknown_write_outcome": "promptui reconcile {name} {run}",
          "elicitation": "promptui answer {name} {run}"}
SHORT_ID = 8
RUN_ENTRIES = ("run_started", "run_waiting", "run_finished")


@dataclass(slots=True)
class RunLine:
    """One run as this command prints it (from a served runtime's RunView, or the journal)."""

    run_id: str
    trigger_type: str
    state: str
    started_at: float | None
    finished_at: float | None
    outcome: str  # the waiting reason, the error or the reply
    waiting_reason: str = ""


def runs(
    name: str = NAME_ARGUMENT,
    waiting: bool = typer.Option(False, "--waiting", help="Only the runs waiting for an "
                                 "operator, with the command that settles each."),
    as_json: bool = json_option("Print a JSON list of the runs."),
    time_format: str = TIME_OPTION,
    wide: bool = WIDE_OPTION,
    url: str | None = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    journal: Path = JOURNAL_OPTION,
) -> None:
    """List a process's runs, newest first (--waiting: those waiting for an operator)."""
    target = server_for(url, token, journal)
    if target is None:
        if not journal.exists():
            raise fail(f"no server running and no journal at {journal}: {START_ONE}, or pass "
                       "--journal PATH")
        check_process(journal, name)
        lines, source = journal_runs(journal, name), f"from the journal {journal}"
    else:
        async def read(control: RemoteControl) -> list[RunLine]:
            found = await control.runs(name, state="waiting" if waiting else None)
            return [RunLine(r.run_id, r.trigger_type, r.state, r.started_at, r.finished_at,
                            _outcome(r.state, r.waiting_reason, r.write_in_flight, r.reason,
                                     r.error, r.reply), r.waiting_reason) for r in found]

        lines, source = on_server(target, read), f"on {target.url}"
    if waiting:
        lines = [line for line in lines if line.state == "waiting"]
    lines.sort(key=lambda line: line.started_at or line.finished_at or 0.0, reverse=True)
    if as_json:
        print(json.dumps([asdict(line) for line in lines], indent=2, ensure_ascii=False))
        return
    what = "run(s) waiting for an operator" if waiting else "run(s)"
    if not lines:
        out.print(f"{escape(name)}: no {what} {escape(source)}")
        return
    now = time.time()
    table = Table(title=f"{escape(name)}: {len(lines)} {what} {escape(source)}",
                  box=box.SIMPLE_HEAD, expand=True, show_edge=False, padding=(0, 1, 0, 0))
    # "when": the start; the end where a journal kept only that (a run journaled at the
    # checkpoint level folds its start into its end)
    for heading in ("run", "trigger", "state", "when", "took"):
        table.add_column(heading, no_wrap=True)
    table.add_column("waits for / error / reply", no_wrap=True, overflow="ellipsis", ratio=1)
    if waiting:
        table.add_column("settle with", no_wrap=True)
    for line in lines:
        short = line.run_id[:SHORT_ID]
        took = "-" if line.started_at is None else elapsed(
            (line.finished_at if line.finished_at is not None else now) - line.started_at)
        moment = line.started_at or line.finished_at
        cells = [short, escape(line.trigger_type or "-"), escape(line.state),
                 stamp(moment, time_format, now) if moment else "-", took,
                 escape(clip(line.outcome, 400))]
        if waiting:
            cells.append(escape(SETTLE.get(line.waiting_reason, "Enter on it in the room")
                                .format(name=name, run=short)))
        table.add_row(*cells)
    print_table(table, wide=wide)


def _outcome(state: str, waiting_reason: str, write: str, reason: str, error: str,
             reply: str) -> str:
    if state == "waiting":
        return " ".join(p for p in (waiting_reason, write) if p)
    if error or reason:
        return ": ".join(p for p in (reason, error) if p)
    return reply


def journal_runs(journal: Path, name: str) -> list[RunLine]:
    """The runs the journal recorded for ``name``: started, then waiting or finished (the
    latest entry of each run says where it is)."""
    from runtime_core.control.offline import JournalError, read_entries

    found: dict[str, RunLine] = {}
    try:
        triggers = {str(e.data.get("event_id", "")): str(e.data.get("trigger_type", ""))
                    for e in read_entries(journal, name, entry_type="event_accepted")}
        entries = sorted((e for kind in RUN_ENTRIES
                          for e in read_entries(journal, name, entry_type=kind)),
                         key=lambda e: e.seq)
    except JournalError as exc:
        raise fail(str(exc)) from None
    for entry in entries:
        if not entry.run_id:
            continue
        data: dict[str, Any] = entry.data
        line = found.setdefault(entry.run_id, RunLine(
            entry.run_id, triggers.get(str(data.get("event_id", "")), ""), "unfinished", None,
            None, ""))
        if entry.entry_type == "run_started":
            line.started_at = line.started_at or entry.timestamp
        elif entry.entry_type == "run_waiting":
            line.state = "waiting"
            line.waiting_reason = str(data.get("reason") or data.get("waiting_reason") or "")
            line.outcome = " ".join(str(p) for p in (line.waiting_reason,
                                                     data.get("write_in_flight")) if p)
        else:
            line.state = str(data.get("state") or "finished")
            line.finished_at = entry.timestamp
            line.outcome = _outcome(line.state, "", "", str(data.get("reason") or ""),
                                    str(data.get("error") or ""), str(data.get("reply") or ""))
    return list(found.values())
