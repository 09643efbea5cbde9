"""Read-only access to a PostgreSQL journal, for the command line (``promptui logs``,
``journal export`` and ``journal verify`` on ``--journal postgresql://...`` or ``--cluster``).

It never writes: one connection whose every transaction is READ ONLY (the server refuses a
write in one) and short (a read, then COMMIT: no snapshot is held between two polls of
``logs --follow``); it never migrates, creates a table, takes a lease or an advisory lock. So
it reads a cluster's journal while the nodes run: PostgreSQL's readers and writers do not wait
for each other.

Every message names the database as ``describe_dsn`` shows it (``user@host:port/dbname``) and
says what to do; psycopg's own text goes through the DSN's ``Scrubber`` first, so no message
shows the password. A database that cannot be reached is ``JournalUnreachable`` (a follower
waits it out); anything else is a JournalError.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from runtime_core.journal.entry import JournalEntry
from runtime_core.journal.left_out import typed_entries
from runtime_core.journal.postgres.dsn import Scrubber, describe_dsn
from runtime_core.journal.postgres.schema import (
    SCHEMA_VERSION,
    read_sql,
    row_to_entry,
)
from runtime_core.journal.provider import JournalError, ReadFilter, StoredDeadLetter

__all__ = ["JOURNAL_TABLES", "JournalUnreachable", "PostgresReader", "connect_problem"]

#: the tables a journal has (schema.MIGRATIONS); reading needs every one of them
JOURNAL_TABLES = ("entries", "heads", "pending", "dead_letters", "open_runs", "deliveries")
CONNECT_TIMEOUT = 5.0  # seconds: an unreachable server is said quickly
STATEMENT_TIMEOUT = 60.0  # seconds: a read never hangs a command (verify streams in pages)
APPLICATION_NAME = "promptui-journal-reader"  # how it shows in pg_stat_activity
Conn = psycopg.Connection[Any]


class JournalUnreachable(JournalError):
    """The database cannot be reached now (down, refused, timed out, the connection lost): a
    passing fault, unlike a wrong password or a missing journal."""


def connect_problem(where: str, text: str) -> tuple[str, bool]:
    """What a failed connection to ``where`` means and what to do, from libpq's (scrubbed)
    ``text``; and whether it is passing (the server down or out of reach)."""
    low = text.lower()
    if "password authentication failed" in low or "no password supplied" in low \
            or "authentication failed" in low:
        return (f"PostgreSQL at {where} refused the login ({text}): check the user and the "
                "password (in the DSN, PROMPTUI_DSN, PGPASSWORD or ~/.pgpass)"), False
    if "database" in low and "does not exist" in low:
        return (f"PostgreSQL at {where} has no such database ({text}): check the database "
                "name in the DSN (the one 'promptui serve --cluster' was given)"), False
    if "role" in low and "does not exist" in low:
        return (f"PostgreSQL at {where} has no such user ({text}): check the user in the "
                "DSN"), False
    if "pg_hba.conf" in low or "permission denied" in low:
        return (f"PostgreSQL at {where} does not let this user in ({text}): ask its "
                "administrator for access (pg_hba.conf, CONNECT privilege)"), False
    return (f"cannot reach PostgreSQL at {where} ({text}): check that the server runs and "
            "that the DSN's host and port name it"), True


class PostgresReader:
    """A PostgreSQL journal, read-only: its processes, entries and dead letters. ``open``
    checks that the database holds a journal (its tables, a schema this promptui knows);
    a connection lost later is opened again by the next read. Use it as a context manager,
    or call ``close``."""

    def __init__(self, dsn: str, *, connect_timeout: float = CONNECT_TIMEOUT,
                 statement_timeout: float = STATEMENT_TIMEOUT) -> None:
        self._dsn = dsn
        self._scrub = Scrubber(dsn)
        self.where = describe_dsn(dsn)  # where, as every message says it
        self.connect_timeout = connect_timeout
        self.statement_timeout = statement_timeout
        self.schema = ""  # the schema holding the journal (current_schema), once open
        self._conn: Conn | None = None

    def __enter__(self) -> PostgresReader:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connecting ----------------------------------------------------------------------------
    def open(self) -> None:
        """Connect and check the journal's tables; a no-op while connected. A JournalError
        (JournalUnreachable for a server out of reach) naming the database, never the
        password."""
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return
        self._conn = None
        error: JournalError | None = None
        try:
            conninfo_to_dict(self._dsn)
        except psycopg.Error as exc:  # libpq quotes the piece it could not parse: scrubbed
            error = JournalError(
                f"the DSN for {self.where} cannot be read ({self._text(exc)}): write it as "
                "postgresql://USER@HOST:PORT/DBNAME (the password from PGPASSWORD or "
                "~/.pgpass keeps it off the command line)")
        if error is None:
            try:
                conn = psycopg.connect(self._dsn, connect_timeout=max(
                    1, round(self.connect_timeout)), application_name=APPLICATION_NAME)
            except psycopg.Error as exc:
                message, passing = connect_problem(self.where, self._text(exc))
                error = (JournalUnreachable if passing else JournalError)(message)
        if error is not None:
            raise error  # outside the except block: psycopg's exception (it keeps the
            # password in its connection object) is neither its cause nor its context
        conn.read_only = True  # every transaction it begins is READ ONLY
        self._conn = conn
        try:
            with self.transaction() as opened:  # and the session's default, should one slip
                opened.execute(
                    "SELECT set_config('default_transaction_read_only', 'on', false), "
                    "set_config('statement_timeout', %s, false)",
                    (f"{max(1, round(self.statement_timeout * 1000))}ms",))
            self._check_tables()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            conn.close()

    def _text(self, exc: BaseException) -> str:
        """psycopg's message, on one line, without the DSN's password."""
        text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
        return self._scrub(text or type(exc).__name__)

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        """A READ ONLY transaction on the open connection (opened again if it was lost);
        psycopg's errors become JournalErrors that say where and what to do."""
        self.open()
        conn = self._conn
        assert conn is not None
        error: JournalError | None = None
        try:
            with conn.transaction():
                yield conn
        except psycopg.errors.InsufficientPrivilege as exc:
            error = JournalError(
                f"the user of {self.where} may not read the journal ({self._text(exc)}): "
                f"grant it SELECT on the journal's tables (GRANT SELECT ON ALL TABLES IN "
                f"SCHEMA {self.schema or 'public'} TO that user)")
        except psycopg.OperationalError as exc:
            self.close()  # lost: the next read connects again
            error = JournalUnreachable(
                f"lost PostgreSQL at {self.where} ({self._text(exc)}): check that the "
                "server runs, then try again")
        except psycopg.Error as exc:
            error = JournalError(f"cannot read the journal at {self.where} "
                                 f"({self._text(exc)})")
        if error is not None:
            raise error

    def _check_tables(self) -> None:
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT current_schema(), COALESCE(array_agg(tablename::text), '{}') "
                "FROM pg_catalog.pg_tables WHERE schemaname = current_schema() "
                "AND tablename = ANY(%s)", (["meta", *JOURNAL_TABLES],)).fetchone()
            schema, found = (row[0], set(row[1])) if row is not None else (None, set())
            version = None
            if "meta" in found:
                got = conn.execute(
                    "SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                version = str(got[0]) if got is not None else None
        if schema is None:
            raise JournalError(
                f"{self.where} has no schema on its search_path: check the DSN's "
                "options (search_path) against the schema 'promptui serve --cluster' uses")
        self.schema = str(schema)
        missing = [t for t in JOURNAL_TABLES if t not in found]
        if len(missing) == len(JOURNAL_TABLES):
            raise JournalError(
                f"{self.where} holds no promptui journal (no journal tables in schema "
                f"{self.schema!r}): check that the DSN names the cluster's database (and "
                "schema); a node of 'promptui serve --cluster' makes the tables as it starts")
        if missing:
            raise JournalError(
                f"the journal at {self.where} is incomplete: schema {self.schema!r} has no "
                f"{', '.join(missing)} table; start a node of 'promptui serve --cluster' on "
                "it (it finishes the schema), then read it again")
        if version is not None and version.isdigit() and int(version) > SCHEMA_VERSION:
            raise JournalError(
                f"the journal at {self.where} was written by a newer promptui (schema "
                f"{version}, this one knows {SCHEMA_VERSION}); upgrade promptui to read it")

    # -- reading -------------------------------------------------------------------------------
    def process_names(self) -> list[str]:
        """Every process the journal has entries for, in code point order."""
        with self.transaction() as conn:
            rows = conn.execute('SELECT process FROM heads ORDER BY process COLLATE "C"')
            return [str(row[0]) for row in rows.fetchall()]

    def check_process(self, process: str) -> None:
        """JournalError unless the journal has entries for ``process``."""
        names = self.process_names()
        if process not in names:
            raise JournalError(
                f"the journal at {self.where} has no entries for process {process!r} "
                f"(processes: {', '.join(names) or 'none yet'}); check the name")

    def read_entries(self, process: str, *, entry_type: str | None = None, since_seq: int = 0,
                     limit: int | None = None, newest_first: bool = False
                     ) -> list[JournalEntry]:
        """``process``'s entries after ``since_seq``, in seq order (newest first if asked),
        each checked against its checksum."""
        sql, params = read_sql(ReadFilter(process=process, entry_type=entry_type,
                                          since_seq=since_seq, limit=limit,
                                          newest_first=newest_first))
        with self.transaction() as conn:
            rows = conn.execute(sql, params).fetchall()
        entries = [row_to_entry(row) for row in rows]
        # read_sql also selected the entries that carry model turns or a run's start
        return typed_entries(entry_type, entries, newest_first=newest_first, limit=limit)

    def dead_letters(self, process: str) -> list[StoredDeadLetter]:
        """The dead letters the journal keeps for ``process``, oldest first."""
        with self.transaction() as conn:
            rows = conn.execute("SELECT event, reason, error, attempts, at FROM dead_letters "
                                "WHERE process = %s ORDER BY ord", (process,)).fetchall()
        return [StoredDeadLetter(json.loads(r[0]), json.loads(r[1]), json.loads(r[2]),
                                 int(r[3]), float(r[4])) for r in rows]
