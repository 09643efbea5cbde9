"""A damaged journal is caught when a runtime opens it, before anything runs.

The journal is made the way a crash makes it (helpers/workers/crash_worker.py, SIGKILLed right after
a write tool's intent is durable, then restarted once so the run is parked waiting with
``unknown_write_outcome``); then bytes are damaged. Before these checks, some of that damage
(the open run's index row, a run index entry) made the next start resume the run or re-queue
its event, and the write ran a second time. Now: refused, the file untouched, naming the
salvage command, unless the operator chose on_damage: start_fresh; and whatever happens the
write never runs again."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from runtime_core import AgentRuntime, ProcessConfig
from runtime_core.control import offline
from runtime_core.journal import DamagedJournal, JournalError, SQLiteJournal
from runtime_core.journal.run_key import KEY_CHARS
from runtime_core.journal.sqlite.check import find_damage

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PAGE = 4096


def worker(folder: Path, *args: str, crash: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PROMPTUI_CRASH_AT"}
    if crash:
        env["PROMPTUI_CRASH_AT"] = crash
    return subprocess.run(
        [sys.executable, "-m", "tests.helpers.workers.crash_worker",
         "--db", str(folder / "journal.db"), "--ledger", str(folder / "ledger.txt"),
         "--exit-when-idle", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def ledger(folder: Path) -> list[str]:
    path = folder / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture(scope="module")
def parked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A journal with one run waiting on an unknown write outcome (and two done)."""
    folder = tmp_path_factory.mktemp("parked")
    crashed = worker(folder, "--inject", "4", "--prefix", "a", crash="tool_intent:2")
    assert crashed.returncode == -9, crashed.stderr
    restarted = worker(folder)  # recovers: the run waits; a clean stop folds the WAL in
    assert restarted.returncode == 0, restarted.stderr
    assert '"waiting_runs": 1' in restarted.stdout
    assert not (folder / "journal.db-wal").exists()
    run_id, _ = waiting_run(folder / "journal.db")
    assert not any(line.startswith(run_id) for line in ledger(folder))  # its write: unknown
    return folder


def waiting_run(db: Path) -> tuple[str, int]:
    """The parked run's id and the row id of its write intent."""
    # closed at once: a connection left to the GC would checkpoint into the file later
    with closing(sqlite3.connect(db)) as conn, conn:
        [(run_id,)] = conn.execute("SELECT run_id FROM open_runs").fetchall()
        [(rowid,)] = conn.execute(
            "SELECT id FROM entries WHERE run_id = ? AND entry_type = 'tool_intent' AND "
            "json_extract(data, '$.effect') = 'write'", (run_id,)).fetchall()
    return run_id, rowid


def root_page(db: Path, name: str) -> int:
    # closed at once: a connection left to the GC would checkpoint into the file later
    with closing(sqlite3.connect(db)) as conn, conn:
        return int(conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?",
                                (name,)).fetchone()[0])


def flip(db: Path, at: int) -> None:
    data = bytearray(db.read_bytes())
    data[at] ^= 0x01
    db.write_bytes(bytes(data))


def intent_at(db: Path) -> int:
    """Where the write intent's data starts in the file: a record's columns lie side by side,
    its run id right before its data (the data alone may repeat another run's)."""
    run_id, rowid = waiting_run(db)
    with closing(sqlite3.connect(db)) as conn, conn:
        [(data,)] = conn.execute("SELECT data FROM entries WHERE id = ?", (rowid,)).fetchall()
    return db.read_bytes().index(run_id.encode() + data.encode()) + len(run_id)


def intent_bytes(db: Path) -> None:
    """One bit of the write intent's data, in the entries table."""
    flip(db, intent_at(db) + 3)


def run_index_entry(db: Path) -> None:
    """The run index's pointer to the write intent now points at another row: a start would
    rebuild the run without its intent (quick_check does not compare indexes with tables)."""
    run_id, rowid = waiting_run(db)
    key = run_id[:KEY_CHARS].encode()  # the index holds the id's first characters
    page = root_page(db, "entries_by_run")
    data = db.read_bytes()
    at = data.index(key + bytes([rowid]), (page - 1) * PAGE, page * PAGE)
    flip(db, at + len(key))


