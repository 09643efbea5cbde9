"""The long-term memory provider protocol, the item it returns, and the word rules every
provider shares (so a word found by one provider is found by the other)."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

#: A word is a run of letters and digits (no underscore, so ``snake_case`` is two words).
_WORD = re.compile(r"[^\W_]+")
#: A free-text query is cut to this many distinct words: enough for a trigger message, and it
#: keeps a huge payload from turning into a huge full-text query.
MAX_QUERY_WORDS = 64


class MemoryUnavailable(RuntimeError):
    """The provider is closed (or was never opened): start the process first."""


@dataclass(frozen=True, slots=True)
class MemoryItem:
    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0  # Unix seconds
    score: float = 0.0  # share of the query's words the item holds (0..1); 0 outside a search


@runtime_checkable
class MemoryProvider(Protocol):
    """What a process needs of long-term memory. Items belong to one process name."""

    kind: str  # "in_memory" or "sqlite", as in MemoryConfig.provider
    process: str

    @property
    def is_open(self) -> bool: ...

    @property
    def item_count(self) -> int:
        """How many items this process has stored, as last known (no I/O: for status)."""
        ...

    async def open(self) -> None:
        """Open (a no-op when already open)."""
        ...

    async def add(self, text: str, metadata: dict[str, Any] | None = None) -> str:
        """Store ``text``; returns the new item's id."""
        ...

    async def search(self, query: str, limit: int = 5, *, min_score: float = 0.0
                     ) -> list[MemoryItem]:
        """The best items for free text ``query`` (any text: it never raises for its syntax),
        best first; an item that holds none of the query's words is never returned."""
        ...

    async def delete(self, item_id: str) -> bool:
        """Remove one item; False when this process has no item with that id."""
        ...

    async def close(self) -> None: ...


def fold(text: str) -> str:
    # NFKC on both sides of casefold: full-width letters, ligatures and composed/decomposed
    # accents all end up as one spelling, and folding a folded word changes nothing.
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def terms(text: str) -> list[str]:
    """The words of ``text`` as every provider indexes and searches them (folded, in order)."""
    return _WORD.findall(fold(text))


def query_terms(query: str) -> list[str]:
    """The distinct words of a query, in order, at most MAX_QUERY_WORDS."""
    return list(dict.fromkeys(terms(query)))[:MAX_QUERY_WORDS]


def rank(wanted: list[str], items: Sequence[MemoryItem], doc_freq: Mapping[str, int],
         total: int, limit: int, min_score: float = 0.0) -> list[MemoryItem]:
    """``items`` (oldest first) that hold a ``wanted`` word, best first, each with its score.

    Both providers rank with this one rule, so they agree: the sum of the matched words'
    inverse document frequency (a word few items hold, "backup", outweighs one most hold,
    "the"), then the newest. bm25 alone is no good at agent-memory sizes: with a few dozen
    items, FTS5 clamps the weight of any word in half of them to almost nothing."""
    idf = {w: math.log(1 + total / (1 + doc_freq.get(w, 0))) for w in wanted}
    ranked: list[tuple[float, int, float, MemoryItem]] = []
    for order, item in enumerate(items):
        have = set(terms(item.text))
        matched = [w for w in wanted if w in have]
        score = len(matched) / len(wanted) if wanted else 0.0
        if score > 0 and score >= min_score:
            ranked.append((sum(idf[w] for w in matched), order, score, item))
    ranked.sort(key=lambda r: (-r[0], -r[1]))
    return [replace(item, score=score) for _, _, score, item in ranked[:max(limit, 0)]]
