"""The control plane's offline road: what the command line does with a journal file when no
runtime serves it. Reads open the file read-only (looking never changes it); a rewind or a fork
appends the same entries and checkpoint a live process would, so the process's next start
recovers that state. The CLI reaches the journal only through here."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from runtime_core.control.views import (
    ENTRY_TYPES,
    DeadLetterView,
    JournalEntryView,
    attempt_views,
    preview,
    step_of,
)
from runtime_core.delivery.dead_letters import history_of
from runtime_core.incidents import Incident, fold_entries, value_text
from runtime_core.journal.config import journal_file
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.inspect import VerifyReport, process_names, read_dead_letters
from runtime_core.journal.inspect import read_entries as read_entries
from runtime_core.journal.inspect import salvage as salvage
from runtime_core.journal.inspect import verify as verify
from runtime_core.journal.offline_rewind import apply_offline, fork_offline, plan_offline
from runtime_core.journal.provider import JournalError, open_for_writing
from runtime_core.journal.reference.importer import (
    ImportReport,
    NotAReferenceJournal,
    NothingToImport,
    ProcessImport,
)
from runtime_core.journal.reference.importer import import_into_file as import_reference
from runtime_core.journal.rewind import UnknownEntry, parse_entry_id
from runtime_core.journal.rewind_plan import RewindMode, RewindPlan
from runtime_core.journal.sqlite.journal import SQLiteJournal
from runtime_core.journal.sqlite.left_behind import found_beside
from runtime_core.journal.sqlite.lock import JournalLocked, read_holder
from runtime_core.journal.sqlite.salvage import SalvageReport, report_lines
from runtime_core.journal.summary import summarize
from runtime_core.triggers.base import TriggerEvent

__all__ = ["ENTRY_TYPES", "ImportReport", "Incident", "JournalEntry", "JournalError",
           "JournalLocked", "NotAReferenceJournal", "NothingToImport", "ProcessImport",
           "RewindMode", "RewindPlan", "SalvageReport", "UnknownEntry", "VerifyReport",
           "check_entry_type",
           "check_new_name", "check_process", "dead_letters", "fork", "holder",
           "import_reference",
           "incidents", "journal_file_at", "left_behind",
           "parse_entry_id", "probe_servers", "process_names", "read_entries", "recent_entries",
           "report_lines", "rewind", "rewind_plan", "salvage", "value_text", "verify"]

T = TypeVar("T")
REFERENCE_LINES = ".jsonl"  # a reference FileJournal's <process>.jsonl files

# Every type the runtime journals, in EntryType's order (its lifecycle order).
NAME_RULE = "a letter, then letters, digits, '-' or '_' (at most 64)"


def journal_file_at(path: Path) -> Path:
    """The journal file a ``--journal PATH`` means, by the rule a start follows (JournalConfig):
    a folder, or a path without a suffix, holds ``journal.db``, as ``promptui serve --journal
    FOLDER`` writes it. A reference FileJournal folder (JSON lines) without one is a
    JournalError saying how to import it: promptui reads its own journal only."""
    file = Path(journal_file(str(path)))
    if file != path and path.is_dir() and not file.exists() \
            and any(path.glob(f"*{REFERENCE_LINES}")):
        raise JournalError(f"{path} is a reference FileJournal folder (JSON lines) with no "
                           f"promptui journal in it ({file.name}): import it with 'promptui "
                           f"journal import {path}' and read .promptui/journal.db, or pass "
                           "the journal file with --journal")
    return file


def left_behind(path: Path) -> list[str]:
    """The damaged journals a start moved aside from ``path`` (on_damage: start_fresh) that
    still lie beside it: one line each, what it held and how to salvage it."""
    return [kept.describe() for kept in found_beside(path)]


def holder(path: Path) -> dict[str, Any] | None:
    """The runtime that has the journal at ``path`` open now, by its lock file: ``{"pid",
    "host", "since", "text"}``; None when none on this host does (a dead holder's pid is
    gone; one on another host cannot be checked from here)."""
    found = read_holder(path)
    if found is None or found.host != socket.gethostname():
        return None
    try:
        os.kill(found.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        pass
    return {"pid": found.pid, "host": found.host, "since": found.since,
            "text": found.describe()}


def check_entry_type(entry_type: str) -> None:
    """ValueError naming the valid types unless ``entry_type`` is one the runtime journals."""
    if entry_type not in ENTRY_TYPES:
        raise ValueError(f"unknown entry type {entry_type!r}; use one of: "
                         + ", ".join(ENTRY_TYPES))


def check_new_name(name: str) -> None:
    """ValueError unless ``name`` can name a process: the rule a manifest's name and the
    control room's fork follow (it becomes a journal key, a path segment, a table row)."""
    from runtime_core.manifest.loader import (
        NAME_PATTERN,  # here: the manifest loads the whole config
    )

    if not NAME_PATTERN.match(name):
        raise ValueError(f"{name!r} is not a process name: {NAME_RULE}")


