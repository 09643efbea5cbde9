"""The journal's files are its user's alone (issue 32): a lock link planted in the folder is
refused and its target never written; a folder other users can write is refused (sticky /tmp
style folders allowed); the journal, its -wal, -shm and lock are 0600 after a real start and a
few writes, and an older journal left 0644 is made private when a writer opens it."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.journal import JournalEntry, SQLiteJournal
from runtime_core.journal.sqlite.lock import JournalPathError, lock_path
from runtime_core.memory.sqlite_store import SQLiteMemory
from tests.helpers.polling import wait_for


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The umask most users have (022): files SQLite makes on its own would be 0644."""
    before = os.umask(0o022)
    yield
    os.umask(before)


async def test_a_lock_link_planted_before_the_start_is_refused_and_not_followed(
        tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's file\n")
    db = tmp_path / "j.db"
    lock_path(db).symlink_to(victim)  # the attack: planted before the runtime starts
    config = ProcessConfig(model={"turns": [{"reply": "hi"}]},
                           journal={"level": "checkpoint", "path": str(db)})
    process = AgentProcess("planted", config)
    with pytest.raises(JournalPathError) as refused:
        await process.start()
    message = str(refused.value)
    assert f"lock file {lock_path(db)}" in message and "symbolic link" in message
    assert f"rm {lock_path(db)}" in message and "\n" not in message
    assert victim.read_text() == "someone's file\n"  # its target never written
    assert lock_path(db).is_symlink()  # left for the operator to look at


@pytest.mark.parametrize("loose", [0o777, 0o770, 0o707, 0o720], ids=oct)
async def test_a_journal_folder_others_can_write_is_refused(tmp_path: Path, loose: int) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(loose)  # chmod o+w / g+w: another user could swap the journal's files
    journal = SQLiteJournal(folder / "j.db")
    with pytest.raises(JournalPathError) as refused:
        await journal.open()
    assert f"chmod go-w {folder}" in str(refused.value)
    assert f"folder {folder} of journal" in str(refused.value)
    assert not (folder / "j.db").exists() and not lock_path(folder / "j.db").exists()


async def test_a_sticky_folder_like_tmp_is_allowed(tmp_path: Path) -> None:
    folder = tmp_path / "sticky"
    folder.mkdir()
    folder.chmod(0o1777)  # /tmp: nobody removes or renames another user's files there
    journal = SQLiteJournal(folder / "j.db")
    await journal.open()
    await journal.append(JournalEntry("p", "note", {"n": 1}))
    await journal.close()


async def test_a_folder_the_start_makes_is_private(tmp_path: Path) -> None:
    old = os.umask(0o002)  # a user-private-group umask would make it 0775, then refuse it
    try:
        journal = SQLiteJournal(tmp_path / "new" / "j.db")
        await journal.open()
        await journal.close()
    finally:
        os.umask(old)
    assert mode_of(tmp_path / "new") == 0o700


async def test_journal_wal_shm_and_lock_are_0600_after_a_start_and_writes(
        tmp_path: Path, usual_umask: None) -> None:
    db = tmp_path / "j.db"
    config = ProcessConfig(model={"turns": [{"reply": "hi"}]},
                           journal={"level": "full", "path": str(db)})
    async with AgentProcess("private", config) as process:
        for i in range(3):
            await process.inject(TriggerEvent("t", "manual", {"secret": f"payload {i}"}))
        await wait_for(lambda: process.invocation_count == 3)
        files = [db, db.with_name("j.db-wal"), db.with_name("j.db-shm"), lock_path(db)]
        assert {f.name: mode_of(f) for f in files} == {f.name: 0o600 for f in files}
    assert mode_of(db) == 0o600


async def test_an_older_journal_left_0644_is_made_private_and_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "j.db"
    journal = SQLiteJournal(db)
    await journal.open()
    await journal.append(JournalEntry("p", "note", {"n": 1}))
    await journal.close()
    db.chmod(0o644)  # as a promptui before 0600 made it
    with caplog.at_level(logging.WARNING):
        journal = SQLiteJournal(db)
        await journal.open()
        try:
            assert mode_of(db) == 0o600
            assert mode_of(db.with_name("j.db-wal")) == 0o600
        finally:
            await journal.close()
    assert any("readable by other users" in r.getMessage() and str(db) in r.getMessage()
               for r in caplog.records)


async def test_the_long_term_memory_file_is_0600(tmp_path: Path, usual_umask: None) -> None:
    store = SQLiteMemory("p", tmp_path / "memory.db")
    await store.open()
    try:
        await store.add("the door code is 1234")
        assert mode_of(tmp_path / "memory.db") == 0o600
        assert mode_of(tmp_path / "memory.db-wal") == 0o600
    finally:
        await store.close()
