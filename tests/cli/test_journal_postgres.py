"""``promptui logs``, ``journal export`` and ``journal verify`` on a PostgreSQL journal
(``--journal postgresql://...`` or ``--cluster DSN|env``), on the throwaway server: they read it,
read-only (a role with SELECT alone is enough), while a node writes (``logs -f`` follows it);
``verify`` names the damage; and every error names the database as user@host:port/dbname with
what to do, never the password (a refused port, a missing database, a database without the
journal, an unknown process, a wrong password against a role that needs one)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import psycopg
import pytest

from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.postgres.journal import PostgresJournal
from tests.helpers.cli import promptui_command
from tests.helpers.cluster import Cluster, write_agents
from tests.helpers.polling import poll
from tests.helpers.ports import free_port
from tests.helpers.postgres import PgServer

pytestmark = pytest.mark.slow

SECRET = "Pw-4711-never-shown"
ROLE = "promptui_journal_reader"  # SELECT only, and a password it must give (scram)


async def _seed(dsn: str) -> None:
    """Two processes, 7 entries each: a run, a checkpoint and a dead letter."""
    journal = PostgresJournal(dsn)
    await journal.open()
    try:
        for name in ("alpha", "beta"):
            first = {"event_id": f"{name}-e1", "trigger_type": "manual", "payload": {"i": 1}}
            second = {"event_id": f"{name}-e2", "trigger_type": "manual", "payload": {"i": 2}}
            for entry, attached in [
                (JournalEntry(name, EntryType.STATE_TRANSITION,
                              {"from_state": "created", "to_state": "running"}), None),
                (JournalEntry(name, EntryType.EVENT_ACCEPTED, {"event_id": f"{name}-e1"}),
                 first),
                (JournalEntry(name, EntryType.RUN_STARTED, {"event_id": f"{name}-e1"},
                              run_id="r1"), None),
                (JournalEntry(name, EntryType.RUN_FINISHED, {
                    "event_id": f"{name}-e1", "event_done": True, "status": "completed"},
                    run_id="r1"), None),
                (JournalEntry(name, EntryType.CHECKPOINT, {"context_state": {"n": 1}}), None),
                (JournalEntry(name, EntryType.EVENT_ACCEPTED, {"event_id": f"{name}-e2"}),
                 second),
                (JournalEntry(name, EntryType.DEAD_LETTERED, {
                    "event_id": f"{name}-e2", "reason": "boom", "error": "x", "attempts": 1}),
                 second),
            ]:
                await journal.append(entry, attachment=attached)
    finally:
        await journal.close()


@pytest.fixture
def journal_dsn(pg_dsn: str) -> str:
    asyncio.run(_seed(pg_dsn))
    return pg_dsn


def promptui(*args: str, env: dict[str, str] | None = None,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("PROMPTUI_", "PG"))}
    return subprocess.run([*promptui_command(), *args], capture_output=True, text=True,
                          env={**full, **(env or {})}, cwd=cwd, timeout=60,
                          stdin=subprocess.DEVNULL)


def schema_of(dsn: str) -> str:
    return dsn.rsplit("%3D", 1)[1]


def with_user(dsn: str, user: str, password: str) -> str:
    """The same database and schema as ``user`` with ``password``."""
    return dsn.replace("&user=postgres", f"&user={user}&password={password}")


def password_role(server: PgServer, dsn: str) -> None:
    """ROLE: it logs in only with SECRET (scram-sha-256 on the server's socket, for this role
    alone: the other tests keep trust) and may only read the journal's tables."""
    hba = server.data_dir / "pg_hba.conf"
    line = f"local all {ROLE} scram-sha-256\n"
    if line not in hba.read_text():
        hba.write_text(line + hba.read_text())  # first match wins: this role's line first
    schema = schema_of(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{SECRET}'")
        conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {ROLE}')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO {ROLE}')
        conn.execute("SELECT pg_reload_conf()")


def assert_hidden(done: subprocess.CompletedProcess[str]) -> None:
    assert SECRET not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_logs_export_and_verify_read_a_postgres_journal(journal_dsn: str) -> None:
    shown = promptui("logs", "alpha", "-n", "3", "--journal", journal_dsn)
    assert shown.returncode == 0, shown.stderr
    assert [line.split()[3] for line in shown.stdout.splitlines()] == [  # seq date time type
        "checkpoint", "event_accepted", "dead_lettered"]
    typed = promptui("logs", "beta", "--type", "run_finished", "--json", "--cluster", "env",
                     env={"PROMPTUI_DSN": journal_dsn})
    assert typed.returncode == 0, typed.stderr
    assert '"entry_id": "beta:4"' in typed.stdout and len(typed.stdout.splitlines()) == 1
    exported = promptui("journal", "export", "alpha", "--cluster", journal_dsn)
    assert exported.returncode == 0, exported.stderr
    assert [f'"seq": {n},' in line for n, line in enumerate(exported.stdout.splitlines(), 1)
            ] == [True] * 7
    verified = promptui("journal", "verify", "--cluster", "env",
                        env={"PROMPTUI_DSN": journal_dsn})
    assert verified.returncode == 0, verified.stdout + verified.stderr
    lines = verified.stdout.splitlines()
    assert lines[:2] == ["alpha: 7 entries, 1 checkpoints, 1 dead letters, 0 queued",
                         "beta: 7 entries, 1 checkpoints, 1 dead letters, 0 queued"]
    assert lines[2] == f"ok: postgres@{journal_dsn.split('host=')[1].split('&')[0]}:5432/" \
        f"tests (schema {schema_of(journal_dsn)}) is sound"