def open_run_state(db: Path) -> None:
    """A bit of the open run's state in its index row ('waiting')."""
    page = root_page(db, "open_runs")
    data = db.read_bytes()
    flip(db, data.index(b"waiting", (page - 1) * PAGE, page * PAGE) + 4)


def open_run_row_lost(db: Path) -> None:
    """The open runs index loses the parked run (its event is still queued)."""
    # closed at once: a connection left to the GC would checkpoint into the file later
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("DELETE FROM open_runs")


def entries_page(db: Path) -> None:
    """The page holding the write intent overwritten with garbage."""
    page = intent_at(db) // PAGE
    data = bytearray(db.read_bytes())
    data[page * PAGE:(page + 1) * PAGE] = b"\xa5" * PAGE
    db.write_bytes(bytes(data))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "intent-bytes": intent_bytes, "run-index-entry": run_index_entry,
    "open-run-state": open_run_state, "open-run-row-lost": open_run_row_lost,
    "entries-page": entries_page,
}
EXPECTED = {
    "intent-bytes": r"entry crashy:\d+ \(tool_intent\) is corrupt: checksum mismatch",
    "run-index-entry": r"the run index misses entries of run \w+ of 'crashy': recovery would "
                       r"not read crashy:\d+",
    "open-run-state": r"open run \w+ of 'crashy' has an unknown state 'waithng'",
    "open-run-row-lost": r"run \w+ of 'crashy' \(started at entry crashy:\d+\) is unfinished "
                         r"but not in the open runs index",
    "entries-page": r"SQLite('s quick_check failed| cannot read it)",
}


@pytest.fixture(params=list(DAMAGE))
def damaged(request: pytest.FixtureRequest, parked: Path, tmp_path: Path) -> tuple[Path, str]:
    folder = tmp_path / "run"
    shutil.copytree(parked, folder)
    DAMAGE[request.param](folder / "journal.db")
    return folder, request.param


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_the_damage_is_found_and_the_start_refused_leaving_the_file_alone(
        damaged: tuple[Path, str]) -> None:
    folder, kind = damaged
    db = folder / "journal.db"
    before, files = digest(db), sorted(folder.iterdir())
    [problem, *_] = find_damage(db)
    assert re.search(EXPECTED[kind], problem), problem
    # The default, recover_on_start: strict, and strict winning over start_fresh.
    for strict, fresh in ((False, False), (True, False), (True, True)):
        journal = SQLiteJournal(db, strict=strict, start_fresh=fresh)
        with pytest.raises(DamagedJournal) as refused:
            await journal.open()
        message = str(refused.value)
        assert message.startswith(f"journal {db} is damaged where a start reads it: ")
        assert f"'promptui journal salvage {db}' writes a new journal" in message
        assert f"'promptui journal verify -j {db}' shows the damage" in message
        assert "on_damage: start_fresh" in message
        assert refused.value.moved_to is None and journal.damage is None
    assert digest(db) == before and sorted(folder.iterdir()) == files  # not even a -shm
    assert not offline.verify(db).ok  # what the message sends the operator to


def test_the_write_never_runs_again(damaged: tuple[Path, str]) -> None:
    folder, _ = damaged
    before = ledger(folder)
    for setting in ((), ("--recover", "strict"), ("--recover", "false")):
        refused = worker(folder, *setting)  # the default refuses, whether it recovers or not
        assert refused.returncode == 1, (setting, refused.stderr)
        assert "is damaged where a start reads it" in refused.stderr
        assert "promptui journal salvage" in refused.stderr
    assert ledger(folder) == before
    # Knowingly, for availability: the file is moved aside, the process starts fresh.
    fresh = worker(folder, "--on-damage", "start_fresh")
    assert fresh.returncode == 0, fresh.stderr
    assert "starting a fresh journal" in fresh.stderr
    [moved] = [p for p in folder.glob("journal.db.damaged-*")
               if not p.name.endswith(("-wal", "-shm"))]
    assert f"rescue it with 'promptui journal salvage {moved}'" in fresh.stderr
    assert moved.stat().st_size > 0 and find_damage(moved)  # kept, as it was
    assert '"waiting": []' in fresh.stdout
    assert ledger(folder) == before  # the parked write never ran a second time


