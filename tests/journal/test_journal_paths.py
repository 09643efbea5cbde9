"""A journal path that cannot hold a journal (a folder, a parent that is a file or cannot be
made, a folder that cannot be written) fails at open with one line naming the path and what to
do; a missing parent folder is made, as a first start expects.

Root ignores permissions, so the read-only cases that must also hold as root use /sys, where
even root can neither make a folder nor create a file; the permission-bit cases run only as a
normal user."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from runtime_core.journal import JournalEntry, JournalError, ReadFilter, SQLiteJournal
from runtime_core.journal.sqlite.lock import JournalPathError

AS_ROOT = os.geteuid() == 0
needs_sys = pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux /sys")
not_root = pytest.mark.skipif(AS_ROOT, reason="root ignores permission bits")


async def refused(path: Path) -> str:
    journal = SQLiteJournal(path)
    with pytest.raises(JournalError) as info:
        journal.preflight()  # the command line's check, before anything starts
    with pytest.raises(JournalError) as again:
        await journal.open()
    assert str(again.value) == str(info.value)
    assert not journal.is_open
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


async def test_a_folder_is_not_a_journal(tmp_path: Path) -> None:
    folder = tmp_path / "journal.db"
    folder.mkdir()
    message = await refused(folder)
    assert message == (f"journal path {folder} is a folder, not a file; give a file such as "
                       f"{folder / 'journal.db'}, or use another --journal")
    assert list(folder.iterdir()) == []


async def test_a_parent_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("not a folder")
    path = tmp_path / "state" / "deeper" / "journal.db"
    message = await refused(path)
    assert message == (f"cannot make the folder {path.parent} for journal {path}: "
                       f"{tmp_path / 'state'} is a file, not a folder; move that file, or use "
                       "another --journal")
    assert (tmp_path / "state").read_text() == "not a folder"


@needs_sys
async def test_a_folder_that_cannot_be_made_even_as_root(tmp_path: Path) -> None:
    path = Path("/sys/promptui-journal-test/journal.db")
    message = await refused(path)
    assert message.startswith(f"cannot make the folder {path.parent} for journal {path}: ")
    assert message.endswith("; create it (writable by this user), or use another --journal")


@needs_sys
async def test_a_folder_that_cannot_be_written_even_as_root(tmp_path: Path) -> None:
    path = Path("/sys/journal.db")
    message = await refused(path)
    assert message.startswith(f"cannot write in the folder /sys of journal {path}: ")
    assert message.endswith("; make it writable by this user, or use another --journal")


@not_root
async def test_a_read_only_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        message = await refused(folder / "journal.db")
        assert message.startswith(f"cannot write in the folder {folder} of journal ")
    finally:
        folder.chmod(stat.S_IRWXU)


@not_root
async def test_a_read_only_journal_file(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    await journal.open()
    await journal.append(JournalEntry("p", "note", {}))
    await journal.close()
    path.chmod(stat.S_IRUSR)
    try:
        message = await refused_at_open(path)
        assert message.startswith(f"cannot open journal {path} for writing: ")
    finally:
        path.chmod(stat.S_IRUSR | stat.S_IWUSR)


async def refused_at_open(path: Path) -> str:
    journal = SQLiteJournal(path)
    with pytest.raises(JournalError) as info:
        await journal.open()
    assert not journal.is_open
    return str(info.value)


async def test_missing_parent_folders_are_made(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "journal.db"
    journal = SQLiteJournal(path)
    journal.preflight()
    await journal.open()
    try:
        assert (await journal.append(JournalEntry("p", "note", {}))).seq == 1
        assert len(await journal.read(ReadFilter(process="p"))) == 1
    finally:
        await journal.close()


def test_the_path_errors_are_journal_errors() -> None:
    assert issubclass(JournalPathError, JournalError)
