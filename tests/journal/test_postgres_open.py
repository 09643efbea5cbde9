"""Opening a PostgreSQL journal reads its schema version in one round trip
(``schema.version_at_a_glance``), and only its own schema's: a journal that another schema
on the search_path holds is neither read as this one's nor touched."""

from __future__ import annotations

import psycopg
import pytest

from runtime_core.journal import JournalEntry, PostgresJournal, ReadFilter
from runtime_core.journal.postgres.schema import SCHEMA_VERSION
from tests.helpers.postgres import PgServer

pytestmark = pytest.mark.slow


async def test_a_journal_in_another_schema_on_the_search_path_is_not_this_ones(
        pg_server: PgServer) -> None:
    public = pg_server.create_database()  # its own database: public is the tests' alone
    other = PostgresJournal(public)
    await other.open()
    await other.append(JournalEntry("p", "note", {"where": "public"}, process_id="i1"))
    await other.close()
    with psycopg.connect(public, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA s2")
    journal = PostgresJournal(public + "&options=-csearch_path%3Ds2,public")
    await journal.open()  # s2 has no meta: migrated there, public's left as it was
    try:
        await journal.append(JournalEntry("p", "note", {"where": "s2"}, process_id="i2"))
        assert [(e.seq, e.data) for e in await journal.read(ReadFilter(process="p"))] == [
            (1, {"where": "s2"})]
    finally:
        await journal.close()
    with psycopg.connect(public) as conn:
        for schema in ("public", "s2"):
            row = conn.execute(f"SELECT value FROM {schema}.meta WHERE key = "
                               "'schema_version'").fetchone()
            assert row is not None and row[0] == str(SCHEMA_VERSION)
            data = [r[0] for r in conn.execute(f"SELECT data FROM {schema}.entries")]
            assert data == [f'{{"where":"{schema}"}}']
    # and opened again, each finds its own version at a glance: nothing to migrate
    for dsn in (public, public + "&options=-csearch_path%3Ds2,public"):
        again = PostgresJournal(dsn)
        await again.open()
        assert len(await again.read(ReadFilter(process="p"))) == 1
        await again.close()
