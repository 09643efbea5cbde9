"""A PostgreSQL DSN's password never shows: every road that turns a DSN, or psycopg's text about
one, into a message, an exception, a log line or a screen is fed DSNs carrying a password (in
the URI, in the query, as a keyword, quoted, percent-encoded, and malformed, where libpq echoes
the piece it could not parse) against a port nothing listens on, and the password appears in
none of it: not in the message, not in the exception's chain as a traceback prints it, not in
any log record. No server: each connection is refused at once."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from typer.testing import CliRunner

from promptui.cli.main import app
from runtime_core.cluster.db import Connector
from runtime_core.cluster.host import cluster_config
from runtime_core.cluster.inbox import ClusterInbox
from runtime_core.cluster.ingress import ClusterIngress
from runtime_core.config import ProcessConfig
from runtime_core.control.offline_postgres import (
    JournalError,
    JournalUnreachable,
    PostgresReader,
    describe_dsn,
    redact_dsn,
)
from runtime_core.control.redaction import config_redactor, shown_config
from runtime_core.journal.postgres.dsn import Scrubber, dsn_secrets
from runtime_core.journal.postgres.journal import PostgresJournal
from tests.helpers.ports import free_port

SECRET = "Pw-4711-never-shown"
SPECIAL = "p@ss/w:rd?&=#%"  # needs percent-encoding in a URI
PORT = free_port()  # nothing listens there: every connection is refused at once

DSNS = {
    "uri": f"postgresql://ops:{SECRET}@127.0.0.1:{PORT}/promptui",
    "query": f"postgresql://ops@127.0.0.1:{PORT}/promptui?password={SECRET}&sslmode=disable",
    "keywords": f"host=127.0.0.1 port={PORT} user=ops password={SECRET} dbname=promptui",
    "quoted": f"host=127.0.0.1 port={PORT} user=ops password='{SECRET} x' dbname=promptui",
    "encoded": f"postgresql://ops:{quote(SPECIAL, safe='')}@127.0.0.1:{PORT}/promptui",
    "sslpassword": f"postgresql://ops@127.0.0.1:{PORT}/promptui?sslpassword={SECRET}",
    "malformed uri": f"postgresql://ops:{SECRET}%ZZ@127.0.0.1:{PORT}/promptui",
    "malformed keywords": f"host=127.0.0.1 port={PORT} password={SECRET} dangling",
}
MALFORMED = {"malformed uri", "malformed keywords"}


def spellings() -> list[str]:
    return [SECRET, SPECIAL, quote(SPECIAL, safe=""), quote(SPECIAL)]


def assert_hidden(*texts: str) -> None:
    for text in texts:
        for secret in spellings():
            assert secret not in text, f"{secret!r} shows in: {text}"


def chain(exc: BaseException) -> str:
    """Everything a traceback of ``exc`` prints: its message, its causes and contexts."""
    return "".join(traceback.format_exception(exc))


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> Iterator[list[logging.LogRecord]]:
    caplog.set_level(logging.DEBUG)  # psycopg_pool's warnings, ours at every level
    yield caplog.records
    assert_hidden(*(record.getMessage() for record in caplog.records))
    assert_hidden(*(chain(r.exc_info[1]) for r in caplog.records
                    if r.exc_info and r.exc_info[1] is not None))


@pytest.mark.parametrize("form", list(DSNS))
def test_the_shown_forms_of_a_dsn_hold_no_password(form: str) -> None:
    dsn = DSNS[form]
    assert_hidden(redact_dsn(dsn), describe_dsn(dsn), Scrubber(dsn).shown,
                  Scrubber(dsn)(f"libpq said: {dsn} / {dsn_secrets(dsn)}"))
    if form not in MALFORMED:
        assert describe_dsn(dsn).startswith(f"ops@127.0.0.1:{PORT}/promptui")


def test_the_journal_commands_name_the_database_as_user_host_port_dbname() -> None:
    assert describe_dsn("postgresql:///t1?host=/run/pg&user=postgres&options=-csearch_path%3Ds2"
                        ) == "postgres@/run/pg:5432/t1 (schema s2)"
    assert describe_dsn(f"postgresql://ops:{SECRET}@db.internal:6432/promptui"
                        ) == "ops@db.internal:6432/promptui"


@pytest.mark.parametrize("form", list(DSNS))
def test_the_reader_says_where_and_what_to_do_without_the_password(
        form: str, records: list[logging.LogRecord]) -> None:
    reader = PostgresReader(DSNS[form], connect_timeout=2)
    with pytest.raises(JournalError) as caught:
        reader.open()
    text = str(caught.value)
    assert_hidden(text, repr(caught.value), chain(caught.value))
    if form in MALFORMED:
        assert "cannot be read" in text and "postgresql://USER@HOST:PORT/DBNAME" in text
    else:
        assert isinstance(caught.value, JournalUnreachable)
        assert text.startswith(f"cannot reach PostgreSQL at ops@127.0.0.1:{PORT}/promptui")
        assert "check that the server runs" in text
    # psycopg's exception keeps the password in its connection object: never chained
    assert caught.value.__cause__ is None and caught.value.__context__ is None


@pytest.mark.parametrize("form", list(DSNS))
async def test_the_journal_the_runtime_opens_fails_without_the_password(
        form: str, records: list[logging.LogRecord]) -> None:
    journal = PostgresJournal(DSNS[form], connect_timeout=1)
    assert_hidden(journal.path, journal.faults.where)
    with pytest.raises(JournalError) as caught:
        await journal.open()
    assert_hidden(str(caught.value), repr(caught.value), chain(caught.value))
    if form in MALFORMED:  # refused before connecting: libpq's echo of the DSN scrubbed
        with pytest.raises(JournalError) as preflight:
            journal.preflight()
        assert_hidden(str(preflight.value), chain(preflight.value))


@pytest.mark.parametrize("form", sorted(set(DSNS) - MALFORMED))
async def test_a_cluster_node_s_connections_fail_without_the_password(
        form: str, records: list[logging.LogRecord]) -> None:
    connector = Connector(DSNS[form], connect_timeout=1)
    assert_hidden(connector.shown, repr(ClusterInbox(DSNS[form])))
    with pytest.raises(Exception) as caught:
        async with connector.connection():
            pass
    assert_hidden(str(caught.value), chain(caught.value))
    ingress = ClusterIngress(DSNS[form], "n1", connect_timeout=1)
    with pytest.raises(Exception) as started:
        await ingress.start()
    assert_hidden(str(started.value), chain(started.value))


def test_the_room_shows_a_cluster_process_s_config_without_the_password() -> None:
    config = cluster_config(ProcessConfig(), DSNS["uri"])
    assert_hidden(str(shown_config(config)), repr(config), repr(config.journal))
    redact = config_redactor(config)
    assert redact is not None  # the password alone, where a message quotes it, is hidden too
    assert_hidden(redact(f"libpq: {DSNS['uri']} failed for {SECRET}"))


@pytest.mark.parametrize("command", [["logs", "p0"], ["journal", "export", "p0"],
                                     ["journal", "verify"]])
@pytest.mark.parametrize("form", ["uri", "query", "malformed uri"])
def test_the_journal_commands_fail_in_one_line_without_the_password(
        command: list[str], form: str) -> None:
    env = {"PROMPTUI_URL": "", "PROMPTUI_TOKEN": "", "COLUMNS": "300"}
    by_flag = CliRunner().invoke(app, [*command, "--journal", DSNS[form]], env=env)
    by_env = CliRunner().invoke(app, [*command, "--cluster", "env"],
                                env={**env, "PROMPTUI_DSN": DSNS[form]})
    for done in (by_flag, by_env):
        assert done.exit_code == 2, done.output
        assert done.output.startswith("error: ") and "Traceback" not in done.output
        assert_hidden(done.output)
        if form not in MALFORMED:
            assert f"cannot reach PostgreSQL at ops@127.0.0.1:{PORT}/promptui" in done.output


def test_a_failed_connection_says_what_failed_and_whether_it_passes() -> None:
    from runtime_core.journal.postgres.reader import connect_problem

    scrub = Scrubber(DSNS["uri"])
    for libpq, says, passing in [
        ('FATAL:  password authentication failed for user "ops"', "refused the login", False),
        ("fe_sendauth: no password supplied", "refused the login", False),
        ('FATAL:  database "promptui" does not exist', "has no such database", False),
        ('FATAL:  role "ops" does not exist', "has no such user", False),
        ("Connection refused", "cannot reach PostgreSQL", True),
    ]:
        text, is_passing = connect_problem("ops@db:5432/promptui", scrub(libpq))
        assert says in text and is_passing is passing
        assert "ops@db:5432/promptui" in text
