"""What LocalControl reads from a process's journal: a page of entries, one entry whole, and a
dead letter by its event id (the newest from memory, older ones from the journal), each redacted
as every view is."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from runtime_core.control import local_views as views
from runtime_core.control import redaction
from runtime_core.control.plane import ControlError
from runtime_core.control.views import JournalEntryView, step_of
from runtime_core.delivery.dead_letters import history_of
from runtime_core.journal.provider import JournalError, ReadFilter
from runtime_core.journal.rewind import UnknownEntry, parse_entry_id
from runtime_core.journal.summary import summarize
from runtime_core.lifecycle import ProcessState
from runtime_core.process.process import AgentProcess
from runtime_core.triggers.base import TriggerEvent

MAX_SEQ = 2**63 - 1  # journal sequence numbers are SQLite (64-bit) integers
DEAD_LETTER_PAGE = 500


def check_entry_id(process: str, entry_id: str) -> None:
    """Refuse an entry id whose number no journal can hold (it would overflow SQLite)."""
    try:
        seq = parse_entry_id(process, entry_id)
    except UnknownEntry as exc:
        raise ControlError(str(exc)) from None
    if seq > MAX_SEQ:
        raise ControlError(f"no journal entry {process}:{seq}: sequence numbers stop at "
                           f"{MAX_SEQ}; list the entries with 'promptui rewind {process}'")


async def journal_entries(process: AgentProcess, *, before_seq: int | None,
                          at_or_before: float | None, entry_type: str | None, text: str,
                          limit: int, after_seq: int | None,
                          run_id: str | None) -> list[JournalEntryView]:
    """A page of ``process``'s entries, newest first, as the timeline shows them."""
    name, journal = process.name, process.journal
    if journal is None:
        raise ControlError(f"{name} keeps no journal, so it has no timeline "
                           "(set journal: {level: checkpoint} in its manifest)")
    await journal.flush()
    entries = await journal.read(ReadFilter(
        process=name, until_seq=before_seq, until_time=at_or_before, since_seq=after_seq,
        entry_type=entry_type or None, contains=text or None, newest_first=True,
        run_id=run_id or None, limit=max(1, min(limit, 5000))))
    redact = redaction.redactor(process)
    return [JournalEntryView(e.entry_id, e.seq, e.entry_type, e.run_id or "", e.timestamp,
                             redact(summarize(e)), step_of(e.data))
            for e in entries]


async def journal_entry(process: AgentProcess, entry_id: str) -> dict[str, Any]:
    """One entry whole (its data redacted); NOT_FOUND when the journal has no such entry."""
    name, journal = process.name, process.journal
    if journal is None:
        raise ControlError(f"{name} keeps no journal", "NOT_FOUND")
    seq = parse_entry_id(name, entry_id)
    await journal.flush()
    found = await journal.read(ReadFilter(process=name, since_seq=seq - 1,
                                          until_seq=seq + 1, limit=1))
    if not found:
        raise ControlError(f"{name} has no journal entry {entry_id}", "NOT_FOUND")
    entry = found[0]
    return {"entry_id": entry.entry_id, "seq": entry.seq, "entry_type": entry.entry_type,
            "run_id": entry.run_id or "", "timestamp": entry.timestamp,
            "data": views.redact_any(entry.data, redaction.redactor(process))}


async def dead_letter(process: AgentProcess, event_id: str) -> dict[str, Any]:
    """The dead letter of ``event_id``: the newest from memory, older ones from the journal
    a page at a time; NOT_FOUND when neither has it."""
    redact = redaction.redactor(process)
    for letter in reversed(process.dead_letters):
        event = letter["event"]
        if event.event_id == event_id:
            whole: dict[str, Any] = views.redact_any({
                "event": event.to_dict(), "reason": letter["reason"],
                "error": letter["error"], "attempts": letter["attempts"],
                "dead_lettered_at": letter["dead_lettered_at"],
                "history": history_of(event)}, redact)
            return whole
    journal, offset = process.journal, 0
    while journal is not None and process.state is not ProcessState.CREATED:
        try:
            page = await journal.dead_letters(process.name, offset=offset,
                                              limit=DEAD_LETTER_PAGE)
        except JournalError:
            break
        for stored in page:
            if stored.event.get("event_id") == event_id:
                kept: dict[str, Any] = views.redact_any({
                    "event": stored.event, "reason": stored.reason, "error": stored.error,
                    "attempts": stored.attempts,
                    "dead_lettered_at": iso(stored.dead_lettered_at),
                    "history": history_of(TriggerEvent.from_dict(stored.event))}, redact)
                return kept
        if len(page) < DEAD_LETTER_PAGE:
            break
        offset += DEAD_LETTER_PAGE
    raise ControlError(f"{process.name} has no dead letter {event_id}", "NOT_FOUND")


def iso(timestamp: float) -> str:
    """``timestamp`` (epoch seconds) as an ISO 8601 UTC time."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat()