def test_a_journal_that_is_not_one_is_refused_and_moved_aside_only_on_request(
        parked: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    shutil.copytree(parked, folder)
    db = folder / "journal.db"
    data = bytearray(db.read_bytes())
    data[:16] = b"not a database!!"
    db.write_bytes(bytes(data))
    for setting in ((), ("--recover", "strict"),
                    ("--recover", "strict", "--on-damage", "start_fresh")):
        refused = worker(folder, *setting)
        assert refused.returncode == 1 and "cannot be read" in refused.stderr, setting
        assert f"'promptui journal salvage {db}'" in refused.stderr
    assert db.read_bytes() == bytes(data) and not list(folder.glob("*.damaged-*"))
    moved = worker(folder, "--on-damage", "start_fresh")
    assert moved.returncode == 0, moved.stderr
    assert [p.read_bytes()[:16] for p in folder.glob("journal.db.damaged-*")
            if not p.name.endswith(("-wal", "-shm"))] == [b"not a database!!"]
    assert "it held 1 queued event(s), 1 run(s) waiting for an operator" in moved.stderr, \
        moved.stderr
    assert ledger(folder) == ledger(parked)


async def test_processes_sharing_a_file_start_fresh_only_if_all_say_so(
        parked: Path, tmp_path: Path) -> None:
    """One process that would start fresh must not have a file moved aside that another one
    on the same file recovers from."""
    folder = tmp_path / "run"
    shutil.copytree(parked, folder)
    db = folder / "journal.db"
    open_run_row_lost(db)
    runtime = AgentRuntime()
    for name, on_damage in (("careless", "start_fresh"), ("crashy", "refuse")):
        runtime.add_process(name, ProcessConfig.model_validate({"model": "echo", "journal": {
            "level": "checkpoint", "path": str(db), "on_damage": on_damage}}))
    with pytest.raises(DamagedJournal, match="damaged where a start reads it"):
        runtime.check_journals()
    with pytest.raises(JournalError):
        await runtime.start_all()
    await runtime.close()
    assert not list(folder.glob("*.damaged-*"))


async def test_a_sound_journal_passes_and_keeps_its_waiting_run(parked: Path,
                                                                tmp_path: Path) -> None:
    folder = tmp_path / "run"
    shutil.copytree(parked, folder)
    db = folder / "journal.db"
    assert find_damage(db) == [] and offline.verify(db).ok
    journal = SQLiteJournal(db)
    journal.preflight()
    await journal.open()
    try:
        assert journal.damage is None
        assert [r.state for r in await journal.open_runs("crashy")] == ["waiting"]
    finally:
        await journal.close()


def test_damage_in_old_history_neither_stops_a_start_nor_hides_from_verify(
        tmp_path: Path) -> None:
    """A start reads the tail of the history (and checks only that), so its cost does not grow
    with the journal; a garbage page among entries older than the last checkpoint does not stop
    it, and 'journal verify', which reads everything, still finds it."""
    folder = tmp_path / "run"
    folder.mkdir()
    assert worker(folder, "--inject", "120", "--prefix", "old").returncode == 0
    db = folder / "journal.db"
    with closing(sqlite3.connect(db)) as conn, conn:
        [(data,)] = conn.execute("SELECT data FROM entries WHERE id = 3").fetchall()
        [(checkpoint,)] = conn.execute(
            "SELECT MAX(id) FROM entries WHERE entry_type = 'checkpoint'").fetchall()
    assert checkpoint > 200  # the damaged page lies far before it
    page = db.read_bytes().index(data.encode()) // PAGE
    damaged = bytearray(db.read_bytes())
    damaged[page * PAGE:(page + 1) * PAGE] = b"\xa5" * PAGE
    db.write_bytes(bytes(damaged))
    assert find_damage(db) == []
    before = ledger(folder)
    again = worker(folder, "--inject", "2", "--prefix", "new")
    assert again.returncode == 0, again.stderr
    after = ledger(folder)
    assert after[:len(before)] == before and len(after) == len(before) + 2
    assert len(set(after)) == len(after)  # no write ran twice
    report = offline.verify(db)
    assert not report.ok and report.problems
