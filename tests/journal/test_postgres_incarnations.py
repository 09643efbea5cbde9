"""PostgreSQL schema 4: an entry names its process incarnation by a number (``pid``, its id's
text once in ``incarnations``), and a schema 3 database opens with its rows read as they were."""

from __future__ import annotations

import psycopg
import pytest

from runtime_core.journal import JournalEntry, PostgresJournal, ReadFilter
from runtime_core.journal.postgres.schema import MIGRATIONS, SCHEMA_VERSION, checksum

pytestmark = pytest.mark.slow


def as_schema_3(dsn: str) -> None:
    """A database as promptui left it at schema 3, holding one entry of process ``p``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        for version in (1, 2, 3):
            for statement in MIGRATIONS[version]:
                conn.execute(statement)  # type: ignore[arg-type]
        conn.execute("INSERT INTO meta VALUES ('schema_version', '3')")
        conn.execute("INSERT INTO entries (process, process_id, seq, ts, entry_type, data, crc) "
                     "VALUES ('p', 'old-incarnation', 1, 1.5, 'note', '{}', %s)",
                     (checksum("{}"),))
        conn.execute("INSERT INTO heads VALUES ('p', 1)")


async def test_a_schema_3_database_migrates_and_reads_old_and_new_rows(pg_dsn: str) -> None:
    as_schema_3(pg_dsn)
    journal = PostgresJournal(pg_dsn)
    await journal.open()
    try:
        await journal.append(JournalEntry("p", "note", {"n": 2}, process_id="new-incarnation"))
        await journal.append(JournalEntry("q", "note", {"n": 1}, process_id="new-incarnation"))
        entries = await journal.read(ReadFilter())
    finally:
        await journal.close()
    assert [(e.process, e.seq, e.process_id) for e in entries] == [
        ("p", 1, "old-incarnation"), ("p", 2, "new-incarnation"), ("q", 1, "new-incarnation")]
    with psycopg.connect(pg_dsn) as conn:
        raw = conn.execute("SELECT process, process_id, pid FROM entries ORDER BY id").fetchall()
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        names = conn.execute("SELECT process_id FROM incarnations").fetchall()
        with pytest.raises(psycopg.errors.CheckViolation):  # a row always names its process id
            conn.execute("INSERT INTO entries (process, seq, ts, entry_type, data, crc) "
                         "VALUES ('r', 1, 0, 'x', '{}', 0)")
    assert version == (str(SCHEMA_VERSION),)
    assert names == [("new-incarnation",)]  # kept once, however many rows name it
    assert raw[0] == ("p", "old-incarnation", None)
    assert [r[1] for r in raw[1:]] == [None, None] and raw[1][2] == raw[2][2] is not None