def test_a_role_that_may_only_read_and_needs_a_password_reads_it(
        journal_dsn: str, pg_server: PgServer) -> None:
    password_role(pg_server, journal_dsn)
    reader = with_user(journal_dsn, ROLE, SECRET)
    for args in (["logs", "alpha", "--journal", reader], ["journal", "export", "beta",
                                                          "--journal", reader],
                 ["journal", "verify", "--journal", reader]):
        done = promptui(*args)
        assert done.returncode == 0, done.stderr
        assert_hidden(done)
    with psycopg.connect(journal_dsn, autocommit=True) as conn:
        conn.execute(f"REVOKE SELECT ON entries FROM {ROLE}")
    denied = promptui("logs", "alpha", "--journal", reader)
    assert denied.returncode == 2 and "may not read the journal" in denied.stderr
    assert f'GRANT SELECT ON ALL TABLES IN SCHEMA {schema_of(journal_dsn)} TO' in denied.stderr
    assert_hidden(denied)
    wrong = promptui("journal", "verify", "--cluster", "env",
                     env={"PROMPTUI_DSN": with_user(journal_dsn, ROLE, "not-" + SECRET)})
    assert wrong.returncode == 2
    assert f"PostgreSQL at {ROLE}@" in wrong.stderr and "refused the login" in wrong.stderr
    assert "password authentication failed" in wrong.stderr
    assert "check the user and the password" in wrong.stderr
    assert "not-" + SECRET not in wrong.stderr + wrong.stdout
    assert_hidden(wrong)


def test_errors_name_the_database_and_the_fix_never_the_password(
        journal_dsn: str, pg_server: PgServer) -> None:
    port = free_port()
    refused = promptui("logs", "alpha", "--journal",
                       f"postgresql://ops:{SECRET}@127.0.0.1:{port}/promptui")
    assert refused.returncode == 2
    assert f"cannot reach PostgreSQL at ops@127.0.0.1:{port}/promptui" in refused.stderr
    assert "check that the server runs" in refused.stderr
    assert_hidden(refused)

    missing = promptui("journal", "verify", "--cluster", "env", env={
        "PROMPTUI_DSN": journal_dsn.replace("/tests?", "/nowhere?") + f"&password={SECRET}"})
    assert missing.returncode == 2 and "has no such database" in missing.stderr
    assert "/nowhere (schema" in missing.stderr and "check the database name" in missing.stderr
    assert_hidden(missing)

    empty = pg_server.create_schema()
    try:
        bare = promptui("journal", "export", "alpha", "--journal", f"{empty}&password={SECRET}")
        assert bare.returncode == 2
        assert f"holds no promptui journal (no journal tables in schema '{schema_of(empty)}')" \
            in bare.stderr and "a node of 'promptui serve --cluster' makes" in bare.stderr
        assert_hidden(bare)
        with psycopg.connect(empty) as conn:  # looking made nothing
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = "
                                "current_schema()").fetchone() == (0,)
    finally:
        pg_server.drop_schema(empty)

    unknown = promptui("logs", "gamma", "--journal", f"{journal_dsn}&password={SECRET}")
    assert unknown.returncode == 2
    assert "has no entries for process 'gamma' (processes: alpha, beta)" in unknown.stderr
    assert_hidden(unknown)

    unset = promptui("logs", "alpha", "--cluster", "env")
    assert unset.returncode == 2 and "PROMPTUI_DSN is not set" in unset.stderr
    both = promptui("logs", "alpha", "--cluster", journal_dsn, "--journal", "x.db")
    assert both.returncode == 2 and "give one" in both.stderr


