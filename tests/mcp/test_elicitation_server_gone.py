"""An MCP server that dies while its question waits for the operator: the question is cut off
and journaled as answered cancel by "server went away" (naming the server and why), not by
"process stopped", while the process runs on; a stop of the process is still told apart.

Our asking server (tests/helpers/workers/asking_server.py) runs as a real subprocess, over
stdio and over streamable HTTP; the test SIGKILLs it while its ``book`` tool waits on an
elicitation."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime_core import TriggerEvent
from runtime_core.journal import InMemoryJournal
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import ReadFilter
from runtime_core.lifecycle import ProcessState
from tests.helpers.elicitation import BOOK, CONNECT, config, started, waiting_question
from tests.helpers.polling import wait_for
from tests.helpers.workers import ASKING_SERVER

pytestmark = pytest.mark.slow


def asking_server_pids() -> list[int]:
    """The pids of our asking servers that this test process started (its children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if str(ASKING_SERVER).encode() in command and parent == os.getpid():
            found.append(int(entry.name))
    return found


async def answered(journal: InMemoryJournal) -> list[dict[str, Any]]:
    return [e.data for e in await journal.read(ReadFilter(
        process="p", entry_type=EntryType.ELICITATION_ANSWERED))]


def asking(process: Any) -> bool:
    return any(r.waiting_reason == "elicitation" for r in process.waiting_runs())


async def test_a_server_killed_mid_question_is_said_to_have_gone_away() -> None:
    async with started(config(BOOK, {"reply": "ok"})) as (process, _, journal):
        await process.inject(TriggerEvent("t", "manual", {}))
        await waiting_question(process)
        (pid,) = asking_server_pids()
        os.kill(pid, signal.SIGKILL)
        await wait_for(lambda: not asking(process), 20, "the question to be cut off")
        # the cut's answer is submitted without waiting for its commit
        found = await wait_for(lambda: answered(journal), 10, "the answer to be journaled")
        assert [(a["server"], a["action"], a["actor"]) for a in found] == [
            ("asking", "cancel", "server went away")]
        assert "MCP server 'asking' went away" in found[0]["reason"]
        assert "the server closed the connection" in found[0]["reason"]
        assert process.state is ProcessState.RUNNING  # the process runs on
        # the book call was a write cut off with the server: its run waits for an operator
        assert [r.waiting_reason for r in process.waiting_runs()] == ["unknown_write_outcome"]
        await wait_for(lambda: asking_server_pids() and asking_server_pids() != [pid], 30,
                       "the link to start the server again")


async def test_a_server_over_http_killed_mid_question_is_said_to_have_gone_away() -> None:
    server = subprocess.Popen([sys.executable, str(ASKING_SERVER), "--http"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(server.stdout.readline), CONNECT)
        assert line.startswith("LISTENING "), line
        cfg = config(BOOK, {"reply": "ok"})
        cfg["servers"] = {"asking": {"type": "http", "url": line.split()[1],
                                     "timeout": CONNECT}}
        async with started(cfg) as (process, _, journal):
            await process.inject(TriggerEvent("t", "manual", {}))
            await waiting_question(process)
            server.kill()
            server.wait(10)
            await wait_for(lambda: not asking(process), 30, "the question to be cut off")
            found = await wait_for(lambda: answered(journal), 10, "the answer journaled")
            assert [(a["action"], a["actor"]) for a in found] == [
                ("cancel", "server went away")]
            assert "MCP server 'asking' went away" in found[0]["reason"]
            assert process.state is ProcessState.RUNNING
    finally:
        server.kill()
        server.wait(10)


async def test_a_stop_mid_question_is_not_taken_for_the_server_going_away() -> None:
    async with started({**config(BOOK, {"reply": "ok"}), "drain_timeout": 20}) as (
            process, _, journal):
        await process.inject(TriggerEvent("t", "manual", {}))
        await waiting_question(process)
        await asyncio.wait_for(process.stop(), 20)  # its server exits with the link
        assert not asking(process) and asking_server_pids() == []
        found = await answered(journal)
        assert [(a["action"], a["actor"]) for a in found] == [("cancel", "process stopping")]
