"""The PostgreSQL journal's schema: tables, numbered migrations, entry checksums, and the read
SQL (a ReadFilter as a SELECT, rows back into entries).

The tables mirror the SQLite journal's (one conformance suite runs on both). ``entries`` has
UNIQUE (process, seq): several nodes may write one journal, and a seq taken twice must fail
the second commit instead of overwriting the first. JSON is kept as ``text``, exactly what
``to_json`` produced: jsonb would reorder keys, and PostgreSQL cannot hold ``\\u0000`` in jsonb.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import psycopg

from runtime_core.journal.entry import TYPE_INDEXED, TYPES_INDEXED, JournalEntry
from runtime_core.journal.left_out import CARRIES_START, CARRIES_TURNS, typed_sql
from runtime_core.journal.provider import JournalError, ReadFilter
from runtime_core.journal.run_key import key_expression, runs_params, runs_term

SCHEMA_VERSION = 8
#: pg_advisory_xact_lock key held while migrating: two nodes opening a fresh database at once
#: migrate one after the other (the second finds the work done). "promptui" as 8 bytes.
MIGRATION_LOCK = int.from_bytes(b"promptui", "big") & 0x7FFF_FFFF_FFFF_FFFF

#: PostgreSQL's test that an entry carries model turns (``left_out.usage_type_sql``).
CARRIES_TURNS_SQL = (f"strpos(e.data, '{CARRIES_TURNS}') > 0 AND ("
                     "json_typeof(e.data::json -> 'usage') = 'array' OR "
                     "json_typeof(e.data::json -> 'started' -> 'usage') = 'array')")

#: PostgreSQL's test that an entry ``e`` (a tool intent) carries its run's start.
CARRIES_START_SQL = (f"strpos(e.data, '{CARRIES_START}') > 0 AND "
                     "json_typeof(e.data::json -> 'started') = 'object'")

MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE entries (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            process TEXT NOT NULL,
            process_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            ts DOUBLE PRECISION NOT NULL,
            entry_type TEXT NOT NULL,
            run_id TEXT,
            data TEXT NOT NULL,
            crc BIGINT NOT NULL,
            CONSTRAINT entries_process_seq UNIQUE (process, seq)
        )""",
        "CREATE INDEX entries_by_type ON entries (process, entry_type, seq)",
        "CREATE INDEX entries_by_run ON entries (run_id) WHERE run_id IS NOT NULL",
        "CREATE TABLE heads (process TEXT PRIMARY KEY, last_seq BIGINT NOT NULL)",
        """CREATE TABLE pending (
            process TEXT NOT NULL, event_id TEXT NOT NULL, ord BIGINT NOT NULL,
            event TEXT NOT NULL, PRIMARY KEY (process, event_id))""",
        "CREATE INDEX pending_order ON pending (process, ord)",
        # reason and error are JSON strings: free text from an exception may hold a NUL
        """CREATE TABLE dead_letters (
            process TEXT NOT NULL, event_id TEXT NOT NULL, ord BIGINT NOT NULL,
            event TEXT NOT NULL, reason TEXT NOT NULL, error TEXT NOT NULL,
            attempts BIGINT NOT NULL, at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (process, event_id))""",
        "CREATE INDEX dead_order ON dead_letters (process, ord)",
        """CREATE TABLE open_runs (
            process TEXT NOT NULL, run_id TEXT NOT NULL, event_id TEXT NOT NULL,
            attempt BIGINT NOT NULL, state TEXT NOT NULL, started_seq BIGINT NOT NULL,
            PRIMARY KEY (process, run_id))""",
        """CREATE TABLE deliveries (
            process TEXT NOT NULL, delivery_key TEXT NOT NULL, event_id TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL, PRIMARY KEY (process, delivery_key))""",
        "CREATE INDEX deliveries_by_age ON deliveries (process, at)",
    ],
    # the fencing epoch a scale-out node wrote the entry under (NULL: an unfenced journal)
    2: ["ALTER TABLE entries ADD COLUMN IF NOT EXISTS epoch BIGINT NULL"],
    # 3: the SQLite journal's schemas 3 and 5 here. The entry type index keeps only the rare
    # types a start, a rewind or a status looks up the last of (it was a row per entry, a
    # sixth of a run's bytes); a query for one says the index's term too (``read_sql``).
    # And a run's entries leave out what a reader rebuilds (see the SQLite schema 5).
    3: ["DROP INDEX IF EXISTS entries_by_type",
        "CREATE INDEX entries_by_type ON entries (process, entry_type, seq) WHERE "
        + TYPE_INDEXED],
    # 4: the SQLite journal's schema 6: a run's entries leave out more of what a reader
    # rebuilds exactly (journal.left_out). And an entry names its process incarnation by a
    # number, as SQLite's do (the id's text was a tenth of a run's bytes): new rows keep
    # ``pid`` and leave ``process_id`` NULL, older rows keep their text; a reader takes
    # whichever the row has (``SELECT_ENTRIES``). The check holds every row to one of them.
    # The queue loses its order index, as SQLite's did at its schema 3: it holds only what is
    # queued, read in order by a sort; each event's index row was a page touched twice.
    4: [
        "DROP INDEX IF EXISTS pending_order",
        """CREATE TABLE IF NOT EXISTS incarnations (
            pid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            process_id TEXT NOT NULL UNIQUE)""",
        "ALTER TABLE entries ADD COLUMN IF NOT EXISTS pid BIGINT NULL",
        "ALTER TABLE entries ALTER COLUMN process_id DROP NOT NULL",
        "ALTER TABLE entries ADD CONSTRAINT entries_incarnation "
        "CHECK (process_id IS NOT NULL OR pid IS NOT NULL) NOT VALID",
    ],
    # 5: the SQLite journal's schema 7: a run's model turns ride in its next tool intent or its
    # end (journal.left_out.turns_of), a first attempt is left out of its run_started. No table
    # changes; an older promptui, which would not see those turns, refuses the database.
    5: [],
    # 6: the SQLite journal's schema 8: the run index holds a run id's first characters
    # (journal.run_key), a run end leaves out an event_done its state says; an older
    # promptui, which would keep such a run's event queued, refuses the database.
    6: ["DROP INDEX IF EXISTS entries_by_run",
        f"CREATE INDEX entries_by_run ON entries ({key_expression('run_id')}) "
        "WHERE run_id IS NOT NULL"],
    # 7: the entries lose the index of their ``id``, an eighth of a run's bytes (123 of 1,880
    # a run in bench/durable_runs.py): every read but a read of all processes at once goes by
    # process and seq (UNIQUE (process, seq), which is what a scale-out node relies on), and
    # that rare read sorts by ``id``, which stays, in the order the one writer assigned it.
    # The (process, seq) index's pages are filled whole when it grows at its end (the default
    # leaves a tenth of each free for inserts in the middle, which a seq never makes).
    7: ["ALTER TABLE entries DROP CONSTRAINT IF EXISTS entries_pkey",
        "ALTER INDEX entries_process_seq SET (fillfactor = 100)"],
    # 8: the SQLite journal's schema 9: a run's start rides in its first tool intent
    # (journal.left_out.STARTED). No table changes; an older promptui refuses the database.
    8: [],
}