def test_verify_names_the_damage_and_a_read_refuses_a_corrupt_entry(journal_dsn: str) -> None:
    with psycopg.connect(journal_dsn) as conn:  # changed outside promptui, as damage would be
        conn.execute("UPDATE entries SET data = '{\"tampered\": 1}' "
                     "WHERE process = 'alpha' AND seq = 3")
        conn.execute("DELETE FROM entries WHERE process = 'beta' AND seq = 4")
        conn.commit()
    verified = promptui("journal", "verify", "--journal", journal_dsn)
    assert verified.returncode == 1
    assert "damaged: entry alpha:3 (run_started) is corrupt: its checksum does not match" in \
        verified.stdout
    assert "damaged: process 'beta': the seq chain breaks at entry beta:5 (expected seq 4)" in \
        verified.stdout
    shown = promptui("logs", "alpha", "--journal", journal_dsn)
    assert shown.returncode == 2 and "journal entry alpha:3 is corrupt" in shown.stderr


def test_logs_follow_a_cluster_while_its_node_writes(tmp_path: Path, pg_dsn: str) -> None:
    dsn = f"{pg_dsn}&password={SECRET}"  # trust auth takes it; nothing may show it
    cluster = Cluster(tmp_path, dsn, write_agents(tmp_path, ["p0"]), tmp_path / "ledger")
    follower: subprocess.Popen[str] | None = None
    try:
        node = cluster.start("n1")
        poll(lambda: cluster.running(["p0"]), 30, "p0 running")

        def inject(i: int) -> None:
            with node.client() as client:
                answer = client.post("/processes/p0/inject", json={"payload": {"i": f"e{i}"}})
            assert answer.status_code == 202, answer.text

        inject(0)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PROMPTUI_")}
        follower = subprocess.Popen(
            [*promptui_command(), "logs", "p0", "--cluster", "env", "-f", "--type",
             "run_finished", "-n", "1"], env={**env, "PROMPTUI_DSN": dsn},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
            stdin=subprocess.DEVNULL)
        lines: list[str] = []

        def read() -> None:
            assert follower is not None and follower.stdout is not None
            for line in follower.stdout:  # as the follower prints them
                lines.append(line)

        def printed(count: int) -> list[str] | None:
            assert follower is not None
            if follower.poll() is not None:
                pytest.fail(f"the follower exited {follower.returncode}: "
                            f"{follower.stderr.read() if follower.stderr else ''}")
            return lines if len(lines) >= count else None

        threading.Thread(target=read, daemon=True).start()
        poll(lambda: printed(1), 30, "the follower printing the first run's end")
        for i in range(1, 4):  # once it follows: it must see them come
            inject(i)
        poll(lambda: printed(4), 30, "the follower printing the next three")
        assert all(" run_finished " in line for line in lines)
        seqs = [int(line.split()[0]) for line in lines]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)

        verified = promptui("journal", "verify", "--cluster", dsn)  # the node still writes
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert re.match(r"p0: \d+ entries, \d+ checkpoints, 0 dead letters, \d+ queued",
                        verified.stdout)
        exported = promptui("journal", "export", "p0", "--journal", dsn)
        assert exported.returncode == 0 and exported.stdout.count("run_finished") >= 4
        assert node.alive
        follower.send_signal(signal.SIGINT)  # Ctrl+C: a follower ends quietly
        assert follower.wait(20) == 0
        errors = follower.stderr.read() if follower.stderr else ""
        assert "Traceback" not in errors
        for text in (verified.stdout, exported.stdout, "".join(lines), errors, node.text()):
            assert SECRET not in text  # not on a screen, not in a log, not in the journal
    finally:
        if follower is not None and follower.poll() is None:
            follower.kill()
            follower.wait(10)
        cluster.close()


def test_a_follower_waits_out_a_database_that_goes_away(journal_dsn: str,
                                                         pg_server: PgServer) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROMPTUI_", "PG"))}
    follower = subprocess.Popen(
        [*promptui_command(), "logs", "alpha", "-f", "-n", "1", "--journal",
         f"{journal_dsn}&password={SECRET}"], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    out: list[str] = []
    said: list[str] = []
    for stream, sink in ((follower.stdout, out), (follower.stderr, said)):
        threading.Thread(target=lambda s=stream, k=sink: k.extend(iter(s.readline, "")),
                         daemon=True).start()
    try:
        poll(lambda: len(out) >= 1, 30, "the follower printing the newest entry")
        pg_server.stop("fast")
        try:
            poll(lambda: any("still following" in line for line in said), 30,
                 "the follower saying it waits")
        finally:
            pg_server.start()
        asyncio.run(_append_note(journal_dsn))
        poll(lambda: len(out) >= 2, 30, "the follower printing the entry made after")
        assert " note " in out[1] and "reading postgres@" in "".join(said)
        assert follower.poll() is None
    finally:
        follower.send_signal(signal.SIGINT)
        follower.wait(20)
    text = "".join(out + said)
    assert SECRET not in text and "Traceback" not in text
    assert sum("still following" in line for line in said) == 1  # said once, not every poll


async def _append_note(dsn: str) -> None:
    journal = PostgresJournal(dsn)
    await journal.open()
    try:
        await journal.append(JournalEntry("alpha", "note", {"after": "the outage"}))
    finally:
        await journal.close()