def check_process(path: Path, process: str) -> None:
    """JournalError unless the journal at ``path`` has entries for ``process``."""
    names = process_names(path)
    if process not in names:
        known = ", ".join(names) or "none yet"
        raise JournalError(f"{path} has no entries for process {process!r} (processes: "
                           f"{known})")


def recent_entries(path: Path, process: str, limit: int) -> list[JournalEntryView]:
    """The newest ``limit`` entries as timeline lines, newest first."""
    return [JournalEntryView(e.entry_id, e.seq, e.entry_type, e.run_id or "", e.timestamp,
                             summarize(e), step_of(e.data))
            for e in read_entries(path, process, limit=limit, newest_first=True)]


def dead_letters(path: Path, process: str) -> list[DeadLetterView]:
    """The dead letters the journal keeps for ``process``, as the control plane shows them."""
    return [DeadLetterView(
        str(d.event.get("event_id", "")), str(d.event.get("trigger_type", "")), d.reason,
        d.error, d.attempts, datetime.fromtimestamp(d.dead_lettered_at, UTC).isoformat(),
        preview(d.event.get("payload", {})),
        attempt_views(history_of(TriggerEvent.from_dict(d.event))))
        for d in read_dead_letters(path, process)]


def incidents(path: Path, process: str | None = None) -> list[tuple[str, Incident]]:
    """(process, incident) pairs folded from the ``incident`` entries: open ones first, then
    the latest seen."""
    names = [process] if process is not None else process_names(path)
    found: list[tuple[str, Incident]] = []
    for name in names:
        # A journal keeps at most history_size payloads per incident in its entries anyway.
        entries = read_entries(path, name, entry_type=EntryType.INCIDENT)
        found += [(name, incident) for incident in fold_entries(e.data for e in entries)]
    return sorted(found, key=lambda pair: (not pair[1].is_open, -pair[1].last_seen))


async def rewind_plan(path: Path, process: str, entry_id: str | int,
                      mode: RewindMode | str) -> RewindPlan:
    """What rewinding a process that is not running would change; changes nothing."""
    return await _with_journal(path, lambda j: plan_offline(j, process, entry_id, mode))


async def rewind(path: Path, process: str, entry_id: str | int, mode: RewindMode | str, *,
                 actor: str = "cli") -> RewindPlan:
    """Rewind a process that is not running; the plan that was applied."""
    async def go(journal: SQLiteJournal) -> RewindPlan:
        plan, _ = await apply_offline(journal, process, entry_id, mode, actor=actor)
        return plan

    return await _with_journal(path, go)


async def fork(path: Path, process: str, entry_id: str | int, new_name: str) -> str:
    """Record a fork; the id of the new process's first entry."""
    check_new_name(new_name)
    return await _with_journal(path, lambda j: fork_offline(j, process, entry_id, new_name))


async def probe_servers(servers: Any, base_dir: Path) -> list[dict[str, Any]]:
    """Connect a manifest's MCP servers once and list their tools with effects, one row per
    server (``error`` set for one that failed); nothing is started."""
    from runtime_core.agent.mcp.tools import probe_servers as probe

    return await probe(servers, base_dir=base_dir)


async def _with_journal(path: Path, action: Callable[[SQLiteJournal], Awaitable[T]]) -> T:
    if not await asyncio.to_thread(path.exists):  # a journal opened here would be created
        raise JournalError(f"no journal at {path}; pass --journal PATH")
    # A writer: refused while a runtime holds the file (JournalLocked names it); strict, so
    # an offline command never moves a damaged journal aside, it says so and stops.
    journal = SQLiteJournal(path, strict=True)
    await open_for_writing(journal)
    try:
        return await action(journal)
    finally:
        await journal.close()
