"""A journal that cannot be written for a while (an outside program holds SQLite's write lock
past the busy timeout; the disk is full) is degraded, visibly, and heals by itself: the
processes on it say so in status(), events are refused with the reason, nothing acknowledged is
lost, and once a commit succeeds again everything goes on without a restart."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from runtime_core import AgentProcess, AgentRuntime, ProcessConfig, TriggerEvent
from runtime_core.journal import SQLiteJournal
from tests.helpers.events import record
from tests.helpers.polling import wait_for
from tests.helpers.serving import TOKEN, served
from tests.helpers.write_lock import write_lock_held

ECHO = ProcessConfig(model="echo", journal={"level": "checkpoint"})


async def test_a_held_write_lock_degrades_the_journal_and_it_heals_by_itself(
        tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path, busy_timeout_ms=100)
    process = AgentProcess("p", ECHO, journal=journal)
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {"n": 0}))
    await wait_for(lambda: process.invocation_count == 1)
    await journal.flush()

    with write_lock_held(path):
        first = asyncio.create_task(process.inject(TriggerEvent("t", "manual", {"n": 1})))
        await wait_for(lambda: process.status().get("journal_fault") is not None, 10,
                       "the journal to say it is degraded")
        status = process.status()
        assert "database is locked" in status["journal_fault"]
        assert not first.done()  # not acknowledged: it is not durable yet
        # A new event is refused with the reason, never half-accepted; its dead letter is
        # reported only once the journal has it.
        assert await process.inject(TriggerEvent("t", "manual", {"n": 2})) is False
        assert process.dead_letters == [] and process.status()["dead_letter_count"] == 0
    # The lock is gone: the writer's next try commits, with nobody restarting anything.
    assert await asyncio.wait_for(first, 10) is True
    await wait_for(lambda: process.dead_letters, 10, "the refused event's dead letter")
    letter = process.dead_letters[-1]
    assert letter["reason"] == "journal unavailable"
    assert "database is locked" in letter["error"] and str(path) in letter["error"]
    await wait_for(lambda: process.status().get("journal_fault") is None, 10)
    await wait_for(lambda: process.invocation_count == 2, what="the held event to run")
    assert await process.inject(TriggerEvent("t", "manual", {"n": 3})) is True
    await wait_for(lambda: process.invocation_count == 3)
    await process.stop()
    await journal.close()

    reader = SQLiteJournal(path)
    await reader.open()
    try:  # the refused event is a dead letter, kept in the journal for redelivery
        kept = await reader.dead_letters("p")
        assert [d.event["payload"] for d in kept] == [{"n": 2}]
    finally:
        await reader.close()


@pytest.mark.slow
async def test_the_runtime_announces_the_fault_and_health_answers_503(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    runtime = AgentRuntime()
    runtime.add_process("p", ProcessConfig(model="echo", journal={"level": "checkpoint",
                                                                  "path": str(path)}))
    journal = runtime.get_process("p").journal
    assert isinstance(journal, SQLiteJournal)
    journal.busy_timeout_ms = 100  # the shared journal opens with it
    faults = []
    runtime.notifier.add_callback(lambda e: faults.append(e) if e.kind == "journal.fault"
                                  else None)
    async with served(runtime) as url, httpx.AsyncClient(
            base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        assert (await client.get("/health")).json() == {"status": "ok"}
        process = runtime.get_process("p")
        with write_lock_held(path):
            process.context.put("k", 1)  # a context update the writer cannot commit
            await wait_for(lambda: bool(runtime.journal_faults()), 10)
            answer = await client.get("/health")
            assert answer.status_code == 503 and answer.headers["Retry-After"]
            [(where, why)] = answer.json()["journal_faults"].items()
            assert where == str(path) and "database is locked" in why
            info = (await client.get("/runtime")).json()
            assert "database is locked" in info["journal_faults"][str(path)]
            [row] = (await client.get("/processes")).json()
            assert "database is locked" in row["journal_fault"]
            refused = await client.post("/processes/p/inject", json={"payload": {}})
            assert refused.status_code == 503 and "database is locked" in refused.text
        await wait_for(lambda: not runtime.journal_faults(), 10)
        assert (await client.get("/health")).json() == {"status": "ok"}
    assert [bool(e.reason) for e in faults] == [True, False]
    assert faults[0].processes == ("p",) and faults[0].path == str(path)


def _mount_tmpfs(where: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real, small filesystem (tmpfs) to fill up: the disk-full case as it happens."""
    where = tmp_path / "disk"
    if not _mount_tmpfs(where, "2m"):
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.slow
async def test_a_full_disk_degrades_the_journal_loses_nothing_and_heals(
        small_disk: Path) -> None:
    path = small_disk / "journal.db"
    journal = SQLiteJournal(path)
    process = AgentProcess("p", ECHO, journal=journal)
    events = record(process)
    await process.start()
    filler = small_disk / "filler"
    with filler.open("wb", buffering=0) as handle:  # fill the disk to the last byte
        for chunk in (65536, 512):
            with contextlib.suppress(OSError):
                while True:
                    handle.write(b"\0" * chunk)
    accepted: list[int] = []

    async def send(n: int) -> None:
        if await process.inject(TriggerEvent("t", "manual", {"n": n, "pad": "x" * 4000})):
            accepted.append(n)

    senders = [asyncio.create_task(send(n)) for n in range(3)]
    await wait_for(lambda: process.status().get("journal_fault") is not None, 20,
                   "the journal to say the disk is full")
    assert "disk full" in process.status()["journal_fault"]
    assert await process.inject(TriggerEvent("t", "manual", {"n": 99})) is False
    filler.unlink()  # an operator frees space
    await asyncio.wait_for(asyncio.gather(*senders), 20)
    await wait_for(lambda: process.status().get("journal_fault") is None, 20)
    await wait_for(lambda: process.invocation_count == len(accepted), 20)
    assert sorted(accepted) == [0, 1, 2]  # nothing acknowledged was lost
    # A run's end is announced once it is durable.
    await wait_for(lambda: len([e for e in events if e.kind == "run.finished"]) == 3, 20)
    await process.stop()
    await journal.close()
