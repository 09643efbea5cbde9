"""A journal written by the previous release opens in this one, and the lean schema's reads go
through its indexes.

``data/journal-v2-crashed.db`` (with its ledger) was written by schema 2's promptui: the crash
worker SIGKILLed right after the third tool intent of six acknowledged events was durable (the
read of the second event's run; the first event's write is in the ledger). Opening it migrates
it in place (schema 3: no AUTOINCREMENT, a partial entry type index, the queue as one B-tree),
and recovery then does what it would have done on the old file: every acknowledged event runs,
no write runs twice, and the start checks find nothing wrong.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from runtime_core.journal import SQLiteJournal
from runtime_core.journal.provider import ReadFilter
from runtime_core.journal.sqlite.check import find_damage
from runtime_core.journal.sqlite.queries import read_sql
from runtime_core.journal.sqlite.schema import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    # closed at once: a connection left to the GC would checkpoint into the file later
    with closing(sqlite3.connect(db)) as conn, conn:
        return conn.execute(sql).fetchall()


@pytest.mark.slow
def test_a_schema_2_journal_left_by_a_kill_migrates_and_recovers(tmp_path: Path) -> None:
    db, ledger = tmp_path / "journal.db", tmp_path / "ledger.txt"
    shutil.copy(DATA / "journal-v2-crashed.db", db)
    shutil.copy(DATA / "journal-v2-crashed.ledger", ledger)
    assert rows(db, "SELECT value FROM meta WHERE key = 'schema_version'") == [("2",)]
    entries = "SELECT id, process, pid, seq, ts, entry_type, run_id, data, crc FROM entries"
    before = rows(db, entries + " ORDER BY id")
    queued = rows(db, "SELECT event_id, ord, event FROM pending ORDER BY ord")
    assert len(before) == 20 and len(queued) == 5

    env = {k: v for k, v in os.environ.items() if k != "PROMPTUI_CRASH_AT"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.helpers.workers.crash_worker", "--db", str(db), "--ledger",
         str(ledger), "--exit-when-idle"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    idle = json.loads(done.stdout.split("IDLE ", 1)[1].splitlines()[0])
    assert idle["waiting"] == [] and idle["dead_letters"] == []

    lines = [line.split() for line in ledger.read_text().splitlines()]
    assert sorted(event for _, event, _ in lines) == [f"v2-{i}" for i in range(6)]
    assert len({key for key, _, _ in lines}) == 6  # no write ran twice

    assert rows(db, "SELECT value FROM meta WHERE key = 'schema_version'") == [
        (str(SCHEMA_VERSION),)]
    assert rows(db, entries + f" WHERE id <= {before[-1][0]} ORDER BY id") == before
    assert rows(db, "SELECT COUNT(*) FROM pending") == [(0,)]
    assert rows(db, "SELECT name FROM sqlite_schema WHERE name IN ('pending_order', "
                    "'entries_v3', 'pending_v3')") == []
    assert find_damage(db) == []


def plan(db: Path, sql: str, params: tuple[Any, ...]) -> str:
    with closing(sqlite3.connect(db)) as conn:
        return " / ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))


@pytest.fixture
async def fresh(tmp_path: Path) -> Path:
    journal = SQLiteJournal(tmp_path / "j.db")
    await journal.open()
    await journal.close()
    return tmp_path / "j.db"


def test_the_reads_a_start_makes_go_through_indexes(fresh: Path) -> None:
    last = read_sql(ReadFilter(process="p", entry_type="checkpoint", newest_first=True,
                               limit=1))
    assert "USING INDEX entries_by_type" in plan(fresh, *last)
    tail = read_sql(ReadFilter(process="p", since_seq=10))
    assert "sqlite_autoindex_entries_1 (process=? AND seq>?)" in plan(fresh, *tail)
    # a frequent type is not in the type index: a bounded walk of the process's entries
    finished = read_sql(ReadFilter(process="p", entry_type="run_finished", newest_first=True,
                                   limit=5))
    assert "entries_by_type" not in plan(fresh, *finished)
    assert "USING PRIMARY KEY (process=?)" in plan(
        fresh, "SELECT event FROM pending WHERE process = ? ORDER BY ord", ("p",))
