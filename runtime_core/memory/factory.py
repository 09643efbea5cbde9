"""One place that turns a MemoryConfig into a provider, and decides where sqlite memory lives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime_core.memory.config import MemoryConfig
from runtime_core.memory.in_memory import InMemoryMemory
from runtime_core.memory.provider import MemoryProvider

DEFAULT_MEMORY_PATH = ".promptui/memory.db"


def default_memory_path(journal_path: str | Path | None) -> Path:
    """Beside the journal (``journal.db`` -> ``journal.memory.db``), else .promptui/memory.db.

    Not inside the journal's own file, on purpose: the journal has one writer task that
    group-commits and holds SQLite's single write lock for each batch, so a memory write there
    would stall (or be stalled by) journal commits; a damaged journal is moved aside whole,
    which would take the memory with it; and the journal's schema version would no longer
    describe its file. A sibling file keeps both stores independent and still together."""
    if journal_path is None:
        return Path(DEFAULT_MEMORY_PATH)
    journal = Path(journal_path)
    return journal.with_name(f"{journal.stem}.memory.db")


def make_memory(config: MemoryConfig, process_name: str,
                journal_path: str | Path | None = None) -> MemoryProvider | None:
    """A closed provider for ``process_name`` (None for ``provider: none``); open() it.
    ``journal_path``: the process's SQLite journal file, if it has one."""
    if config.provider == "in_memory":
        return InMemoryMemory(process_name)
    if config.provider == "sqlite":
        path = Path(config.path).expanduser() if config.path \
            else default_memory_path(journal_path)
        from runtime_core.memory.sqlite_store import SQLiteMemory  # aiosqlite, when named

        return SQLiteMemory(process_name, path)
    return None


async def open_memory(current: MemoryProvider | None, config: MemoryConfig, process_name: str,
                      journal_path: str | Path | None = None) -> MemoryProvider | None:
    """The provider a start() uses: ``current`` while it is open (stop() and start() keep it,
    as the spec's table says), else a new one, opened (the first start, or after close())."""
    if current is not None and current.is_open:
        return current
    provider = make_memory(config, process_name, journal_path)
    if provider is not None:
        await provider.open()
    return provider


def memory_status(config: MemoryConfig, provider: MemoryProvider | None) -> dict[str, Any]:
    """For status() and the control room: the provider, whether it is open, its item count."""
    is_open = provider is not None and provider.is_open
    return {"provider": config.provider, "open": is_open,
            "items": provider.item_count if provider is not None and is_open else None,
            "auto_inject": config.auto_inject}
