"""What the PostgreSQL journal guarantees beyond the conformance suite (which it also passes):
durable on return, seq continued from the database, a seq taken twice refused loudly, a server
crash under load survived with every acknowledged entry kept exactly once, text PostgreSQL
cannot hold, the schema's migrations, the wiring from a config, and a DSN password never shown.

Each test gets a fresh schema on the worker's throwaway PostgreSQL (``pg_dsn``, see
tests/helpers/postgres.py); the ones that stop the server start it again before they end.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from pydantic import ValidationError

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.journal import (
    EntryType,
    JournalConfig,
    JournalEntry,
    JournalError,
    PostgresJournal,
    ReadFilter,
)
from runtime_core.journal.factory import make_journal, preflight
from runtime_core.journal.postgres import writer as postgres_writer
from runtime_core.journal.postgres.schema import SCHEMA_VERSION
from tests.helpers.polling import wait_for
from tests.helpers.postgres import PgServer

pytestmark = pytest.mark.slow

SECRET = "S3cret-pw-4711"


def E(process: str, entry_type: str = "note", data: dict[str, Any] | None = None,
      **kw: Any) -> JournalEntry:
    return JournalEntry(process=process, entry_type=entry_type, data=data or {}, **kw)


def rows(dsn: str, sql: str = "SELECT process, seq, entry_type FROM entries ORDER BY id",
         params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """What a brand-new connection sees."""
    with psycopg.connect(dsn) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]  # type: ignore[arg-type]


async def fresh_rows(dsn: str, sql: str = "SELECT process, seq, entry_type FROM entries "
                     "ORDER BY id") -> list[tuple[Any, ...]]:
    return await asyncio.to_thread(rows, dsn, sql)


@pytest.fixture
async def journal(pg_dsn: str) -> AsyncIterator[PostgresJournal]:
    j = PostgresJournal(pg_dsn)
    await j.open()
    try:
        yield j
    finally:
        await j.close()


def whole_story(exc: BaseException) -> str:
    """Everything an exception could show: its text, repr and traceback, causes included."""
    seen, parts = set(), []
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts += [str(current), repr(current)]
        current = current.__cause__ or current.__context__
    parts.append("".join(traceback.format_exception(exc)))
    return "\n".join(parts)


# -- the throwaway server -------------------------------------------------------------------------
def test_the_test_server_is_unix_socket_only_and_fsyncs(pg_server: PgServer, pg_dsn: str) -> None:
    settings = dict(rows(pg_dsn, "SELECT name, setting FROM pg_settings WHERE name IN "
                                 "('listen_addresses', 'fsync', 'synchronous_commit')"))
    assert settings == {"listen_addresses": "", "fsync": "on", "synchronous_commit": "on"}
    assert str(pg_server.socket_dir) in pg_dsn and pg_server.running
    assert rows(pg_dsn, "SELECT current_schema()") != [("public",)]  # a schema of its own


# -- durability and seqs -------------------------------------------------------------------------
async def test_an_append_is_committed_when_it_returns(journal: PostgresJournal,
                                                      pg_dsn: str) -> None:
    expected = []
    for i, process in enumerate(["a", "b", "a"]):
        entry = await journal.append(E(process, f"t{i}", {"i": i}))
        expected.append((process, entry.seq, f"t{i}"))
        assert await fresh_rows(pg_dsn) == expected  # another connection sees it at once
    assert await fresh_rows(pg_dsn, "SELECT process, last_seq FROM heads ORDER BY process") \
        == [("a", 2), ("b", 1)]


async def test_a_reopened_journal_keeps_everything_and_continues_the_seqs(pg_dsn: str) -> None:
    first = PostgresJournal(pg_dsn)
    await first.open()
    event = {"event_id": "e1", "payload": {"n": 1}}
    await first.append(E("p", EntryType.EVENT_ACCEPTED, {"event_id": "e1"}), attachment=event)
    await first.append(E("p", EntryType.RUN_STARTED, {"event_id": "e1"}, run_id="r1"))
    await first.append(E("p", EntryType.CHECKPOINT, {"state": "mid"}))
    await first.append(E("q", "note"))
    futures = [first.submit(E("p", "note", {"i": i})) for i in range(20)]
    await first.close()  # drains what was queued
    assert all(f.done() and f.exception() is None for f in futures)

    again = PostgresJournal(pg_dsn)  # a new object: the heads come from the database
    await again.open()
    try:
        assert await again.pending_events("p") == [event]
        assert [r.run_id for r in await again.open_runs("p")] == ["r1"]
        checkpoint = await again.last_checkpoint("p")
        assert checkpoint is not None and checkpoint.data == {"state": "mid"}
        assert (await again.append(E("p"))).seq == 24
        assert (await again.append(E("q"))).seq == 2
        assert (await again.append(E("new"))).seq == 1
        await again.close()
        await again.open()  # the same object reopens too
        assert (await again.append(E("p"))).seq == 25
    finally:
        await again.close()


async def test_two_writers_on_one_process_fail_loudly_and_overwrite_nothing(
        pg_dsn: str) -> None:
    a, b = PostgresJournal(pg_dsn), PostgresJournal(pg_dsn)
    await a.open()
    await b.open()  # both read the heads now: both will take p:1
    try:
        await a.append(E("p", "note", {"by": "a"}))
        with pytest.raises(JournalError, match=r"entry p:1 is already in the journal"):
            await b.append(E("p", "note", {"by": "b"}))
        with pytest.raises(JournalError, match="failed earlier"):  # b stops writing
            b.submit(E("q"))
        assert await fresh_rows(pg_dsn, "SELECT process, seq, data FROM entries") == [
            ("p", 1, '{"by":"a"}')]
        assert (await a.append(E("p"))).seq == 2  # the first writer goes on
        with psycopg.connect(pg_dsn) as conn, pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO entries (process, process_id, seq, ts, entry_type, data, "
                         "crc) VALUES ('p', '', 2, 0, 'x', '{}', 0)")
    finally:
        await a.close()
        await b.close()
    b = PostgresJournal(pg_dsn)
    await b.open()
    try:
        assert (await b.append(E("p"))).seq == 3  # reopened: it reads where p is now
    finally:
        await b.close()


async def test_a_commit_whose_answer_was_lost_is_not_written_twice(
        journal: PostgresJournal, pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The connection drops after COMMIT reached the server: the retry finds the batch there
    and acknowledges it, instead of writing it again or failing on its own seqs."""
    real = postgres_writer.write_batch
    calls = 0

    async def commit_then_lose_the_answer(conn: Any, batch: Any) -> None:
        nonlocal calls
        calls += 1
        await real(conn, batch)
        if calls == 1:
            raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(postgres_writer, "write_batch", commit_then_lose_the_answer)
    await journal.append(E("p", "note", {"n": 1}))
    assert journal.fault is None  # healed by the retry that found it written
    assert calls == 1  # found, not written again
    await journal.append(E("p", "note", {"n": 2}))
    assert await fresh_rows(pg_dsn) == [("p", 1, "note"), ("p", 2, "note")]


