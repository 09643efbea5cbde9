"""One place that turns a JournalConfig into a journal provider, and that makes one journal
serve every process configured on its file."""

from __future__ import annotations

from collections.abc import Callable

from runtime_core.journal.config import DSN_VARIABLE, JournalConfig
from runtime_core.journal.memory import InMemoryJournal
from runtime_core.journal.provider import JournalError, JournalProvider
from runtime_core.journal.sqlite.journal import SQLiteJournal
from runtime_core.journal.sqlite.schema import DamagedJournal


def make_journal(config: JournalConfig,
                 on_damage: Callable[[DamagedJournal], None] | None = None) -> JournalProvider:
    if config.backend == "memory":
        return InMemoryJournal()
    if config.backend == "postgres":
        # imported here: psycopg is loaded only by runtimes that journal to PostgreSQL
        from runtime_core.journal.postgres.journal import PostgresJournal

        dsn = config.resolved_dsn()
        if not dsn:  # the config was valid, and the environment changed since
            raise JournalError(f"the postgres journal backend needs a DSN: set journal.dsn "
                               f"or the {DSN_VARIABLE} environment variable")
        return PostgresJournal(dsn)
    return SQLiteJournal(config.path, start_fresh=config.on_damage == "start_fresh",
                         strict=config.recover_on_start == "strict", on_damage=on_damage)


def share_journal(journal: JournalProvider, config: JournalConfig) -> None:
    """``journal`` (made by make_journal) also serves a process with ``config``: the most
    careful setting of the processes on one file decides what its damage does, so a file is
    moved aside (``on_damage: start_fresh``) only if every process on it says so."""
    if isinstance(journal, SQLiteJournal):
        journal.strict = journal.strict or config.recover_on_start == "strict"
        journal.start_fresh = journal.start_fresh and config.on_damage == "start_fresh"


def preflight(journal: JournalProvider) -> None:
    """Raise the JournalError that opening ``journal`` would raise, opening nothing (a no-op
    for a journal kept in memory; for PostgreSQL only the DSN is checked, nothing connects)."""
    check = getattr(journal, "preflight", None)  # SQLite: the file; PostgreSQL: the DSN
    if callable(check):
        check()
