"""``promptui rewind`` and ``promptui fork``: preview and apply a rewind, or fork, straight in a
journal file, for a process that is not running (in the control room: the timeline, `w`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from promptui.journal_cli import (
    JOURNAL_OPTION,
    TOKEN_OPTION,
    URL_OPTION,
    _check_process,
    _fail,
)
from runtime_core.journal.provider import JournalError, ReadFilter
from runtime_core.journal.rewind import (
    UnknownEntry,
    apply_offline,
    fork_offline,
    parse_entry_id,
    plan_offline,
)
from runtime_core.journal.rewind_plan import RewindMode, RewindPlan
from runtime_core.journal.sqlite import SQLiteJournal
from runtime_core.journal.summary import summarize

if TYPE_CHECKING:
    from promptui.server_target import ServerTarget

T = TypeVar("T")
out = Console(highlight=False)
MODES = ", ".join(m.value for m in RewindMode)


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def print_plan(plan: RewindPlan) -> None:
    out.print(f"[b]Rewind {escape(plan.process)} to just before {plan.target_entry_id}[/b] "
              f"({plan.target_type}, {_clock(plan.target_timestamp)}), mode "
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


async def _list(journal: SQLiteJournal, process: str, limit: int) -> None:
    entries = await journal.read(ReadFilter(process=process, newest_first=True, limit=limit))
    for entry in entries:
        out.print(f"{entry.entry_id:>18}  {_clock(entry.timestamp)}  {entry.entry_type:<17} "
                  f"{(entry.run_id or '-')[:12]:<12}  {escape(summarize(entry))}",
                  no_wrap=True, overflow="ellipsis")


def rewind(
    process: str = typer.Argument(..., help="The process name."),
    entry: str | None = typer.Argument(None, help="The entry to go back to just before "
                                       "(PROCESS:SEQ or SEQ); without it, recent entries."),
    mode: str = typer.Option("both", "--mode", "-m", help=f"One of: {MODES}."),
    plan_only: bool = typer.Option(False, "--plan", help="Print the plan; change nothing."),
    apply: bool = typer.Option(False, "--apply", help="Apply the rewind (asks first)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Apply without asking."),
    limit: int = typer.Option(30, "--limit", "-n", min=1, help="Entries to list."),
    journal_path: Path = JOURNAL_OPTION,
    url: str | None = URL_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """List a process's recent entries, preview a rewind, or apply it.

    On the server given by --url or PROMPTUI_URL (or running here), else in the journal file
    of a process that is not running."""
    from promptui.remote_cli import server_for  # imported here: remote_cli imports this module

    target = server_for(url, token, journal_path)
    if target is not None:
        _rewind_on_server(target, process, entry, mode, apply, yes, limit)
        return
    if not journal_path.exists():
        raise _fail(f"no journal at {journal_path}; pass --journal PATH")
    _check_process(journal_path, process)
    try:
        chosen = RewindMode(mode)
    except ValueError:
        raise _fail(f"unknown mode {mode!r}; use one of: {MODES}") from None
    if entry is None:
        asyncio.run(_with_journal(journal_path, lambda j: _list(j, process, limit)))
        out.print(f"Preview: promptui rewind {process} ENTRY --plan")
        return
    try:
        parse_entry_id(process, entry)
    except UnknownEntry as exc:
        raise _fail(str(exc)) from None
    if not apply:
        plan = _run(journal_path, process, entry, chosen, dry=True)
        print_plan(plan)
        out.print(f"Apply: promptui rewind {process} {entry} --mode {chosen.value} --apply")
        return
    if chosen is RewindMode.CANCEL:
        raise _fail("mode cancel only previews; choose another mode to apply")
    plan = _run(journal_path, process, entry, chosen, dry=True)
    print_plan(plan)
    if not yes and not typer.confirm("Apply this rewind?", default=False):
        out.print("Nothing changed.")
        raise typer.Exit(1)
    _run(journal_path, process, entry, chosen, dry=False)
    out.print(f"Rewound {process} to just before {plan.target_entry_id}; its next start "
              "recovers this state.")


def _rewind_on_server(target: ServerTarget, process: str, entry: str | None, mode: str,
                      apply: bool, yes: bool, limit: int) -> None:
    """The same steps through the server: the running process is suspended while it happens
    and continues from the restored state."""
    from promptui.remote_cli import on_server

    try:
        chosen = RewindMode(mode)
    except ValueError:
        raise _fail(f"unknown mode {mode!r}; use one of: {MODES}") from None
    if entry is None:
        views = on_server(target, lambda control: control.journal_entries(process, limit=limit))
        for view in views:
            out.print(f"{view.entry_id:>18}  {_clock(view.timestamp)}  {view.entry_type:<17} "
                      f"{(view.run_id or '-')[:12]:<12}  {escape(view.summary)}",
                      no_wrap=True, overflow="ellipsis")
        out.print(f"Preview: promptui rewind {process} ENTRY --plan")
        return
    try:
        entry_id = f"{process}:{parse_entry_id(process, entry)}"
    except UnknownEntry as exc:
        raise _fail(str(exc)) from None
    if apply and chosen is RewindMode.CANCEL:
        raise _fail("mode cancel only previews; choose another mode to apply")
    plan = on_server(target, lambda control: control.rewind_plan(process, entry_id,
                                                                 chosen.value))
    print_plan(plan)
    if not apply:
        out.print(f"Apply: promptui rewind {process} {entry} --mode {chosen.value} --apply")
        return
    if not yes and not typer.confirm("Apply this rewind?", default=False):
        out.print("Nothing changed.")
        raise typer.Exit(1)
    result = on_server(target, lambda control: control.rewind(process, entry_id, chosen.value))
    out.print(f"Rewound {process} to just before {plan.target_entry_id} "
              f"({result.rewind_entry_id}); it continues from this state.")


def fork(
    process: str = typer.Argument(..., help="The process to fork."),
    entry: str = typer.Argument(..., help="Fork from just before this entry (PROCESS:SEQ)."),
    new_name: str = typer.Argument(..., help="The new process's name."),
    journal_path: Path = JOURNAL_OPTION,
) -> None:
    """Record a fork: NEW_NAME starts from PROCESS's state just before ENTRY."""
    if not journal_path.exists():
        raise _fail(f"no journal at {journal_path}; pass --journal PATH")
    _check_process(journal_path, process)

    async def go(journal: SQLiteJournal) -> str:
        return await fork_offline(journal, process, entry, new_name)

    try:
        first = asyncio.run(_with_journal(journal_path, go))
    except (UnknownEntry, ValueError, JournalError) as exc:
        raise _fail(str(exc)) from None
    out.print(f"Forked {process} at {entry} as {new_name} ({first}). Give {new_name} a "
              f"manifest (a copy of {process}'s with name: {new_name}) and start it: it "
              "begins from that state.")


def _run(path: Path, process: str, entry: str, mode: RewindMode, *, dry: bool) -> RewindPlan:
    """The plan (``dry``) or the applied rewind's plan; errors become a clear exit."""

    async def go(journal: SQLiteJournal) -> RewindPlan:
        if dry:
            return await plan_offline(journal, process, entry, mode)
        plan, _ = await apply_offline(journal, process, entry, mode, actor="cli")
        return plan

    try:
        return asyncio.run(_with_journal(path, go))
    except (UnknownEntry, ValueError, JournalError) as exc:
        raise _fail(str(exc)) from None


async def _with_journal(path: Path, action: Callable[[SQLiteJournal], Awaitable[T]]) -> T:
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        return await action(journal)
    finally:
        await journal.close()
