"""One place that turns a JournalConfig into a journal provider."""

from __future__ import annotations

from collections.abc import Callable

from runtime_core.journal.config import JournalConfig
from runtime_core.journal.memory import InMemoryJournal
from runtime_core.journal.provider import JournalProvider
from runtime_core.journal.sqlite import DamagedJournal, SQLiteJournal


def make_journal(config: JournalConfig,
                 on_damage: Callable[[DamagedJournal], None] | None = None) -> JournalProvider:
    if config.backend == "memory":
        return InMemoryJournal()
    return SQLiteJournal(config.path, strict=config.recover_on_start == "strict",
                         on_damage=on_damage)
