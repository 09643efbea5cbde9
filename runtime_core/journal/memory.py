"""An in-memory journal with the same semantics as the SQLite one (for tests)."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections import OrderedDict
from datetime import datetime
from typing import Any

from runtime_core.journal.entry import CheckpointEntry, EntryType, JournalEntry
from runtime_core.journal.left_out import CARRIERS, carries_start, typed_entries
from runtime_core.journal.provider import (
    DELIVERY_KEEP_SECONDS,
    IndexRules,
    OpenRun,
    ReadFilter,
    StoredDeadLetter,
    read_filter,
    to_json,
)


class InMemoryJournal:
    """A journal kept in memory, for tests and processes that need no durability. Same
    behaviour as SQLiteJournal (tests/journal/test_conformance.py runs both)."""

    def __init__(self) -> None:
        self._entries: list[JournalEntry] = []
        self._seq: dict[str, int] = {}
        self._pending: dict[str, dict[str, tuple[int, dict[str, Any]]]] = {}
        self._dead: dict[str, dict[str, tuple[int, StoredDeadLetter]]] = {}
        self._runs: dict[str, dict[str, OpenRun]] = {}
        # delivery key -> (event id, accepted at), oldest first
        self._deliveries: dict[str, OrderedDict[str, tuple[str, float]]] = {}

    async def open(self) -> None:
        return None

    def submit(self, entry: JournalEntry, *, attachment: Any = None) -> asyncio.Future[None]:
        self._store(entry, attachment)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    async def append(self, entry: JournalEntry, *, attachment: Any = None) -> JournalEntry:
        self._store(entry, attachment)
        return entry

    def _store(self, entry: JournalEntry, attachment: Any) -> None:
        # Round-trip through JSON: the memory journal accepts exactly what SQLite accepts, and
        # keeps a snapshot the caller cannot change afterwards.
        data = json.loads(to_json(entry.data, f"{entry.entry_type} entry data"))
        if attachment is not None:
            attachment = json.loads(to_json(attachment, "entry attachment"))
        effects = IndexRules.effects(entry, attachment)  # refuses a bad entry before its seq
        seq = self._seq.get(entry.process, 0) + 1
        self._seq[entry.process] = seq
        entry.seq = seq
        stored = copy.copy(entry)
        stored.data = data
        self._entries.append(stored)
        self._apply(stored, effects)

    def _apply(self, entry: JournalEntry, effects: list[tuple[str, Any]]) -> None:
        process = entry.process
        pending = self._pending.setdefault(process, {})
        dead = self._dead.setdefault(process, {})
        runs = self._runs.setdefault(process, {})
        order = entry.seq * IndexRules.ORD_SCALE
        for op, arg in effects:
            if op == "pending_add":
                pending[arg["event_id"]] = (order, arg)
            elif op == "pending_remove":
                pending.pop(arg, None)
            elif op == "run_open":
                run_id, event_id, attempt = arg
                runs[run_id] = OpenRun(run_id, event_id, attempt, "running", entry.seq)
            elif op in ("run_wait", "run_resume"):
                if arg in runs:
                    old = runs[arg]
                    state = "waiting" if op == "run_wait" else "running"
                    runs[arg] = OpenRun(old.run_id, old.event_id, old.attempt, state,
                                        old.started_seq)
            elif op == "run_close":
                runs.pop(arg, None)
            elif op == "dead_add":
                event, data = arg
                dead[data["event_id"]] = (order, StoredDeadLetter(
                    event, data.get("reason", ""), data.get("error", ""),
                    int(data.get("attempts", 0)), entry.timestamp))
            elif op == "dead_trim":
                ordered = sorted(dead.items(), key=lambda kv: kv[1][0])
                for event_id, _ in ordered[: max(0, len(ordered) - arg)]:
                    del dead[event_id]
            elif op == "dead_redeliver":
                for position, event_id in enumerate(arg):
                    item = dead.pop(event_id, None)
                    if item is not None:
                        pending[event_id] = (order + position, item[1].event)
            elif op == "delivery_add":
                self._add_delivery(process, arg, entry.timestamp)
            elif op == "dead_clear":
                if arg is None:
                    dead.clear()
                else:
                    for event_id in arg:
                        dead.pop(event_id, None)

    def _add_delivery(self, process: str, arg: tuple[str, str], at: float) -> None:
        deliveries = self._deliveries.setdefault(process, OrderedDict())
        while deliveries and next(iter(deliveries.values()))[1] < at - DELIVERY_KEEP_SECONDS:
            deliveries.popitem(last=False)  # pruned by age, as SQLite does on insert
        key, event_id = arg
        deliveries.setdefault(key, (event_id, at))  # the first acceptance is the one

    async def flush(self) -> None:
        return None

    async def read(self, query: ReadFilter | str, *, since: datetime | float | None = None,
                   entry_type: str | None = None, limit: int | None = None
                   ) -> list[JournalEntry]:
        """The entries ``query`` selects (a ReadFilter, or a process name: see read_filter)."""
        query = read_filter(query, since=since, entry_type=entry_type, limit=limit)
        usage = query.entry_type == EntryType.MODEL_USAGE  # with the turns carriers carry
        starts = query.entry_type == EntryType.RUN_STARTED  # with the intents carrying one
        out = [
            e for e in self._entries
            if (query.process is None or e.process == query.process)
            and (query.entry_type is None or e.entry_type == query.entry_type
                 or (usage and e.entry_type in CARRIERS) or (starts and carries_start(e)))
            and (query.run_id is None or e.run_id == query.run_id)
            and (query.since_seq is None or e.seq > query.since_seq)
            and (query.since_time is None or e.timestamp >= query.since_time)
            and (query.until_seq is None or e.seq < query.until_seq)
            and (query.until_time is None or e.timestamp <= query.until_time)
            and (not query.contains or _contains(e, query.contains))
        ]
        if query.newest_first:
            out.reverse()
        out = typed_entries(query.entry_type, out, newest_first=query.newest_first)
        if query.limit is not None:
            out = out[: query.limit]
        return [copy.deepcopy(e) for e in out]

    async def count_types(self, process: str, *, since_seq: int = 0) -> dict[str, int]:
        counts: dict[str, int] = {}
        for e in self._entries:
            if e.process == process and e.seq > since_seq:
                counts[e.entry_type] = counts.get(e.entry_type, 0) + 1
        return counts

    async def checkpoint(self, process: str, state: dict[str, Any], *, process_id: str = ""
                         ) -> JournalEntry:
        """Append a checkpoint entry holding ``state`` and return once it is durable."""
        return await self.append(JournalEntry(process, EntryType.CHECKPOINT, dict(state),
                                              process_id=process_id))

    async def last_checkpoint(self, process: str) -> CheckpointEntry | None:
        for entry in reversed(self._entries):
            if entry.process == process and entry.entry_type == EntryType.CHECKPOINT:
                return CheckpointEntry.of(copy.deepcopy(entry))
        return None

    async def pending_events(self, process: str) -> list[dict[str, Any]]:
        items = sorted(self._pending.get(process, {}).values(), key=lambda item: item[0])
        return [copy.deepcopy(event) for _, event in items]

    async def dead_letters(self, process: str, *, offset: int = 0, limit: int | None = None
                           ) -> list[StoredDeadLetter]:
        items = sorted(self._dead.get(process, {}).values(), key=lambda item: item[0])
        page = items[offset:] if limit is None else items[offset:offset + limit]
        return [copy.deepcopy(letter) for _, letter in page]

    async def dead_letter_count(self, process: str) -> int:
        return len(self._dead.get(process, {}))

    async def open_runs(self, process: str) -> list[OpenRun]:
        return sorted(self._runs.get(process, {}).values(), key=lambda r: r.started_seq)

    async def delivery_event(self, process: str, delivery_key: str) -> str | None:
        deliveries = self._deliveries.get(process)
        found = deliveries.get(delivery_key) if deliveries is not None else None
        if found is None or found[1] < time.time() - DELIVERY_KEEP_SECONDS:
            return None
        return found[0]

    async def processes(self) -> list[str]:
        return sorted(self._seq)

    async def close(self) -> None:
        return None

    def entry_count(self) -> int:
        return len(self._entries)

    def now(self) -> float:
        return time.time()


def _contains(entry: JournalEntry, text: str) -> bool:
    needle = text.lower()
    return needle in entry.entry_type.lower() or needle in json.dumps(
        entry.data, default=str, separators=(",", ":"), ensure_ascii=False).lower()


#: The name this class had before the spec's ``InMemoryJournal``; kept for old imports.
MemoryJournal = InMemoryJournal
