"""One writer per journal file. A second runtime on the same SQLite journal (another OS process,
or another journal object in this one) is refused with who holds it, and the holder goes on
undisturbed; a holder killed with SIGKILL does not block the next start; readers (logs, status,
verify) never take the lock; offline rewind and fork write, so they are refused too."""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime_core import AgentRuntime, ProcessConfig
from runtime_core.control import offline
from runtime_core.journal import JournalEntry, JournalError, ReadFilter, SQLiteJournal
from runtime_core.journal.sqlite.lock import JournalLocked, lock_path, read_holder

ROOT = Path(__file__).resolve().parents[2]
SINCE = r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"

# A runtime's journal in another OS process: it holds the file, appends on request.
HOLDER = textwrap.dedent("""\
    import asyncio, sys
    from runtime_core.journal import JournalEntry, SQLiteJournal

    async def main() -> None:
        journal = SQLiteJournal(sys.argv[1])
        await journal.open()
        await journal.append(JournalEntry("held", "note", {"n": 0}))
        print("HELD", flush=True)
        loop = asyncio.get_running_loop()
        n = 0
        while (line := await loop.run_in_executor(None, sys.stdin.readline)).strip():
            n += 1
            entry = await journal.append(JournalEntry("held", "note", {"n": n}))
            print("APPENDED", entry.seq, flush=True)
        await journal.close()
        print("CLOSED", flush=True)

    asyncio.run(main())
""")


class Holder:
    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.line() == "HELD"

    def line(self, timeout: float = 30.0) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            pytest.fail(f"the holder said nothing for {timeout}s")
        return self.proc.stdout.readline().strip()

    def append(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write("append\n")
        self.proc.stdin.flush()
        kind, seq = self.line().split()
        assert kind == "APPENDED"
        return int(seq)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Holder]:
    held = Holder(tmp_path / "journal.db")
    try:
        yield held
    finally:
        held.kill()


def held_message(path: Path, pid: int) -> str:
    return (rf"journal {re.escape(str(path))} is held by pid {pid} on host "
            rf"{re.escape(socket.gethostname())} {SINCE}; stop that runtime first, or use "
            r"another --journal$")


@pytest.mark.slow
async def test_a_second_os_process_reads_but_cannot_write_and_the_first_goes_on(
        tmp_path: Path, holder: Holder) -> None:
    path = tmp_path / "journal.db"
    second = SQLiteJournal(path)
    await second.open()  # another runtime holds the file: this one only reads
    try:
        assert isinstance(second.read_only, JournalLocked)
        assert second.read_only.holder is not None
        assert second.read_only.holder.pid == holder.proc.pid
        assert [e.data["n"] for e in await second.read(ReadFilter(process="held"))] == [0]
        with pytest.raises(JournalLocked, match=held_message(path, holder.proc.pid)) as refused:
            await second.append(JournalEntry("held", "note", {"n": 99}))
        assert isinstance(refused.value, JournalError)
        with pytest.raises(JournalLocked, match=held_message(path, holder.proc.pid)):
            second.preflight()  # a command that would write fails before it starts
        # The holder is not disturbed: its appends go on, in one unbroken chain, and the
        # reader sees each one once it is committed.
        assert [holder.append() for _ in range(3)] == [2, 3, 4]
        assert [e.seq for e in await second.read(ReadFilter(process="held"))] == [1, 2, 3, 4]
    finally:
        await second.close()
    assert not second.is_open
    assert [e.seq for e in offline.read_entries(path, "held")] == [1, 2, 3, 4]
    assert offline.verify(path).ok
    assert not list(tmp_path.glob("*.damaged-*"))  # nothing was moved aside either
    assert holder.append() == 5  # closing the reader left the holder's lock alone


@pytest.mark.slow
async def test_readers_do_not_take_the_lock(tmp_path: Path, holder: Holder) -> None:
    """promptui logs, status and journal verify read while a server runs."""
    path = tmp_path / "journal.db"
    holder.append()
    assert [e.data["n"] for e in offline.read_entries(path, "held")] == [0, 1]
    assert offline.process_names(path) == ["held"]
    assert offline.verify(path).ok
    assert offline.recent_entries(path, "held", 1)[0].seq == 2
    assert holder.append() == 3  # and the holder never noticed


