"""``promptui status``, ``start|stop|suspend|resume|restart NAME`` and ``dead-letters NAME``:
commands against a served runtime (``--url``, ``PROMPTUI_URL`` or the ``promptui serve``
running in this folder), else, where that makes sense, what the local journal knows."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from promptui.cli.journal_status import journal_rows, print_journal_status
from promptui.cli.options import (
    JOURNAL_OPTION,
    NAME_ARGUMENT,
    NO_SERVER,
    START_ONE,
    TIME_OPTION,
    TOKEN_OPTION,
    URL_OPTION,
    WIDE_OPTION,
    YES_OPTION,
    check_process,
    confirm,
    err,
    fail,
    json_option,
    need_server,
    on_server,
    out,
    print_table,
    server_for,
    stamp,
    wrapped,
)

if TYPE_CHECKING:
    from runtime_core.control.remote import RemoteControl
    from runtime_core.control.views import DeadLetterView, ProcessSummary

LETTER_PAGE = 1000
SHORT_ID = 8  # event ids are uuids; the first characters are enough to name one
#: how an operator settles a waiting run, by its reason (else: in the room)
SETTLE = {"unknown_write_outcome": "promptui reconcile {name} {run}",
          "elicitation": "promptui answer {name} {run}"}


# -- status ----------------------------------------------------------------------------------
def status(
    as_json: bool = json_option("Print a JSON object."),
    time_format: str = TIME_OPTION,
    wide: bool = WIDE_OPTION,
    url: str | None = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    journal: Path = JOURNAL_OPTION,
) -> None:
    """The processes of the served runtime; without a server, what the journal knows.

    Against a cluster node: every process of the cluster, with the node that runs it and the
    figures it published (marked "as of ..." when they are old), and every run waiting for an
    operator, whichever node runs it."""
    from runtime_core.control.offline import JournalError, left_behind
    from runtime_core.control.views import figures_note

    target = server_for(url, token, journal)
    if target is None:
        if not journal.exists():
            raise fail(f"no server running and no journal at {journal}: {START_ONE}, or pass "
                       "--journal PATH")
        try:
            rows = journal_rows(journal)
        except (JournalError, sqlite3.DatabaseError) as exc:
            raise fail(f"{exc}" if isinstance(exc, JournalError) else
                       f"cannot read journal {journal}: {exc}; if it is damaged, 'promptui "
                       f"journal salvage {journal}' rescues what it holds") from None
        print_journal_status(rows, journal, as_json, out, time_format=time_format, wide=wide)
        for what in left_behind(journal):
            err.print(f"[red]journal left behind:[/red] {escape(what)}")
        return

    async def read(control: RemoteControl) -> tuple[dict[str, Any], list[ProcessSummary]]:
        info = await control.runtime_info()  # fails loudly; the list falls back to a cache
        return info, await control.list_processes()

    info, processes = on_server(target, read)
    if as_json:
        print(json.dumps({"runtime": info.get("name"), "url": target.url, "source": "server",
                          "journal_faults": info.get("journal_faults") or {},
                          "journal_left_behind": info.get("journal_left_behind") or {},
                          "processes": [asdict(p) for p in processes]}, indent=2))
        return
    table = Table(title=f"{escape(str(info.get('name', '')))} @ {escape(target.url)}",
                  box=box.SIMPLE_HEAD, expand=True, show_edge=False,
                  padding=(0, 1, 0, 0))
    clustered = any(p.node is not None for p in processes)  # a scale-out node: who runs each
    # another node's figures published a while ago (a silent owner), or never: how old
    notes = {p.name: figures_note(p).removeprefix("as of ") for p in processes}
    dated = any(notes.values())
    for heading in ("process", *(("node",) if clustered else ()),
                    *(("as of",) if dated else ()), "state", "queue", "runs", "fails", "dead",
                    "wait", "health"):
        table.add_column(heading, no_wrap=True,  # "12s ago" whole, even on 80 columns
                         min_width=max(len(n) for n in notes.values()) if heading == "as of"
                         else None)
    table.add_column("last outcome", no_wrap=True, overflow="ellipsis", ratio=1)
    faults = info.get("journal_faults") or {}
    for path, why in faults.items():
        err.print(f"[red]journal degraded:[/red] {escape(path)}: {escape(why)}")
    for what in (info.get("journal_left_behind") or {}).values():
        err.print(f"[red]journal left behind:[/red] {escape(what)}")
    for p in processes:
        state = f"{p.state} ({p.suspend_reason})" if p.suspend_reason else p.state
        if p.suspend_reason and p.suspended_since is not None:
            state = (f"{p.state} ({p.suspend_reason} since "
                     f"{stamp(p.suspended_since, time_format)})")
        if p.draining:
            state = f"draining ({p.active_runs} left)"
        if p.journal_fault:
            state = f"{state}, journal degraded"
        counts = [f"{p.queue_depth}/{p.queue_capacity}",
                  f"{p.invocations} (+{p.active_runs})" if p.active_runs else
                  str(p.invocations), str(p.failure_streak), str(p.dead_letters),
                  str(p.waiting_runs)] if p.figures_known else ["?"] * 5
        table.add_row(escape(p.name), *((escape(p.node or "-"),) if clustered else ()),
                      *((escape(notes[p.name] or "now"),) if dated else ()),
                      escape(state), *counts, escape(p.health), escape(p.last_outcome))
    print_table(table, wide=wide)
    _print_waiting(processes, clustered)


def _print_waiting(processes: list[ProcessSummary], clustered: bool) -> None:
    """Every run waiting for an operator, of every process listed (a cluster node lists the
    whole cluster's), and how to settle them."""
    total = sum(p.waiting_runs for p in processes)
    if not total:
        return
    out.print(f"[bold red]{total} run(s) waiting for an operator:[/bold red]")
    for p in processes:
        where = f" @{p.node}" if clustered and p.node else ""
        for run in p.waiting:
            what = f"{run.reason}: {run.write_in_flight}" if run.write_in_flight else \
                run.reason
            short = run.run_id[:SHORT_ID]
            settle = SETTLE.get(run.reason, "Enter on it in the room").format(
                name=p.name, run=short)
            out.print(f"  {escape(p.name)}{escape(where)}  {short}  {escape(what)}  "
                      f"[dim]({escape(settle)})[/dim]")
        if p.waiting_runs > len(p.waiting):
            out.print(f"  {escape(p.name)}{escape(where)}  ... and "
                      f"{p.waiting_runs - len(p.waiting)} more (the room lists them)")


# -- start, stop, suspend, resume, restart -----------------------------------------------------
def _lifecycle(action: str, name: str, url: str | None, token: str | None,
               **options: Any) -> None:
    target = need_server(url, token)

    async def go(control: RemoteControl) -> str:
        await getattr(control, action)(name, **options)
        return str((await control.process_status(name)).get("state", "?"))

    out.print(f"{escape(name)}: {on_server(target, go)}")


def start(name: str = NAME_ARGUMENT, url: str | None = URL_OPTION,
          token: str | None = TOKEN_OPTION) -> None:
    """Start a stopped or failed process of the served runtime."""
    _lifecycle("start", name, url, token)


def stop(name: str = NAME_ARGUMENT, url: str | None = URL_OPTION,
         token: str | None = TOKEN_OPTION,
         drain: float | None = typer.Option(
             None, "--drain", min=0, max=3600, metavar="SECONDS",
             help="Let the runs in flight finish first, up to this long (default: the "
             "process's drain_timeout, else none)."),
         dead_letter_queued: bool = typer.Option(
             False, "--dead-letter-queued", help="Dead-letter the queued events (\"process "
             "stopped\", ready to redeliver) instead of keeping them for the next start.")
         ) -> None:
    """Stop a process of the served runtime. Its queued events stay queued in the journal and
    run once when it next starts ('promptui start NAME', or a restart of the server)."""
    if drain is not None:
        out.print(f"{escape(name)}: draining, up to {drain:g} s ...")
    _lifecycle("stop", name, url, token, drain_timeout=drain,
               queued="dead_letter" if dead_letter_queued else "keep")


def suspend(name: str = NAME_ARGUMENT, url: str | None = URL_OPTION,
            token: str | None = TOKEN_OPTION) -> None:
    """Suspend a running process: its queue fills, nothing runs."""
    _lifecycle("suspend", name, url, token)


def resume(name: str = NAME_ARGUMENT, url: str | None = URL_OPTION,
           token: str | None = TOKEN_OPTION,
           watch_again: bool = typer.Option(
               False, "--watch-again", help="Its health monitor forgets its anomalies and "
               "cooldowns first, so an anomaly that recurs pauses it again at once.")) -> None:
    """Resume a suspended process (a restart of the server keeps it suspended until then)."""
    target = need_server(url, token)

    async def go(control: RemoteControl) -> tuple[str, str]:
        before = await control.process_status(name)
        await control.resume(name, watch_again=watch_again)
        return str(before.get("suspend_reason") or ""), str(
            (await control.process_status(name)).get("state", "?"))

    why, state = on_server(target, go)
    out.print(f"{escape(name)}: {state}")
    if why == "health" and not watch_again:
        out.print(f"[dim]Its health monitor kept its memory: an anomaly it reported is not "
                  f"reported again within its cooldown. 'promptui resume {escape(name)} "
                  f"--watch-again' clears it, so a recurring anomaly pauses it at once.[/dim]")


def restart(name: str = NAME_ARGUMENT, url: str | None = URL_OPTION,
            token: str | None = TOKEN_OPTION) -> None:
    """Stop (if needed) and start a process of the served runtime."""
    _lifecycle("restart", name, url, token)


# -- dead letters ------------------------------------------------------------------------------
def dead_letters(
    name: str = NAME_ARGUMENT,
    redeliver: list[str] = typer.Option(None, "--redeliver", help="Redeliver this event "
                                        "(an id or a unique prefix; repeat for more)."),
    every: bool = typer.Option(False, "--all", help="Redeliver every dead letter."),
    clear: bool = typer.Option(False, "--clear", help="Drop every dead letter (they cannot be "
                               "redelivered after)."),
    yes: bool = YES_OPTION,
    as_json: bool = json_option("Print a JSON list."),
    time_format: str = TIME_OPTION,
    wide: bool = WIDE_OPTION,
    url: str | None = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    journal: Path = JOURNAL_OPTION,
) -> None:
    """List a process's dead letters; redeliver them (--redeliver ID, --all) or --clear them.

    --all and --clear ask first (--yes does not; without a terminal, pass --yes)."""
    from runtime_core.control.offline import JournalError
    from runtime_core.control.offline import dead_letters as stored_dead_letters

    if sum((bool(redeliver), every, clear)) > 1:
        raise fail("choose one of --redeliver, --all or --clear")
    changing = bool(redeliver) or every or clear
    target = server_for(url, token, None if changing else journal)
    if target is None:
        if changing:
            raise fail(NO_SERVER)
        if not journal.exists():
            raise fail(f"no server running and no journal at {journal}: {START_ONE}, or "
                       "pass --journal PATH")
        try:
            check_process(journal, name)
            letters = stored_dead_letters(journal, name)
        except JournalError as exc:
            raise fail(str(exc)) from None
        _print_letters(name, letters, as_json, f"from the journal (no server running): "
                       f"{journal}", "Redelivering needs the runtime: 'promptui serve', then "
                       f"promptui dead-letters {name} --all.", Shown(time_format, wide))
        return
    if (clear or every) and not yes:  # bulk: say how many, ask (--yes: straight on)
        letters = on_server(target, lambda control: _all_letters(control, name))
        if not letters:
            out.print(f"{escape(name)} has no dead letters (on {escape(target.url)}).")
            return
        if clear:
            confirm(f"clear {_letters(len(letters))} of {name}",
                    "They cannot be redelivered after.", yes=yes)
        else:  # payloads told apart by their previews, as the room shows them
            payloads = len({letter.payload_preview for letter in letters})
            confirm(f"redeliver {_letters(len(letters))} of {name} ({payloads} distinct "
                    f"payload{'s' if payloads != 1 else ''})", "Each runs again.", yes=yes)
    if clear:
        count = on_server(target, lambda control: control.clear_dead_letters(name))
        out.print(f"{escape(name)}: {count} dead letter(s) cleared")
    elif every or redeliver:
        count = on_server(target, lambda control: _redeliver(control, name, redeliver))
        out.print(f"{escape(name)}: {count} dead letter(s) redelivered")
    else:
        letters = on_server(target, lambda control: _all_letters(control, name))
        _print_letters(name, letters, as_json, f"on {target.url}",
                       f"Redeliver: promptui dead-letters {name} --redeliver ID (an id's first "
                       "characters are enough) or --all; --json gives the full ids.",
                       Shown(time_format, wide))


def _letters(count: int) -> str:
    return f"{count} dead letter{'s' if count != 1 else ''}"


async def _redeliver(control: RemoteControl, name: str, wanted: list[str] | None) -> int:
    """Redeliver all (no ids) or the named ones; an id may be a unique prefix."""
    from runtime_core.control.plane import ControlError

    if not wanted:
        return await control.redeliver(name, None)
    known = [letter.event_id for letter in await _all_letters(control, name)]
    ids = []
    for given in wanted:
        matches = [event_id for event_id in known if event_id.startswith(given)]
        if given in known:
            matches = [given]
        if len(matches) != 1:
            why = "matches several" if matches else "is not one of them"
            raise ControlError(f"{given!r} {why}; {name} has {len(known)} dead letter(s): "
                               f"list them with 'promptui dead-letters {name}'", "UNKNOWN_EVENT")
        ids.append(matches[0])
    return await control.redeliver(name, ids)


async def _all_letters(control: RemoteControl, name: str) -> list[DeadLetterView]:
    """Every dead letter the server keeps, in pages (it may keep far more than a page)."""
    letters: list[DeadLetterView] = []
    while True:
        page = await control.dead_letters(name, offset=len(letters), limit=LETTER_PAGE)
        letters.extend(page)
        if len(page) < LETTER_PAGE:
            return letters


@dataclass(frozen=True)
class Shown:
    """How a listing prints: ``--time`` and ``--wide``."""

    time_format: str = "iso"
    wide: bool = False

    def when(self, iso: str) -> str:
        """An ISO time as ``--time`` asks."""
        try:
            return stamp(datetime.fromisoformat(iso).timestamp(), self.time_format)
        except ValueError:  # not a time after all: as it is
            return iso


def _print_letters(name: str, letters: list[DeadLetterView], as_json: bool, source: str,
                   hint: str, shown: Shown = Shown()) -> None:
    if as_json:
        print(json.dumps([asdict(letter) for letter in letters], indent=2))
        return
    if not letters:
        out.print(f"{escape(name)} has no dead letters ({escape(source)}).")
        return
    table = Table(title=f"{escape(name)}: {len(letters)} dead letter(s) {escape(source)}",
                  box=box.SIMPLE_HEAD, expand=True, show_edge=False,
                  padding=(0, 1, 0, 0))
    for heading in ("event id", "trigger", "attempts", "when"):
        table.add_column(heading, no_wrap=True)
    table.add_column("reason", max_width=max(24, out.width // 3))
    table.add_column("payload", no_wrap=True, overflow="ellipsis", ratio=1)
    for letter in letters:
        reason = f"{letter.reason}: {letter.error}" if letter.error else letter.reason
        table.add_row(letter.event_id[:SHORT_ID], escape(letter.trigger_type),
                      str(letter.attempts), escape(shown.when(letter.dead_lettered_at)),
                      escape(reason), escape(letter.payload_preview))
    print_table(table, wide=shown.wide)
    _print_histories(letters, shown)
    out.print(escape(hint))


HISTORY_SHOWN = 5  # per letter; --json lists every one


def _print_histories(letters: list[DeadLetterView], shown: Shown) -> None:
    """Each letter's attempts, newest first: when, which attempt, what became of it, why."""
    told = [letter for letter in letters if letter.history]
    if told:
        wrapped.print("[bold]History[/bold] (newest first):")
    for letter in told:
        wrapped.print(f"  {letter.event_id[:SHORT_ID]}")
        for step in letter.history[:HISTORY_SHOWN]:
            why = f": {step.error}" if step.error else ""
            wrapped.print(f"    {escape(shown.when(step.at))}  attempt {step.attempt}  "
                      f"{escape(step.outcome)}{escape(why)}")
        if len(letter.history) > HISTORY_SHOWN:
            wrapped.print(f"    ... {len(letter.history) - HISTORY_SHOWN} more (--json lists "
                      "them all)")
