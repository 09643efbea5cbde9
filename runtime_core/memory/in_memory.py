"""The in_memory provider: a list in the process object. Empty on every open, gone on close."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any

from runtime_core.memory.provider import MemoryItem, MemoryUnavailable, query_terms, rank, terms


class InMemoryMemory:
    kind = "in_memory"

    def __init__(self, process: str) -> None:
        self.process = process
        self._items: list[MemoryItem] = []
        self._open = False

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def item_count(self) -> int:
        return len(self._items)

    def _check_open(self) -> None:
        if not self._open:
            raise MemoryUnavailable(f"the long-term memory of process {self.process!r} is "
                                    "closed; start the process first")

    async def open(self) -> None:
        if not self._open:
            self._items = []  # the spec: an in_memory provider starts empty
            self._open = True

    async def add(self, text: str, metadata: dict[str, Any] | None = None) -> str:
        self._check_open()
        item = MemoryItem(uuid.uuid4().hex[:16], text, dict(metadata or {}), time.time())
        self._items.append(item)
        return item.id

    async def search(self, query: str, limit: int = 5, *, min_score: float = 0.0
                     ) -> list[MemoryItem]:
        self._check_open()
        wanted = query_terms(query)
        doc_freq = Counter(w for item in self._items for w in set(terms(item.text)))
        return rank(wanted, self._items, doc_freq, len(self._items), limit, min_score)

    async def delete(self, item_id: str) -> bool:
        self._check_open()
        before = len(self._items)
        self._items = [item for item in self._items if item.id != item_id]
        return len(self._items) != before

    async def close(self) -> None:
        self._items = []
        self._open = False