async def schema_version(conn: psycopg.AsyncConnection[Any]) -> int:
    """The version recorded in ``meta`` (0 before the first migration)."""
    # A catalog query, not to_regclass(): it reads with this statement's snapshot, so after
    # the migration lock it sees what another node just committed, where the backend's
    # catalog cache (advisory locks do not refresh it) may still say "no such table".
    found = await (await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables "
        "WHERE schemaname = current_schema() AND tablename = 'meta')")).fetchone()
    if not found or not found[0]:
        return 0
    return _version(await (await conn.execute(_VERSION_SQL)).fetchone())


_VERSION_SQL = "SELECT value FROM meta WHERE key = 'schema_version'"


def _version(row: Any) -> int:
    if row is None:
        return 0
    if not str(row[0]).isdigit():
        raise JournalError(f"its schema version {row[0]!r} is not a number")
    return int(row[0])


#: The version, read directly from the ``meta`` of the current schema (another schema's on the
#: search_path does not count: no row then, as when there is no ``meta`` yet).
_VERSION_HERE_SQL = (
    "SELECT m.value FROM meta m WHERE m.key = 'schema_version' AND m.tableoid IN ("
    "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
    "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relname = 'meta')")


async def version_at_a_glance(conn: psycopg.AsyncConnection[Any]) -> int:
    """The version recorded in ``meta`` (0 when there is none yet) in one round trip, where
    ``schema_version`` takes two and the pg_tables view (a start on a fresh connection paid
    2.8 ms for both, this 1.9). Outside the migration lock only (autocommit: a statement of
    its own, whose transaction start takes in what other nodes committed); under the lock,
    ``schema_version`` looks again."""
    try:
        cur = await conn.execute(_VERSION_HERE_SQL)
    except psycopg.errors.UndefinedTable:
        return 0
    return _version(await cur.fetchone())


