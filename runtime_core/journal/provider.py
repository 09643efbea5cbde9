"""The JournalProvider protocol, and the bookkeeping every backend keeps beside the log.

The log is append-only. Beside it each backend keeps four small indexes, updated in the same
transaction as the entry that changes them, so recovery never scans the log:

* pending events: accepted and not yet finished or dead-lettered (re-queued after a crash);
* dead letters: they survive restarts;
* open runs: started and not finished (resumed, or parked waiting, after a crash);
* deliveries: the delivery key of each event accepted with one (its metadata's
  ``delivery_key``: a sender's delivery id, a webhook's signature, an inject's idempotency key
  ``inject:<key>``), with that event's id, written with the ``event_accepted`` entry, so a
  repeat is known to be one only if the first is durable; kept ``DELIVERY_KEEP_SECONDS`` (pruned
  by age whenever one is added: longer than any webhook signature can pass, see
  triggers/signing.py, and than the day an idempotency key promises).

Payloads live in those indexes (an entry's ``attachment``), not in the log, unless the journal
level is ``full``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from runtime_core.errors import RuntimeBaseError
from runtime_core.journal.entry import CheckpointEntry, EntryType, JournalEntry, event_done
from runtime_core.journal.left_out import STARTED, carries_start
from runtime_core.triggers.base import DELIVERY_KEY

#: How long the delivery index remembers a delivery (senders redeliver within days).
DELIVERY_KEEP_SECONDS = 7 * 24 * 3600.0
MAX_DELIVERY_KEY = 1000


class JournalError(RuntimeBaseError):
    """The journal could not be read or written (a RuntimeError)."""


#: Made once: json.dumps with options builds an encoder on every call (3 an event).
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def to_json(value: Any, where: str) -> str:
    """Compact JSON, or a JournalError naming what could not be stored (no NaN, no objects)."""
    try:
        text = _COMPACT.encode(value)
    except (TypeError, ValueError) as exc:
        raise JournalError(f"{where} is not JSON-serialisable: {exc}") from exc
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (JSON "\ud800" from a webhook) has no UTF-8 form and would fail the
        # write, and with it the journal; as an escape it is still JSON and reads back the same.
        return json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return text


@dataclass(frozen=True, slots=True)
class ReadFilter:
    """Which entries ``JournalProvider.read`` returns: of one process, type or run; after or
    before a seq; after or at-or-before a time; whose data contains a text (any case); at most
    ``limit``, oldest first unless ``newest_first``."""

    process: str | None = None
    entry_type: str | None = None
    run_id: str | None = None
    since_seq: int | None = None  # entries with seq > since_seq
    since_time: float | None = None
    until_seq: int | None = None  # entries with seq < until_seq
    until_time: float | None = None  # entries at or before this time
    contains: str | None = None  # the entry's JSON data contains this text (case-insensitive)
    limit: int | None = None
    newest_first: bool = False


def read_filter(query: ReadFilter | str, *, since: datetime | float | None = None,
                entry_type: str | None = None, limit: int | None = None) -> ReadFilter:
    """What ``read`` was asked: a ReadFilter as it is, or the reference runtime's form,
    ``read("name", since=datetime, entry_type=..., limit=...)`` (a process's entries, oldest
    first, at or after ``since``, at most ``limit``). TypeError for a mix of the two."""
    if isinstance(query, ReadFilter):
        if since is not None or entry_type is not None or limit is not None:
            raise TypeError("read(ReadFilter(...)) takes every filter inside the ReadFilter, "
                            "e.g. ReadFilter(process='name', entry_type='checkpoint', "
                            "since_time=..., limit=10)")
        return query
    if not isinstance(query, str):
        raise TypeError(f"read() takes a ReadFilter or a process name, not "
                        f"{type(query).__name__}")
    after = since.timestamp() if isinstance(since, datetime) else since
    return ReadFilter(process=query, entry_type=entry_type, since_time=after, limit=limit)


@dataclass(frozen=True, slots=True)
class StoredDeadLetter:
    """A dead letter as the journal keeps it: the event (as a dict), the reason, the error,
    how many attempts it had, and when it was dead-lettered."""

    event: dict[str, Any]
    reason: str
    error: str
    attempts: int
    dead_lettered_at: float


@dataclass(frozen=True, slots=True)
class OpenRun:
    """A run the journal shows as started and not finished (``running`` or ``waiting``): what
    recovery takes back after a crash or a shutdown."""

    run_id: str
    event_id: str
    attempt: int
    state: str  # "running" or "waiting"
    started_seq: int


@runtime_checkable
class JournalProvider(Protocol):
    """What every journal backend offers (SQLiteJournal, PostgresJournal, InMemoryJournal):
    an append-only log of JournalEntry per process name, numbered 1, 2, 3... by the journal.
    ``append`` returns once the entry is durable and entries commit in submission order;
    reads never wait for the writer. Besides plain reads, it answers what recovery needs:
    the last checkpoint, the events still queued, the dead letters, the runs left open, and
    the delivery ids already taken."""

    async def open(self) -> None: ...

    def submit(self, entry: JournalEntry, *, attachment: Any = None) -> asyncio.Future[None]:
        """Queue ``entry`` (its seq is assigned now); the future resolves once it is committed.
        Entries commit in submission order, so a later durable append covers earlier ones."""
        ...

    async def append(self, entry: JournalEntry, *, attachment: Any = None) -> JournalEntry:
        """Append ``entry`` and return once it is durable."""
        ...

    async def flush(self) -> None:
        """Wait until every entry appended so far is committed."""
        ...

    async def read(self, query: ReadFilter | str, *, since: datetime | float | None = None,
                   entry_type: str | None = None, limit: int | None = None
                   ) -> list[JournalEntry]:
        """The entries ``query`` selects (see ``read_filter``: a process name with the
        reference's keywords works too)."""
        ...

    async def checkpoint(self, process: str, state: dict[str, Any], *, process_id: str = ""
                         ) -> JournalEntry: ...

    async def last_checkpoint(self, process: str) -> CheckpointEntry | None:
        """The process's newest checkpoint, or None. It reads as its state too
        (``cp["context_state"]``), as the reference's dict did."""
        ...

    async def pending_events(self, process: str) -> list[dict[str, Any]]: ...

    async def dead_letters(self, process: str, *, offset: int = 0, limit: int | None = None
                           ) -> list[StoredDeadLetter]:
        """Every dead letter kept for ``process`` (until redelivered or cleared), oldest first;
        a page of them with ``offset`` and ``limit``."""
        ...

    async def dead_letter_count(self, process: str) -> int: ...

    async def open_runs(self, process: str) -> list[OpenRun]: ...

    async def delivery_event(self, process: str, delivery_key: str) -> str | None:
        """The id of the event ``process`` accepted with ``delivery_key`` within the last
        DELIVERY_KEEP_SECONDS, or None."""
        ...

    async def processes(self) -> list[str]: ...

    async def count_types(self, process: str, *, since_seq: int = 0) -> dict[str, int]:
        """How many entries of each type ``process`` has after ``since_seq``."""
        ...

    async def close(self) -> None: ...


class IndexRules:
    """How an entry changes the indexes; shared by every backend so they cannot drift.

    ``effects`` also validates: an entry that cannot be applied is refused (JournalError) when it
    is submitted, before it takes a seq, so it can never break a batch of other entries.
    Ordering keys are ``seq * ORD_SCALE + position``, the same in every backend."""

    ORD_SCALE = 10_000

    @staticmethod
    def effects(entry: JournalEntry, attachment: Any) -> list[tuple[str, Any]]:
        """A list of (operation, argument) pairs for the backend to apply."""
        data = entry.data
        kind = entry.entry_type

        def need(condition: bool, what: str) -> None:
            if not condition:
                raise JournalError(f"a {kind} entry needs {what}")

        need(bool(entry.process), "a process name")
        ops: list[tuple[str, Any]] = []
        if kind == EntryType.EVENT_ACCEPTED:
            need(isinstance(attachment, dict) and bool(attachment.get("event_id")),
                 "the event (with its event_id) as its attachment")
            ops.append(("pending_add", attachment))
            key = _delivery_key(attachment)
            if key is not None:
                ops.append(("delivery_add", (key, attachment["event_id"])))
        elif kind == EntryType.RUN_STARTED or carries_start(entry):
            # a run's start, or a tool intent that carries it (journal.left_out.STARTED)
            start = data if kind == EntryType.RUN_STARTED else data[STARTED]
            need(bool(entry.run_id), "a run_id")
            need(bool(start.get("event_id")), "data.event_id")
            ops.append(("run_open", (entry.run_id, start["event_id"], start.get("attempt", 1))))
        elif kind in (EntryType.RUN_WAITING, EntryType.RECONCILED, EntryType.RUN_FINISHED,
                      EntryType.EVIDENCE):
            need(bool(entry.run_id), "a run_id")
            if kind == EntryType.RUN_WAITING:
                ops.append(("run_wait", entry.run_id))
            elif kind in (EntryType.RECONCILED, EntryType.EVIDENCE):
                ops.append(("run_resume", entry.run_id))
            else:
                ops.append(("run_close", entry.run_id))
                if event_done(data):
                    need(bool(data.get("event_id")), "data.event_id")
                    ops.append(("pending_remove", data["event_id"]))
        elif kind == EntryType.DEAD_LETTERED:
            need(bool(data.get("event_id")), "data.event_id")
            need(isinstance(attachment, dict), "the event as its attachment")
            ops.append(("pending_remove", data["event_id"]))
            ops.append(("dead_add", (attachment, data)))
            keep = data.get("keep")
            if keep is not None:
                need(isinstance(keep, int) and keep >= 0, "data.keep as a whole number")
                ops.append(("dead_trim", int(keep)))
        elif kind == EntryType.REDELIVERED:
            ids = data.get("event_ids")
            need(isinstance(ids, list) and all(isinstance(i, str) for i in ids),
                 "data.event_ids as a list of ids")
            ops.append(("dead_redeliver", [str(i) for i in ids or []]))
        elif kind == EntryType.DEAD_LETTERS_CLEARED:
            ids = data.get("event_ids")
            need(ids is None or (isinstance(ids, list) and all(isinstance(i, str) for i in ids)),
                 "data.event_ids as a list of ids or null")
            ops.append(("dead_clear", ids))
        return ops


def _delivery_key(event: dict[str, Any]) -> str | None:
    """The event's delivery key, when it has a usable one (a bad one is not indexed: the event
    itself is still accepted)."""
    metadata = event.get("metadata")
    key = metadata.get(DELIVERY_KEY) if isinstance(metadata, dict) else None
    return key if isinstance(key, str) and 0 < len(key) <= MAX_DELIVERY_KEY else None


async def open_for_writing(journal: JournalProvider) -> None:
    """Open ``journal`` for a writer (a process, an offline rewind): a journal that opened
    read-only because another writer holds its file (SQLiteJournal.read_only) is refused now,
    with the JournalLocked that names the holder, rather than at the first write."""
    was_open = bool(getattr(journal, "is_open", False))
    await journal.open()
    held = getattr(journal, "read_only", None)
    if isinstance(held, BaseException):
        if not was_open:  # opened read-only just now, by this call: nothing is left open
            await journal.close()
        raise held
