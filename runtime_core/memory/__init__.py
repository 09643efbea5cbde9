"""Long-term memory: a provider per process (in_memory or sqlite with FTS5), offered to the
agent as remember / recall / forget tools and optionally injected into each run's prompt.

It lives as long as the process object, not a run: stop() keeps it open, close() closes it and
the next start() opens a new one; a rewind never rolls it back."""

from runtime_core.memory.config import MemoryConfig
from runtime_core.memory.factory import (
    default_memory_path,
    make_memory,
    memory_status,
    open_memory,
)
from runtime_core.memory.in_memory import InMemoryMemory
from runtime_core.memory.inject import MemoryInjector
from runtime_core.memory.provider import MemoryItem, MemoryProvider, MemoryUnavailable, terms
from runtime_core.memory.sqlite_store import SQLiteMemory
from runtime_core.memory.tools import MEMORY_TOOL_NAMES, memory_tools

__all__ = [
    "MEMORY_TOOL_NAMES",
    "InMemoryMemory",
    "MemoryConfig",
    "MemoryInjector",
    "MemoryItem",
    "MemoryProvider",
    "MemoryUnavailable",
    "SQLiteMemory",
    "default_memory_path",
    "make_memory",
    "memory_status",
    "memory_tools",
    "open_memory",
    "terms",
]
