"""The control plane's offline road to a PostgreSQL journal (a scale-out cluster's database):
what the command line reads there when it is given a DSN (``--journal postgresql://...`` or
``--cluster DSN|env``) instead of a journal file. Read-only, and safe while the nodes run (see
``journal.postgres.reader``); every message names the database without its password. The
file's road is ``offline``."""

from __future__ import annotations

from runtime_core.journal.entry import JournalEntry
from runtime_core.journal.postgres.dsn import describe_dsn, redact_dsn
from runtime_core.journal.postgres.reader import JournalUnreachable, PostgresReader
from runtime_core.journal.postgres.verify import PostgresVerifyReport, verify_postgres
from runtime_core.journal.provider import JournalError

__all__ = ["JournalEntry", "JournalError", "JournalUnreachable", "PostgresReader",
           "PostgresVerifyReport", "describe_dsn", "redact_dsn", "verify_postgres"]