async def test_an_event_and_its_delivery_commit_in_one_transaction(
        journal: PostgresJournal, pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime_core.journal.postgres import commit as postgres_commit

    def fail(point: str) -> None:
        if point == "group_commit":
            raise RuntimeError("power cut before COMMIT")

    monkeypatch.setattr(postgres_commit.crashpoints, "reached", fail)
    event = {"event_id": "e1", "payload": {}, "metadata": {"delivery_key": "k1"}}
    with pytest.raises(JournalError):
        await journal.append(E("p", EntryType.EVENT_ACCEPTED, {"event_id": "e1"}),
                             attachment=event)
    for table in ("entries", "deliveries", "pending", "heads"):
        assert await fresh_rows(pg_dsn, f"SELECT COUNT(*) FROM {table}") == [(0,)]


# -- a server crash under load ---------------------------------------------------------------------
async def test_an_immediate_stop_under_load_degrades_then_heals_and_loses_nothing(
        pg_server: PgServer, pg_dsn: str) -> None:
    journal = PostgresJournal(pg_dsn, read_timeout=5)
    await journal.open()
    acked: list[tuple[str, int, int, int]] = []  # (process, seq, producer, n)
    refused: list[BaseException] = []
    stop = asyncio.Event()
    faults: list[str | None] = []
    journal.faults.listen(faults.append)

    async def produce(i: int) -> None:
        n = 0
        while not stop.is_set():
            entry = E(f"p{i % 3}", "note", {"producer": i, "n": n})
            try:
                await journal.append(entry)
            except JournalError as exc:
                refused.append(exc)
                return
            acked.append((entry.process, entry.seq, i, n))
            n += 1

    producers = [asyncio.create_task(produce(i)) for i in range(8)]
    try:
        await wait_for(lambda: len(acked) >= 300, 30, "appends before the crash")
        await asyncio.to_thread(pg_server.stop, "immediate")
        await wait_for(lambda: journal.fault is not None, 30, "the journal to say degraded")
        assert "PostgreSQL" in (journal.fault or "")
        committed = journal.committed
        with pytest.raises(JournalError, match="read failed"):  # reads say so too
            await journal.read(ReadFilter(limit=1))
        assert journal.committed == committed  # nothing is acknowledged while it is down
        await asyncio.to_thread(pg_server.start)
        await wait_for(lambda: journal.fault is None, 30, "the journal to heal by itself")
        before = len(acked)
        await wait_for(lambda: len(acked) >= before + 300, 30, "appends after the restart")
    finally:
        stop.set()
        await asyncio.gather(*producers)
        if not pg_server.running:
            pg_server.start()
    await journal.flush()
    assert refused == []
    assert faults[0] is not None and faults[-1] is None
    assert len(await journal.read(ReadFilter(limit=1))) == 1  # the read pool reconnected
    await journal.close()

    stored = await asyncio.to_thread(rows, pg_dsn, "SELECT process, seq, data FROM entries")
    counts = Counter((process, seq) for process, seq, _ in stored)
    assert max(counts.values()) == 1  # nothing written twice
    by_key = {(process, seq): data for process, seq, data in stored}
    for process, seq, producer, n in acked:  # every acknowledged append, as it was sent
        assert by_key[(process, seq)] == f'{{"producer":{producer},"n":{n}}}'
    for name in ("p0", "p1", "p2"):  # no gap: nothing submitted was lost either
        seqs = sorted(seq for process, seq in by_key if process == name)
        assert seqs == list(range(1, len(seqs) + 1))
    assert len(stored) == len(acked)


async def test_closing_while_the_server_is_down_acknowledges_nothing(
        pg_server: PgServer, pg_dsn: str) -> None:
    journal = PostgresJournal(pg_dsn)
    await journal.open()
    await journal.append(E("p", "note", {"n": 1}))
    try:
        await asyncio.to_thread(pg_server.stop, "fast")
        waiting = journal.submit(E("p", "note", {"n": 2}))
        await wait_for(lambda: journal.fault is not None, 30, "the journal to say degraded")
        assert not waiting.done()
        await asyncio.wait_for(journal.close(), 30)  # gives up on what cannot be written
        assert isinstance(waiting.exception(), JournalError)
    finally:
        if not pg_server.running:
            await asyncio.to_thread(pg_server.start)
    assert await fresh_rows(pg_dsn, "SELECT seq FROM entries") == [(1,)]


# -- text PostgreSQL cannot hold ------------------------------------------------------------------
async def test_nul_and_odd_text_in_json_round_trips(journal: PostgresJournal) -> None:
    data = {"text": "a\x00b", "\x00key": "\u0000", "odd": "\ud800", "u": "é✓ 日本"}
    entry = await journal.append(E("p", "tool_result", data, run_id="r", timestamp=1.5))
    [got] = await journal.read(ReadFilter())
    assert got.to_dict() == entry.to_dict()
    event = {"event_id": "e\x00", "payload": "x\x00y"}
    await journal.append(E("p", EntryType.DEAD_LETTERED, {
        "event_id": "e1", "reason": "bad\x00", "error": "Boom \x00 \ud800"}), attachment=event)
    [letter] = await journal.dead_letters("p")
    assert (letter.event, letter.reason, letter.error) == (event, "bad\x00", "Boom \x00 \ud800")
    assert [e.entry_type for e in await journal.read(ReadFilter(contains="\x00"))] == []
    assert len(await journal.read(ReadFilter(contains="\\u0000"))) == 2  # as stored: escaped


@pytest.mark.parametrize("bad", [
    E("p\x00", "note"), E("p", "note\x00"), E("p", "note", run_id="r\ud800"),
    E("p", EntryType.RUN_STARTED, {"event_id": "e\x00"}, run_id="r"),
])
async def test_names_postgresql_cannot_hold_are_refused_before_their_seq(
        journal: PostgresJournal, bad: JournalEntry) -> None:
    with pytest.raises(JournalError, match="cannot store"):
        journal.submit(bad)
    assert (await journal.append(E("p"))).seq == 1  # no seq used up, the journal goes on
    assert [e.seq for e in await journal.read(ReadFilter())] == [1]


# -- the schema -----------------------------------------------------------------------------------
async def test_nodes_opening_a_fresh_database_at_once_migrate_it_once(pg_dsn: str) -> None:
    journals = [PostgresJournal(pg_dsn) for _ in range(4)]
    try:
        await asyncio.gather(*(j.open() for j in journals))
        assert await fresh_rows(pg_dsn, "SELECT key, value FROM meta") == [
            ("schema_version", str(SCHEMA_VERSION))]
        await journals[0].append(E("p"))
        assert [e.seq for e in await journals[3].read(ReadFilter())] == [1]
    finally:
        for j in journals:
            await j.close()


async def test_a_newer_schema_is_refused_and_left_alone(pg_dsn: str) -> None:
    j = PostgresJournal(pg_dsn)
    await j.open()
    await j.append(E("p"))
    await j.close()
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(JournalError, match="newer promptui"):
        await PostgresJournal(pg_dsn).open()
    assert await fresh_rows(pg_dsn, "SELECT COUNT(*) FROM entries") == [(1,)]


async def test_a_changed_row_is_reported_corrupt(journal: PostgresJournal, pg_dsn: str) -> None:
    await journal.append(E("p", "note", {"amount": 10}))
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("""UPDATE entries SET data = '{"amount":1000000}'""")
    with pytest.raises(JournalError, match="corrupt"):
        await journal.read(ReadFilter())


# -- wiring ---------------------------------------------------------------------------------------
def test_the_postgres_backend_needs_a_dsn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMPTUI_DSN", raising=False)
    with pytest.raises(ValidationError) as info:
        JournalConfig(backend="postgres")
    assert "journal.dsn" in str(info.value) and "PROMPTUI_DSN" in str(info.value)
    with pytest.raises(ValidationError, match=r"journal\.dsn"):
        ProcessConfig(model="echo", journal={"backend": "postgres"})


def test_the_dsn_comes_from_the_config_or_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTUI_DSN", f"postgresql://app:{SECRET}@/jobs?host=/run/pg")
    config = JournalConfig(backend="postgres")
    assert config.dsn is None  # read when the journal is made, never copied into the config
    journal = make_journal(config)
    assert isinstance(journal, PostgresJournal)
    assert journal.path == "postgresql://app:***@/jobs?host=/run/pg"
    preflight(journal)  # a readable DSN: nothing to refuse, and nothing connects
    given = JournalConfig(backend="postgres", dsn=f"host=/run/pg password={SECRET} dbname=j")
    assert SECRET not in repr(given) and SECRET not in str(given)
    made = make_journal(given)
    assert isinstance(made, PostgresJournal) and made.path == "host=/run/pg password=*** dbname=j"


@pytest.mark.parametrize("dsn", [
    f"postgresql://postgres:{SECRET}@/nodb?host=/nonexistent-promptui-socket",
    f"postgresql://postgres:{SECRET}%zz@somewhere/db",  # libpq quotes this token back
    f"host=/nonexistent-promptui-socket password={SECRET} dbname=x",
    f"host=/nonexistent-promptui-socket password='{SECRET}' port=abc",
    f"postgresql:///db?host=/nonexistent-promptui-socket&password={SECRET}",
])
async def test_a_dsn_password_never_appears_in_an_error(dsn: str) -> None:
    journal = PostgresJournal(dsn, connect_timeout=2)
    assert SECRET not in journal.path and "***" in journal.path
    with pytest.raises(JournalError) as info:
        await journal.open()
    assert SECRET not in whole_story(info.value)
    assert "***" in str(info.value) or "nonexistent" in str(info.value)


async def test_a_dsn_password_never_appears_in_faults_or_logs(
        pg_server: PgServer, pg_dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    journal = PostgresJournal(f"{pg_dsn}&password={SECRET}", read_timeout=1)  # trust: ignored
    await journal.open()
    try:
        await journal.append(E("p"))
        await asyncio.to_thread(pg_server.stop, "immediate")
        waiting = journal.submit(E("p"))
        await wait_for(lambda: journal.fault is not None, 30, "the journal to say degraded")
        with pytest.raises(JournalError) as info:
            await journal.read(ReadFilter())
        assert SECRET not in whole_story(info.value)
        assert SECRET not in (journal.fault or "") and SECRET not in journal.path
        await asyncio.to_thread(pg_server.start)
        await asyncio.wait_for(waiting, 30)
    finally:
        if not pg_server.running:
            await asyncio.to_thread(pg_server.start)
        await journal.close()
    assert caplog.records and SECRET not in caplog.text


async def test_a_process_journals_to_postgres_and_recovers_from_it(pg_dsn: str) -> None:
    config = ProcessConfig(model="echo", journal={"backend": "postgres", "dsn": pg_dsn})
    first = AgentProcess("p", config)
    await first.start()
    await first.inject(TriggerEvent("t", "manual", {"n": 1}))
    await wait_for(lambda: first.invocation_count == 1, 10, "the event to run")
    await first.stop()
    kinds = {r[0] for r in await fresh_rows(pg_dsn, "SELECT entry_type FROM entries")}
    assert {EntryType.EVENT_ACCEPTED, EntryType.RUN_FINISHED} <= kinds

    second = AgentProcess("p", config)  # a new process object: its state comes from PostgreSQL
    await second.start()
    try:
        assert second.invocation_count == 1
        await second.inject(TriggerEvent("t", "manual", {"n": 2}))
        await wait_for(lambda: second.invocation_count == 2, 10, "the next event to run")
    finally:
        await second.stop()