@pytest.mark.slow
async def test_offline_rewind_and_fork_are_refused_while_a_runtime_holds_the_journal(
        tmp_path: Path, holder: Holder) -> None:
    path = tmp_path / "journal.db"
    message = held_message(path, holder.proc.pid)
    with pytest.raises(JournalLocked, match=message):
        await offline.rewind(path, "held", "held:1", "both")
    with pytest.raises(JournalLocked, match=message):
        await offline.rewind_plan(path, "held", "held:1", "both")
    with pytest.raises(JournalLocked, match=message):
        await offline.fork(path, "held", "held:1", "copy")
    assert offline.process_names(path) == ["held"]  # nothing was written
    assert holder.append() == 2


@pytest.mark.slow
async def test_a_holder_killed_with_sigkill_does_not_block_the_next_start(
        tmp_path: Path, holder: Holder) -> None:
    path = tmp_path / "journal.db"
    holder.kill()
    stale = read_holder(path)  # the dead holder's note is still there...
    assert stale is not None and stale.pid == holder.proc.pid
    journal = SQLiteJournal(path)
    await journal.open()  # ...but the kernel dropped its lock with the process
    try:
        taken = read_holder(path)
        assert taken is not None and taken.pid == os.getpid()
        assert (await journal.append(JournalEntry("held", "note", {"n": 1}))).seq == 2
    finally:
        await journal.close()
    assert not lock_path(path).exists()  # a clean close leaves no lock file behind


@pytest.mark.slow
async def test_a_clean_close_lets_the_next_runtime_in(tmp_path: Path, holder: Holder) -> None:
    path = tmp_path / "journal.db"
    assert holder.proc.stdin is not None
    holder.proc.stdin.write("\n")  # an empty line: close the journal
    holder.proc.stdin.flush()
    assert holder.line() == "CLOSED"
    journal = SQLiteJournal(path)
    await journal.open()  # while the holder's process still runs
    try:
        assert holder.proc.poll() is None or holder.proc.returncode == 0
        assert [e.seq for e in await journal.read(ReadFilter(process="held"))] == [1]
    finally:
        await journal.close()


async def test_a_second_journal_object_in_the_same_process_reads_but_cannot_write(
        tmp_path: Path) -> None:
    """Each object counts seqs on its own, so two writers on one file would collide: one
    writing object per file (AgentRuntime shares one among its processes). A second object
    opened to read while a process runs (to list entries and pick one to rewind to) reads
    what the first committed; a write through it is refused, saying what to do."""
    path = tmp_path / "journal.db"
    first = SQLiteJournal(path)
    await first.open()
    try:
        await first.append(JournalEntry("p", "note", {}))
        second = SQLiteJournal(path)
        await second.open()
        locked = (rf"journal {re.escape(str(path))} is already open in this process \(pid "
                  rf"{os.getpid()}\) by another journal object; share that one")
        assert [e.seq for e in await second.read(ReadFilter(process="p"))] == [1]
        with pytest.raises(JournalLocked, match=locked):
            await second.append(JournalEntry("p", "note", {}))
        with pytest.raises(JournalLocked, match=locked):
            second.preflight()
        assert (await first.append(JournalEntry("p", "note", {}))).seq == 2
        assert [e.seq for e in await second.read(ReadFilter(process="p"))] == [1, 2]
        await second.close()
    finally:
        await first.close()
    second.preflight()  # the file is free again
    await second.open()
    try:
        assert (await second.append(JournalEntry("p", "note", {}))).seq == 3
    finally:
        await second.close()


def journaled(path: Path, **journal: object) -> ProcessConfig:
    return ProcessConfig.model_validate(
        {"model": "echo", "journal": {"level": "checkpoint", "path": str(path), **journal}})


async def test_processes_of_one_runtime_share_the_file_a_second_runtime_is_refused(
        tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    runtime = AgentRuntime()
    runtime.add_process("a", journaled(path))
    runtime.add_process("b", journaled(tmp_path / "." / "journal.db"))  # the same file
    runtime.check_journals()
    await runtime.start_all()
    other = AgentRuntime()
    other.add_process("c", journaled(path))
    try:
        assert {p["state"] for p in runtime.list_processes()} == {"running"}
        with pytest.raises(JournalLocked, match="already open in this process"):
            other.check_journals()
        with pytest.raises(JournalLocked):
            await other.start_all()
        assert other.get_process("c").state.value == "failed"
    finally:
        await runtime.close()
        await other.close()
    other.check_journals()  # free once the first runtime closed
