"""The reads the two SQL journals (SQLite, PostgreSQL) answer with the same queries over the same
tables: the log by filter, the last checkpoint (by the entry-type index), the four indexes
(pending events, dead letters, open runs, deliveries) and the processes. A backend says how it
fetches and appends, its parameter marker, its entry SELECT and row decoding, and its few
differences."""

from __future__ import annotations

import asyncio
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from runtime_core.journal.entry import CheckpointEntry, EntryType, JournalEntry
from runtime_core.journal.faults import FaultState
from runtime_core.journal.left_out import (
    SQLITE_CARRIES,
    SQLITE_CARRIES_START,
    typed_entries,
    typed_sql,
)
from runtime_core.journal.provider import (
    DELIVERY_KEEP_SECONDS,
    OpenRun,
    ReadFilter,
    StoredDeadLetter,
    read_filter,
)
from runtime_core.journal.run_key import runs_params, runs_term

#: How many runs one ``runs_entries`` query asks for (well under SQLite's parameter limit).
RUNS_PAGE = 500


class SqlReads(ABC):
    #: The backend's parameter marker for "?" in the queries below.
    MARK = "?"
    #: What LIMIT takes for "no limit".
    NO_LIMIT: int | None = -1
    #: How the process list is ordered (code point order in every backend).
    PROCESS_ORDER = "process"
    #: A dead letter's reason and error are stored as JSON strings (they keep any text).
    TEXTS_AS_JSON = False
    #: The backend's entry SELECT (``e`` joined to its incarnation), a ReadFilter as SQL and a
    #: row back into an entry (checked against its checksum).
    SELECT_ENTRIES = ""
    #: The process term of a read by run ids (SQLite's unary + keeps it off the process index
    #: so that the run index finds the rows).
    BY_RUN_PROCESS = "e.process"
    #: How a read by run ids says them (journal.run_key.runs_term): the unary plus that keeps
    #: the whole id off the index (SQLite's), and the parameter as the key takes it.
    RUN_PLUS = "+"
    RUN_KEY_MARK = "?"
    #: The backend's tests that an entry ``e`` carries model turns, or its run's start
    #: (journal.left_out.typed_sql).
    CARRIES_TURNS = SQLITE_CARRIES
    CARRIES_START = SQLITE_CARRIES_START
    read_sql: Callable[[ReadFilter], tuple[str, tuple[Any, ...]]]
    row_to_entry: Callable[[Any], JournalEntry]
    #: How long a read waits for the entries submitted before it to commit, so that it sees
    #: what the runtime already shows (a dead letter, say); past it (a journal that cannot
    #: write just now) it reads what is committed.
    READ_WAIT = 2.0
    _last_submitted: asyncio.Future[None] | None = None
    faults: FaultState

    def _submitted(self, future: asyncio.Future[None]) -> asyncio.Future[None]:
        self._last_submitted = future
        return future

    async def _caught_up(self) -> None:
        """Wait (at most READ_WAIT) for every entry submitted so far: they commit in order, so
        the last one's future settles after all the others. Degraded: no wait, what is
        committed is read at once."""
        last = self._last_submitted
        if last is not None and not last.done() and self.faults.reason is None:
            await asyncio.wait({last}, timeout=self.READ_WAIT)

    @abstractmethod
    async def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """The rows ``sql`` selects, on the backend's reading connection."""

    @abstractmethod
    async def append(self, entry: JournalEntry, *, attachment: Any = None) -> JournalEntry:
        """Append ``entry`` and return once it is durable (the backend's writer)."""

    def _q(self, sql: str) -> str:
        return sql if self.MARK == "?" else sql.replace("?", self.MARK)

    async def read(self, query: ReadFilter | str, *, since: datetime | float | None = None,
                   entry_type: str | None = None, limit: int | None = None
                   ) -> list[JournalEntry]:
        """The entries ``query`` selects (a ReadFilter, or a process name: see read_filter)."""
        query = read_filter(query, since=since, entry_type=entry_type, limit=limit)
        decode = type(self).row_to_entry
        entries = [decode(row) for row in await self._fetch(*type(self).read_sql(query))]
        # read_sql also selected the entries that carry model turns or a run's start
        return typed_entries(query.entry_type, entries, newest_first=query.newest_first,
                             limit=query.limit)

    async def runs_entries(self, process: str, run_ids: Sequence[str],
                           entry_type: str | None = None) -> list[JournalEntry]:
        """The entries of the runs ``run_ids`` of ``process`` (only ``entry_type``'s, when
        given), in seq order: one query per RUNS_PAGE runs by the run index, not one per run
        (a start rebuilds its conversation from the recent runs' starts, and resumes each run
        a crash left open from its entries)."""
        decode = type(self).row_to_entry
        found: list[JournalEntry] = []
        ids = list(dict.fromkeys(run_ids))
        typed = "" if entry_type is None else " AND " + typed_sql(
            entry_type, carries_turns=self.CARRIES_TURNS, carries_start=self.CARRIES_START)
        for at in range(0, len(ids), RUNS_PAGE):
            page = ids[at:at + RUNS_PAGE]
            runs = runs_term("e.run_id", len(page), plus=self.RUN_PLUS,
                             key_mark=self.RUN_KEY_MARK)
            rows = await self._fetch(self._q(
                f"{self.SELECT_ENTRIES} WHERE {self.BY_RUN_PROCESS} = ?{typed} "
                f"AND {runs} ORDER BY e.seq"),
                (process, *(() if entry_type is None else (entry_type,)), *runs_params(page)))
            found.extend(decode(row) for row in rows)
        found = sorted(found, key=lambda e: e.seq) if len(ids) > RUNS_PAGE else found
        return typed_entries(entry_type, found)

    async def count_types(self, process: str, *, since_seq: int = 0) -> dict[str, int]:
        rows = await self._fetch(self._q(
            "SELECT entry_type, COUNT(*) FROM entries WHERE process = ? AND seq > ? "
            "GROUP BY entry_type"), (process, since_seq))
        return {str(t): int(n) for t, n in rows}

    async def checkpoint(self, process: str, state: dict[str, Any], *, process_id: str = ""
                         ) -> JournalEntry:
        """Append a checkpoint entry holding ``state`` and return once it is durable."""
        return await self.append(JournalEntry(process, EntryType.CHECKPOINT, dict(state),
                                              process_id=process_id))

    async def last_checkpoint(self, process: str) -> CheckpointEntry | None:
        found = await self.read(ReadFilter(process=process, entry_type=EntryType.CHECKPOINT,
                                           newest_first=True, limit=1))  # by the type index
        return CheckpointEntry.of(found[0]) if found else None

    async def pending_events(self, process: str) -> list[dict[str, Any]]:
        rows = await self._fetch(self._q(
            "SELECT event FROM pending WHERE process = ? ORDER BY ord"), (process,))
        return [json.loads(row[0]) for row in rows]

    async def dead_letters(self, process: str, *, offset: int = 0, limit: int | None = None
                           ) -> list[StoredDeadLetter]:
        rows = await self._fetch(self._q(
            "SELECT event, reason, error, attempts, at FROM dead_letters WHERE process = ? "
            "ORDER BY ord LIMIT ? OFFSET ?"),
            (process, self.NO_LIMIT if limit is None else limit, offset))
        text: Callable[[Any], Any] = json.loads if self.TEXTS_AS_JSON else str
        return [StoredDeadLetter(json.loads(r[0]), text(r[1]), text(r[2]), int(r[3]),
                                 float(r[4])) for r in rows]

    async def dead_letter_count(self, process: str) -> int:
        rows = await self._fetch(self._q(
            "SELECT COUNT(*) FROM dead_letters WHERE process = ?"), (process,))
        return int(rows[0][0]) if rows else 0

    async def open_runs(self, process: str) -> list[OpenRun]:
        rows = await self._fetch(self._q(
            "SELECT run_id, event_id, attempt, state, started_seq FROM open_runs "
            "WHERE process = ? ORDER BY started_seq"), (process,))
        return [OpenRun(r[0], r[1], int(r[2]), r[3], int(r[4])) for r in rows]

    async def delivery_event(self, process: str, delivery_key: str) -> str | None:
        rows = await self._fetch(self._q(
            "SELECT event_id FROM deliveries WHERE process = ? AND delivery_key = ? "
            "AND at >= ?"), (process, delivery_key, time.time() - DELIVERY_KEEP_SECONDS))
        return str(rows[0][0]) if rows else None

    async def processes(self) -> list[str]:
        rows = await self._fetch(f"SELECT process FROM heads ORDER BY {self.PROCESS_ORDER}")
        return [row[0] for row in rows]
