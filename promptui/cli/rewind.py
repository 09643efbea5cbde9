"""``promptui rewind`` and ``promptui fork``: preview and apply a rewind, or fork, through the
server that runs the process (``--url``, ``PROMPTUI_URL`` or the ``promptui serve`` running
here), else straight in the journal file of a process that is not running (in the control room:
the timeline, `w`). A journal a runtime holds is never written from here: the command goes
through its server, or says how to."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from promptui.cli.options import (
    JOURNAL_OPTION,
    NAME_ARGUMENT,
    TOKEN_OPTION,
    URL_OPTION,
    ServerTarget,
    check_process,
    confirm,
    fail,
    journal_problem,
    on_server,
    out,
    server_for,
)
from promptui.format import date_time

if TYPE_CHECKING:
    from runtime_core.control.offline import RewindMode, RewindPlan
    from runtime_core.control.views import JournalEntryView

# RewindMode's values, for --help without loading the runtime (a bad --mode is checked against
# RewindMode itself).
MODES = "both, conversation_only, code_only, summarize, cancel"


def _mode(mode: str) -> RewindMode:
    from runtime_core.control.offline import RewindMode

    try:
        return RewindMode(mode)
    except ValueError:
        known = ", ".join(m.value for m in RewindMode)
        raise fail(f"unknown mode {mode!r}; use one of: {known}") from None


def print_plan(plan: RewindPlan) -> None:
    out.print(f"[b]Rewind {escape(plan.process)} to just before {plan.target_entry_id}[/b] "
              f"({plan.target_type}, {date_time(plan.target_timestamp)}), mode "
              f"[b]{plan.mode.value}[/b]")
    out.print(f"{plan.entries_affected} of {plan.entries_total} entries from the target on: "
              f"{plan.conversation_affected} conversation, {plan.state_affected} state, "
              f"{plan.other_affected} other. History is kept; a rewind entry is appended.")
    if plan.context_changes:
        table = Table("context key", "now", "after", "change", box=None, pad_edge=False)
        for change in plan.context_changes:
            table.add_row(escape(change.key), escape(repr(change.before)[:40]),
                          escape(repr(change.after)[:40]), change.kind)
        out.print(table)
    else:
        out.print("Context: no change.")
    out.print(f"Conversation: {plan.messages_dropped} message(s) dropped")
    for line in plan.dropped_preview[:10]:
        out.print(f"  - {escape(line)}")
    if plan.outside_effects:
        out.print(f"[bold red]Not undone: {len(plan.outside_effects)} write(s) to the outside "
                  "world after the target:[/bold red]")
        for effect in plan.outside_effects[:20]:
            out.print(f"[red]  {effect.entry_id} {escape(effect.tool)}"
                      f"({escape(str(effect.args)[:60])}) -> {escape(effect.result[:40])}[/red]")
    out.print(f"[yellow]{plan.not_rolled_back}[/yellow]")


def _list(views: list[JournalEntryView], process: str) -> None:
    for view in views:
        out.print(f"{view.entry_id:>18}  {date_time(view.timestamp)}  {view.entry_type:<17} "
                  f"{(view.run_id or '-')[:12]:<12}  {escape(view.summary)}",
                  no_wrap=True, overflow="ellipsis")
    out.print(f"Preview: promptui rewind {process} ENTRY --plan")


def rewind(
    process: str = NAME_ARGUMENT,
    entry: str | None = typer.Argument(None, help="The entry to go back to just before "
                                       "(PROCESS:SEQ or SEQ); without it, recent entries."),
    mode: str = typer.Option("both", "--mode", "-m", help=f"One of: {MODES}."),
    plan_only: bool = typer.Option(False, "--plan", help="Print the plan; change nothing."),
    apply: bool = typer.Option(False, "--apply", help="Apply the rewind (asks first: with "
                               "writes to the outside world after ENTRY, for the process "
                               "name)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Apply without asking (needed "
                             "without a terminal)."),
    limit: int = typer.Option(30, "--limit", "-n", min=1, help="Entries to list."),
    journal_path: Path = JOURNAL_OPTION,
    url: str | None = URL_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """List a process's recent entries, preview a rewind, or apply it.

    On the server given by --url or PROMPTUI_URL (or running here), else in the journal file
    of a process that is not running."""
    from runtime_core.control.offline import (
        RewindMode,
        UnknownEntry,
        parse_entry_id,
        recent_entries,
    )

    if plan_only and apply:
        raise fail("--plan previews and changes nothing, --apply changes the process: give one")
    target = server_for(url, token, journal_path)
    if target is not None:
        _rewind_on_server(target, process, entry, mode, apply, yes, limit)
        return
    if not journal_path.exists():
        raise fail(f"no journal at {journal_path}; pass --journal PATH")
    check_process(journal_path, process)
    chosen = _mode(mode)
    if entry is None:
        _list(recent_entries(journal_path, process, limit), process)
        return
    try:
        parse_entry_id(process, entry)
    except UnknownEntry as exc:
        raise fail(str(exc)) from None
    if not apply:
        plan = _run(journal_path, process, entry, chosen, dry=True)
        print_plan(plan)
        out.print(f"Apply: promptui rewind {process} {entry} --mode {chosen.value} --apply")
        return
    if chosen is RewindMode.CANCEL:
        raise fail("mode cancel only previews; choose another mode to apply")
    plan = _run(journal_path, process, entry, chosen, dry=True)
    print_plan(plan)
    confirm_rewind(plan, yes)
    _run(journal_path, process, entry, chosen, dry=False)
    out.print(f"Rewound {process} to just before {plan.target_entry_id}; its next start "
              "recovers this state.")


def _rewind_on_server(target: ServerTarget, process: str, entry: str | None, mode: str,
                      apply: bool, yes: bool, limit: int) -> None:
    """The same steps through the server: the running process is suspended while it happens
    and continues from the restored state."""
    from runtime_core.control.offline import RewindMode, UnknownEntry, parse_entry_id

    chosen = _mode(mode)
    if entry is None:
        _list(on_server(target, lambda control: control.journal_entries(process, limit=limit)),
              process)
        return
    try:
        entry_id = f"{process}:{parse_entry_id(process, entry)}"
    except UnknownEntry as exc:
        raise fail(str(exc)) from None
    if apply and chosen is RewindMode.CANCEL:
        raise fail("mode cancel only previews; choose another mode to apply")
    plan = on_server(target, lambda control: control.rewind_plan(process, entry_id,
                                                                 chosen.value))
    print_plan(plan)
    if not apply:
        out.print(f"Apply: promptui rewind {process} {entry} --mode {chosen.value} --apply")
        return
    confirm_rewind(plan, yes)
    result = on_server(target, lambda control: control.rewind(process, entry_id, chosen.value))
    out.print(f"Rewound {process} to just before {plan.target_entry_id} "
              f"({result.rewind_entry_id}); it continues from this state.")


def confirm_rewind(plan: RewindPlan, yes: bool) -> None:
    """Ask as the control room does: a plan with writes to the outside world after the target
    (``irreversible``) wants the process name typed; any other plan a plain yes."""
    what = (f"rewind {plan.process} to just before {plan.target_entry_id} "
            f"(mode {plan.mode.value})")
    if plan.irreversible:
        writes = len(plan.outside_effects)
        confirm(what, f"{writes} write(s) to the outside world after it stay done.", yes=yes,
                type_name=plan.process)
    else:
        confirm(what, "History is kept; a rewind entry is appended.", yes=yes)


def fork(
    process: str = typer.Argument(..., help="The process to fork."),
    entry: str = typer.Argument(..., help="Fork from just before this entry (PROCESS:SEQ)."),
    new_name: str = typer.Argument(..., help="The new process's name: a letter, then "
                                   "letters, digits, '-' or '_' (at most 64)."),
    with_triggers: bool = typer.Option(
        False, "--with-triggers", help="Copy PROCESS's triggers to NEW_NAME too (by default "
        "it has none). One that cannot be served, e.g. its webhook path already is, is "
        "refused (409 CONFLICT) and nothing is forked. Needs a server."),
    journal_path: Path = JOURNAL_OPTION,
    url: str | None = URL_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """Fork: NEW_NAME starts from PROCESS's state just before ENTRY, without PROCESS's
    triggers unless --with-triggers.

    On the server given by --url or PROMPTUI_URL (or running here) NEW_NAME starts there at
    once; else the fork is recorded in the journal file, for NEW_NAME's first start."""
    import asyncio

    from runtime_core.control import offline

    try:  # the control room's rule, checked before anything is read or written
        offline.check_new_name(new_name)
        entry_id = f"{process}:{offline.parse_entry_id(process, entry)}"
    except (offline.UnknownEntry, ValueError) as exc:
        raise fail(str(exc)) from None
    target = server_for(url, token, journal_path)
    if target is not None:
        child = on_server(target, lambda control: control.fork(
            process, entry_id, new_name, with_triggers=with_triggers))
        copied = "with" if with_triggers else "without"
        out.print(f"Forked {process} at {entry_id} as {child} on {target.url}: it runs from "
                  f"that state, {copied} {process}'s triggers.")
        return
    if with_triggers:  # the manifest NEW_NAME is given decides its triggers
        raise fail("--with-triggers needs a server (--url or PROMPTUI_URL): a fork recorded "
                   "in a journal file gets its triggers from the manifest it starts with")
    if not journal_path.exists():
        raise fail(f"no journal at {journal_path}; pass --journal PATH")
    check_process(journal_path, process)
    try:
        first = asyncio.run(offline.fork(journal_path, process, entry, new_name))
    except (offline.UnknownEntry, ValueError) as exc:
        raise fail(str(exc)) from None
    except offline.JournalError as exc:
        raise fail(journal_problem(exc)) from None
    out.print(f"Forked {process} at {entry} as {new_name} ({first}). Give {new_name} a "
              f"manifest (a copy of {process}'s with name: {new_name}) and start it: it "
              "begins from that state.")


def _run(path: Path, process: str, entry: str, mode: RewindMode, *, dry: bool) -> RewindPlan:
    """The plan (``dry``) or the applied rewind's plan; errors become a clear exit."""
    import asyncio

    from runtime_core.control import offline

    try:
        if dry:
            return asyncio.run(offline.rewind_plan(path, process, entry, mode))
        return asyncio.run(offline.rewind(path, process, entry, mode, actor="cli"))
    except (offline.UnknownEntry, ValueError) as exc:
        raise fail(str(exc)) from None
    except offline.JournalError as exc:
        raise fail(journal_problem(exc)) from None
