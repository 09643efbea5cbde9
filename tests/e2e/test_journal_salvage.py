"""A damaged journal a real runtime wrote is refused, kept, and salvaged on purpose.

The journal (tests/helpers/workers/salvage_worker.py) holds finished runs, dead letters, a run
parked on a write whose outcome is unknown, a run killed inside its write, and queued events,
as a SIGKILL left them. It is then cut short at several points, or its schema page is
overwritten. 'promptui run' refuses it (status 2, the file untouched); 'promptui journal
salvage' rescues every entry and queued event whose bytes are left (the oracle: the rows of
the sound journal, found whole in the damaged file); and a runtime started on the salvaged
journal runs each rescued queued event once, leaves every event whose outcome is unknown
waiting, and runs no write twice (the ledger the write tool appends to says so).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime_core.control import offline
from tests.helpers.cli import promptui_command

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, repr=False)
class Built:
    folder: Path
    acked: dict[str, list[str]]  # kind -> event ids acknowledged
    entries: dict[tuple[str, int], str]  # (process, seq) -> data, of the sound journal
    pending: dict[str, str]  # event id -> the queue's row (event JSON)
    dead: dict[str, str]


def worker(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PROMPTUI_CRASH_AT"}
    return subprocess.run([sys.executable, "-m", "tests.helpers.workers.salvage_worker", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def said(out: subprocess.CompletedProcess[str], tag: str) -> Any:
    [line] = [x for x in out.stdout.splitlines() if x.startswith(tag + " ")]
    return json.loads(line.removeprefix(tag + " "))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    folder = tmp_path_factory.mktemp("built")
    db = folder / "journal.db"
    out = worker("build", "--db", str(db), "--ledger", str(folder / "ledger.txt"))
    assert out.returncode == -9, out.stderr  # killed, as a crash: nothing was stopped
    acked = said(out, "BUILT")
    with closing(sqlite3.connect(db)) as conn:  # the WAL folded in: the same journal, one file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        entries = {(p, s): d for p, s, d in conn.execute("SELECT process, seq, data FROM "
                                                         "entries")}
        pending = dict(conn.execute("SELECT event_id, event FROM pending").fetchall())
        dead = dict(conn.execute("SELECT event_id, event FROM dead_letters").fetchall())
        runs = dict(conn.execute("SELECT event_id, state FROM open_runs").fetchall())
    assert runs == {"unknown-0": "waiting", "hold-0": "running"}
    assert sorted(pending) == sorted(["unknown-0", "hold-0", *acked["queued"]])
    assert sorted(dead) == acked["dead"]
    return Built(folder, acked, entries, pending, dead)


def cut(share: float) -> Any:
    def damage(db: Path) -> None:
        data = db.read_bytes()
        db.write_bytes(data[:int(len(data) * share)])
    return damage


def schema_page(db: Path) -> None:
    data = bytearray(db.read_bytes())
    data[100:4096] = b"\xa5" * (4096 - 100)  # page 1 after the file header: the schema
    db.write_bytes(bytes(data))


DAMAGE = {"cut-30%": cut(0.30), "cut-50%": cut(0.50), "cut-75%": cut(0.75),
          "cut-90%": cut(0.90), "cut-99%": cut(0.99), "schema-page": schema_page}


def copy_of(built: Built, folder: Path) -> Path:
    folder.mkdir()
    shutil.copy(built.folder / "journal.db", folder / "journal.db")
    shutil.copy(built.folder / "ledger.txt", folder / "ledger.txt")
    return folder / "journal.db"


def check_rescued(built: Built, damaged: bytes, output: Path, report: dict[str, Any]) -> None:
    """Every entry, queued event and dead letter whose row is left whole in the damaged
    bytes is in the salvaged journal; so is every acknowledged event that can still be read."""
    with closing(sqlite3.connect(output)) as conn:
        entries = {(p, s): d for p, s, d in conn.execute("SELECT process, seq, data FROM "
                                                         "entries")}
        pending = dict(conn.execute("SELECT event_id, event FROM pending").fetchall())
        dead = dict(conn.execute("SELECT event_id, event FROM dead_letters").fetchall())
        finished = {json.loads(d)["event_id"] for (d,) in conn.execute(
            "SELECT data FROM entries WHERE entry_type = 'run_finished'")}
    def whole(text: str | None) -> bool:
        """The row's text is in the damaged bytes, and so is what follows it in its record
        (an entry's checksum comes after its data)."""
        if text is None:
            return False
        at = damaged.find(text.encode())
        return at >= 0 and at + len(text.encode()) + 8 <= len(damaged)

    unique = Counter(built.entries.values())
    for key, text in built.entries.items():
        if unique[text] == 1 and whole(text):
            assert entries.get(key) == text, f"entry {key} was readable and is lost"
    for table, kept in ((built.pending, pending), (built.dead, dead)):
        for event_id, text in table.items():
            if whole(text):
                assert kept.get(event_id) == text, f"{event_id} was readable and is lost"
    [process] = report["processes"].values()
    accounted = set(pending) | set(dead) | finished | set(process["settled_end_lost"])
    for event_id in (e for ids in built.acked.values() for e in ids):
        rows = [built.pending.get(event_id), built.dead.get(event_id),
                *(t for t in built.entries.values() if f'"event_id":"{event_id}"' in t)]
        readable = any(whole(t) for t in rows)
        if readable:
            assert event_id in accounted, f"acknowledged {event_id} was readable and is lost"


def check_safe(built: Built, report: dict[str, Any]) -> None:
    """What the salvaged journal lets run by itself never wrote before."""
    [process] = report["processes"].values()
    assert set(process["requeued"]) <= set(built.acked["queued"])
    never = {*built.acked["finished"], *built.acked["dead"], "unknown-0", "hold-0"}
    assert not never & set(process["requeued"])


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_journal_is_refused_kept_and_salvaged(built: Built, tmp_path: Path,
                                                        damage: str) -> None:
    db = copy_of(built, tmp_path / "run")
    DAMAGE[damage](db)
    damaged, files = db.read_bytes(), sorted(db.parent.iterdir())
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "salvo.agent").write_text(f'version: "1.0"\nname: salvo\nmodel: echo\n'
                                        f"journal: {{level: checkpoint, path: '{db}'}}\n")
    env = {**os.environ, "PROMPTUI_URL": "", "PROMPTUI_TOKEN": ""}
    run = subprocess.run([*promptui_command(), "run", str(agents), "--seconds", "1"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stdout + run.stderr
    [line] = [x for x in run.stderr.splitlines() if x.startswith("error: ")]
    assert re.match(rf"error: journal {re.escape(str(db))} (cannot be read|is damaged where a "
                    r"start reads it): (database error|SQLite cannot read it): ", line), line
    assert f"'promptui journal salvage {db}' writes a new journal" in line
    assert db.read_bytes() == damaged and sorted(db.parent.iterdir()) == files

    output = tmp_path / "salvaged.db"
    salvage = subprocess.run([*promptui_command(), "journal", "salvage", str(db), "-o",
                              str(output), "--json"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=60)
    assert salvage.returncode == 0, salvage.stdout + salvage.stderr
    report = json.loads(salvage.stdout)
    assert report["verify_problems"] == [] and db.read_bytes() == damaged
    check_rescued(built, damaged, output, report)
    check_safe(built, report)
    with closing(sqlite3.connect(output)) as conn:  # what the salvage kept (none were readable
        kept_dead = {e for (e,) in conn.execute(  # when the cut took their rows and entries)
            "SELECT event_id FROM dead_letters")}

    before = (db.parent / "ledger.txt").read_text().splitlines()
    resumed = worker("resume", "--db", str(output), "--ledger", str(db.parent / "ledger.txt"))
    assert resumed.returncode == 0, resumed.stderr
    idle = said(resumed, "IDLE")
    after = (db.parent / "ledger.txt").read_text().splitlines()
    assert after[:len(before)] == before
    ran = Counter(line.split()[1] for line in after)
    assert max(ran.values()) == 1  # no write ran twice
    [process] = report["processes"].values()
    new = {line.split()[1] for line in after[len(before):]}
    assert new == set(process["requeued"])  # each rescued queued event ran once
    waiting = {w["event_id"] for w in idle["waiting"]}
    put = {w["event_id"] for w in process["runs_put_to_wait"]}
    assert put <= waiting and not waiting & new  # an unknown outcome waits, never reruns
    assert waiting <= {"unknown-0", "hold-0", *built.acked["queued"]}
    for wait in idle["waiting"]:
        if wait["event_id"] in put:  # what the operator reads before reconciling
            assert wait["reason"] == "unknown_write_outcome"
            assert f"salvaged from {db}" in wait["cause"] and "reconcile" in wait["cause"]
    # The dead letters the salvage kept come back, and only acknowledged ones; one it knew of
    # and could not read is listed as lost (check_rescued: every readable one is kept).
    assert sorted(idle["dead_letters"]) == sorted(kept_dead)
    assert kept_dead <= set(built.acked["dead"])
    assert not kept_dead & set(process["dead_letters_lost"])
    print(f"\n{damage}: {json.dumps(summary(report, idle))}")


def summary(report: dict[str, Any], idle: dict[str, Any]) -> dict[str, Any]:
    """One row of the table the report gives."""
    [p] = report["processes"].values()
    return {"entries": f"{p['entries_rescued']}/{p['head']}",
            "requeued": len(p["requeued"]), "finished": p["runs_finished"],
            "put_to_wait": len(p["runs_put_to_wait"]),
            "waiting_after_start": len(idle["waiting"]), "dead": p["dead_letters"],
            "payload_lost": len(p["payload_lost"]),
            "settled_end_lost": len(p["settled_end_lost"])}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(share=st.floats(min_value=0.05, max_value=1.0), schema=st.booleans())
def test_a_cut_anywhere_loses_nothing_readable_and_lets_nothing_run_twice(
        built: Built, tmp_path_factory: pytest.TempPathFactory, share: float,
        schema: bool) -> None:
    folder = tmp_path_factory.mktemp("cut")
    db = copy_of(built, folder / "run")
    cut(share)(db)
    if schema and db.stat().st_size >= 4096:
        schema_page(db)
    damaged = db.read_bytes()
    try:
        report = offline.salvage(db, folder / "salvaged.db")
    except offline.JournalError as exc:  # too little is left to hold a single entry
        assert "nothing to salvage" in str(exc)
        assert not any(t.encode() in damaged for t in built.entries.values())
        return
    assert report.verify_problems == []
    data = report.to_dict()
    check_rescued(built, damaged, report.output, data)
    check_safe(built, data)