async def migrate(conn: psycopg.AsyncConnection[Any], where: str) -> None:
    """Bring the schema up to SCHEMA_VERSION: one transaction per migration, each under the
    migration lock, re-reading the version once the lock is held (another node may have just
    applied it). ``conn`` is in autocommit mode. A newer schema is refused, never touched."""
    version = await version_at_a_glance(conn)
    for target in sorted(MIGRATIONS):
        if target <= version:
            continue
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            version = await schema_version(conn)
            if target <= version:
                continue
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            for statement in MIGRATIONS[target]:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(target),))
            version = target
    if version > SCHEMA_VERSION:
        raise JournalError(
            f"journal {where} was written by a newer promptui (schema {version}, this one "
            f"knows {SCHEMA_VERSION}); upgrade promptui to use it")


def checksum(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


#: An entry's process id: its own text (schema 3 and older) or its incarnation's (schema 4 on).
PROCESS_ID = "COALESCE(e.process_id, i.process_id)"
#: The entries with their incarnations (``e`` and ``i``), for a SELECT's FROM.
ENTRIES_FROM = "entries e LEFT JOIN incarnations i ON i.pid = e.pid"
SELECT_ENTRIES = (f"SELECT e.process, {PROCESS_ID}, e.seq, e.ts, e.entry_type, e.run_id, "
                  f"e.data, e.crc FROM {ENTRIES_FROM}")


def row_to_entry(row: Any) -> JournalEntry:
    process, process_id, seq, ts, entry_type, run_id, data, crc = row
    if checksum(data) != crc:
        raise JournalError(
            f"journal entry {process}:{seq} is corrupt: its checksum does not match "
            "(the row was changed outside promptui)")
    return JournalEntry(process=process, entry_type=entry_type, data=json.loads(data),
                        process_id=process_id, run_id=run_id, timestamp=float(ts),
                        seq=int(seq))


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def read_sql(query: ReadFilter) -> tuple[str, tuple[Any, ...]]:
    """The SELECT (and its parameters) for the entries ``query`` asks for, in its order."""
    where: list[str] = []
    params: list[Any] = []
    if query.entry_type in TYPES_INDEXED:  # the planner then sees the partial index covers it
        where.append("e." + TYPE_INDEXED)
    for value, clause in ((query.process, "e.process = %s"),
                          (query.entry_type, typed_sql(  # with the entries carrying such
                              query.entry_type or "", mark="%s", carries_turns=CARRIES_TURNS_SQL,
                              carries_start=CARRIES_START_SQL)),
                          (query.since_seq, "e.seq > %s"),
                          (query.since_time, "e.ts >= %s"),
                          (query.until_seq, "e.seq < %s"),
                          (query.until_time, "e.ts <= %s")):
        if value is not None:
            where.append(clause)
            params.append(value)
    if query.run_id is not None:
        where.append(runs_term("e.run_id", mark="%s", plus="", key_mark="%s::text"))
        params.extend(runs_params([query.run_id]))
    if query.contains:
        # ILIKE: case-insensitive like SQLite's LIKE; the data is the JSON text as stored
        where.append("(e.data ILIKE %s ESCAPE '\\' OR e.entry_type ILIKE %s ESCAPE '\\')")
        params.extend([_like(query.contains)] * 2)
    sql = SELECT_ENTRIES
    if where:
        sql += " WHERE " + " AND ".join(where)
    # one process: its seq order; all: commit order (id, assigned by the one writer in order)
    order = "e.seq" if query.process is not None else "e.id"
    sql += f" ORDER BY {order} {'DESC' if query.newest_first else 'ASC'}"
    if query.limit is not None:
        sql += " LIMIT %s"
        params.append(max(0, int(query.limit)))
    return sql, tuple(params)


#: the last state each process journaled (its latest state_transition), for a scale-out node
#: that lists processes another node runs
LAST_STATES_SQL = ("SELECT DISTINCT ON (process) process, data FROM entries "
                   "WHERE process = ANY(%s) AND entry_type = 'state_transition' "
                   "ORDER BY process, seq DESC")


async def last_states(conn: psycopg.AsyncConnection[Any], processes: list[str]
                      ) -> dict[str, str]:
    """process -> the state its last transition entered (processes that never journaled one,
    or a journal not made yet, are left out)."""
    if not processes:
        return {}
    try:
        cur = await conn.execute(LAST_STATES_SQL, (processes,))
    except psycopg.errors.UndefinedTable:
        return {}
    found = {}
    for process, data in await cur.fetchall():
        state = json.loads(data).get("to_state")
        if isinstance(state, str):
            found[str(process)] = state
    return found
