"""``FileJournal``: the spec's name for the durable on-disk journal, for code written against the
reference runtime (``FileJournal(base_path=".promptise/journal")``, used without ``open()``).

Here the file is our SQLite journal, ``journal.db`` inside ``base_path`` (or ``base_path`` itself
when it names a ``.db`` file), with all of SQLiteJournal's guarantees; it opens itself on first
use. To read a reference JSONL journal directory, import it into one of these instead."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

from runtime_core.journal.entry import CheckpointEntry, JournalEntry
from runtime_core.journal.provider import OpenRun, ReadFilter, StoredDeadLetter
from runtime_core.journal.sqlite.journal import SQLiteJournal

FILE_NAME = "journal.db"


class FileJournal(SQLiteJournal):
    """The spec's name for the durable on-disk journal, for code written against the
    reference runtime: ``FileJournal(base_path=".promptise/journal")`` is a SQLiteJournal on
    ``journal.db`` inside ``base_path`` (or ``base_path`` itself when it names a ``.db``
    file), with all its guarantees, that opens itself on first use."""

    def __init__(self, base_path: str | Path = ".promptui/journal", **options: Any) -> None:
        base = Path(base_path)
        super().__init__(base if base.suffix == ".db" else base / FILE_NAME, **options)
        self._opening = asyncio.Lock()

    async def _ready(self) -> None:
        if self.is_open:
            return
        async with self._opening:  # two first calls at once open the file once
            if not self.is_open:
                await self.open()

    async def append(self, entry: JournalEntry, *, attachment: Any = None) -> JournalEntry:
        await self._ready()
        return await super().append(entry, attachment=attachment)

    async def flush(self) -> None:
        await self._ready()
        await super().flush()

    async def read(self, query: ReadFilter | str, *, since: datetime | float | None = None,
                   entry_type: str | None = None, limit: int | None = None
                   ) -> list[JournalEntry]:
        """The entries ``query`` selects (a ReadFilter, or a process name: see read_filter)."""
        await self._ready()
        return await super().read(query, since=since, entry_type=entry_type, limit=limit)

    async def count_types(self, process: str, *, since_seq: int = 0) -> dict[str, int]:
        await self._ready()
        return await super().count_types(process, since_seq=since_seq)

    async def checkpoint(self, process: str, state: dict[str, Any], *, process_id: str = ""
                         ) -> JournalEntry:
        await self._ready()
        return await super().checkpoint(process, state, process_id=process_id)

    async def last_checkpoint(self, process: str) -> CheckpointEntry | None:
        await self._ready()
        return await super().last_checkpoint(process)

    async def pending_events(self, process: str) -> list[dict[str, Any]]:
        await self._ready()
        return await super().pending_events(process)

    async def dead_letters(self, process: str, *, offset: int = 0, limit: int | None = None
                           ) -> list[StoredDeadLetter]:
        await self._ready()
        return await super().dead_letters(process, offset=offset, limit=limit)

    async def dead_letter_count(self, process: str) -> int:
        await self._ready()
        return await super().dead_letter_count(process)

    async def open_runs(self, process: str) -> list[OpenRun]:
        await self._ready()
        return await super().open_runs(process)

    async def delivery_event(self, process: str, delivery_key: str) -> str | None:
        await self._ready()
        return await super().delivery_event(process, delivery_key)

    async def processes(self) -> list[str]:
        await self._ready()
        return await super().processes()
