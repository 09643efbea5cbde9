"""The journal: an append-only record of everything a process does, in SQLite by default."""

from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.memory import MemoryJournal
from runtime_core.journal.provider import (
    JournalError,
    JournalProvider,
    OpenRun,
    ReadFilter,
    StoredDeadLetter,
)
from runtime_core.journal.sqlite import DamagedJournal, SQLiteJournal

__all__ = [
    "DamagedJournal",
    "EntryType",
    "JournalEntry",
    "JournalError",
    "JournalProvider",
    "MemoryJournal",
    "OpenRun",
    "ReadFilter",
    "SQLiteJournal",
    "StoredDeadLetter",
]
