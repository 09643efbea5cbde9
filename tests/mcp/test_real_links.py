"""Links that come back, against the reference servers from the npm registry (pinned:
tests/helpers/mcp.py), through AgentProcess with a scripted model:

(a) server-everything over streamable HTTP restarted between two calls: the next call succeeds on
    a new session;
(b) a server that refuses a connect attempt and comes back is connected again by the backoff, and
    a later run's call succeeds (server-everything over HTTP, server-memory over stdio);
(c) a write cut off mid-flight (server-everything killed during ``gzip-file-as-resource``, held up
    by a URL that never answers): the run waits with unknown_write_outcome, the write is never
    sent again, and reconciling it ``applied`` finishes the run;
(d) the call timeout: on that write it parks the run; on a read
    (``trigger-long-running-operation``) the model reads "interrupted".

Skipped, with the reason, where node or npm is missing or the install fails."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import ReadFilter
from runtime_core.runs.run import Run
from tests.helpers.mcp import HttpServer, NpmServers
from tests.helpers.polling import wait_for

pytestmark = pytest.mark.slow

CONNECT = 60.0  # a cold node server on a slow CI box
ATTEMPT = re.compile(r"reconnecting \(attempt (\d+)")


def scripted(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"provider": "scripted", "turns": list(turns)}


def call(tool: str, /, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "args": args}]}


def http(server: HttpServer, **extra: Any) -> dict[str, Any]:
    return {"type": "http", "url": server.url, "timeout": CONNECT, **extra}


def link(process: AgentProcess) -> dict[str, Any]:
    return dict(process.status()["servers"][0])


def attempt(process: AgentProcess) -> int:
    found = ATTEMPT.match(str(link(process).get("link", "")))
    return int(found.group(1)) if found else 0


async def run_once(process: AgentProcess, count: int) -> Run:
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: len(process.recent_runs()) == count, 60, f"run {count}")
    return process.recent_runs()[-1]


def tool_steps(run: Run) -> list[str]:
    return [s.result for s in run.steps if s.kind == "tool"]


async def test_a_restart_of_the_http_server_between_two_calls_is_a_new_session(
        everything_server: HttpServer) -> None:
    process = AgentProcess("p", ProcessConfig(
        model=scripted(call("echo", message="before"), {"reply": "ok"}),
        servers={"everything": http(everything_server)}))
    await process.start()
    try:
        first = await run_once(process, 1)
        assert tool_steps(first) == ["Echo: before"], first.steps
        await everything_server.restart()  # a new process: the session is gone
        second = await run_once(process, 2)
        assert second.state.value == "succeeded" and tool_steps(second) == ["Echo: before"]
        assert link(process)["connections"] == 2 and link(process)["link"] == "connected"
    finally:
        await process.close()


async def test_an_http_server_that_refuses_connects_is_back_after_the_backoff(
        everything_server: HttpServer) -> None:
    process = AgentProcess("p", ProcessConfig(
        model=scripted(call("echo", message="hello"), {"reply": "ok"}),
        servers={"everything": http(everything_server, call_timeout=1.5)}))
    await process.start()
    try:
        await everything_server.kill()
        down = await run_once(process, 1)  # the call waits for the link, then is not sent
        [shown] = tool_steps(down)
        assert "'echo' was not sent" in shown and "connection refused" in shown, shown
        await wait_for(lambda: attempt(process) >= 2, 20, "a refused reconnection attempt")
        assert "connection refused" in link(process)["link_error"]
        await everything_server.start()
        await wait_for(lambda: link(process)["link"] == "connected", 60, "the backoff")
        back = await run_once(process, 2)
        assert tool_steps(back) == ["Echo: hello"]
    finally:
        await process.close()


async def test_a_stdio_server_that_fails_to_start_once_is_back_after_the_backoff(
        npm_servers: NpmServers, tmp_path: Path) -> None:
    """server-memory behind a wrapper that fails once when told to: the first reconnection
    attempt after the kill fails, the next one succeeds; the graph is kept in its file."""
    once = tmp_path / "fail-once"
    wrapper = tmp_path / "memory.sh"
    wrapper.write_text(f'#!/bin/sh\nif [ -e "{once}" ]; then rm "{once}"; '
                       f'echo "not today" >&2; exit 1; fi\nexec "{npm_servers.memory}"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    entity = {"name": "db-1", "entityType": "server", "observations": ["disk 91%"]}
    process = AgentProcess("p", ProcessConfig(
        model=scripted(call("create_entities", entities=[entity]), call("read_graph"),
                       {"reply": "ok"}),
        servers={"memory": {"command": str(wrapper), "timeout": CONNECT,
                            "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}}}))
    await process.start()
    try:
        first = await run_once(process, 1)
        assert first.state.value == "succeeded" and "db-1" in tool_steps(first)[1]
        once.touch()
        pid = int(await asyncio.to_thread(_child_pid, os.getpid(), "mcp-server-memory"))
        os.kill(pid, signal.SIGKILL)
        await wait_for(lambda: not once.exists(), 30, "the failed attempt")
        await wait_for(lambda: link(process)["link"] == "connected", 60, "the next attempt")
        assert link(process)["connections"] == 2
        second = await run_once(process, 2)
        assert "disk 91%" in tool_steps(second)[1]  # read back after the reconnection
    finally:
        await process.close()


def _child_pid(parent: int, name: str) -> int:
    """The pid of a descendant of ``parent`` whose command line names ``name``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if name in cmdline and "memory.sh" not in cmdline and _descends(ppid, parent):
            return int(entry.name)
    raise AssertionError(f"no process {name} under {parent}")


def _descends(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


# -- writes cut off ------------------------------------------------------------------------------

class Hanging:
    """A loopback URL that takes requests and never answers: a fetch made by the server's
    ``gzip-file-as-resource`` (a write) stays in flight until we end it."""

    def __init__(self) -> None:
        self.hits = 0
        self.port = 0
        self._release = asyncio.Event()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        self.hits += 1
        await self._release.wait()
        writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file.txt"


@pytest.fixture
async def hanging() -> AsyncIterator[Hanging]:
    target = Hanging()
    server = await asyncio.start_server(target._serve, "127.0.0.1", 0)
    target.port = server.sockets[0].getsockname()[1]
    try:
        yield target
    finally:
        target._release.set()
        server.close()
        await server.wait_closed()


def gzip_call(url: str) -> dict[str, Any]:
    return call("gzip-file-as-resource", name="f.gz", data=url)


async def parked(process: AgentProcess) -> Run:
    await wait_for(lambda: len(process.waiting_runs()) == 1, 60, "the run to wait")
    return process.waiting_runs()[0]


async def test_a_write_cut_off_mid_flight_waits_and_applied_finishes_it(
        everything_server: HttpServer, hanging: Hanging, tmp_path: Path) -> None:
    process = AgentProcess("p", ProcessConfig(
        model=scripted(gzip_call(hanging.url), {"reply": "compressed"}),
        servers={"everything": http(everything_server)},
        journal={"level": "full", "path": str(tmp_path / "journal.db")}))
    await process.start()
    journal = process.journal
    assert journal is not None
    try:
        effects = {t["name"]: t["effect"] for t in link(process)["tools"]}
        assert effects["gzip-file-as-resource"] == "write"
        await process.inject(TriggerEvent("t", "manual", {}))
        await wait_for(lambda: hanging.hits == 1, 30, "the write to be under way")
        await everything_server.kill()
        run = await parked(process)
        assert run.waiting_reason == "unknown_write_outcome"
        detail = process.waiting_detail(run.run_id)
        assert detail["tool"] == "gzip-file-as-resource" and detail["mcp_server"] == "everything"
        assert detail["args"] == {"name": "f.gz", "data": hanging.url}
        assert detail["idempotency_key"] == f"{run.run_id}:2"
        assert "went away during 'gzip-file-as-resource'" in detail["cause"]

        await everything_server.start()
        await wait_for(lambda: link(process)["link"] == "connected", 60, "the link back")
        await asyncio.sleep(0.3)  # a wrong re-dispatch would show itself meanwhile
        assert hanging.hits == 1 and process.waiting_runs() == [run]
        intents = await journal.read(ReadFilter(process="p", entry_type=EntryType.TOOL_INTENT))
        assert len(intents) == 1

        await process.reconcile(run.run_id, "applied", result="resource link f.gz")
        await wait_for(lambda: process.invocation_count == 1, 30, "the run to finish")
        done = process.recent_runs()[-1]
        assert done.run_id == run.run_id and done.reply == "compressed"
        assert hanging.hits == 1
    finally:
        await process.close()


async def test_the_call_timeout_parks_a_write_and_interrupts_a_read(
        everything_server: HttpServer, hanging: Hanging) -> None:
    process = AgentProcess("p", ProcessConfig(
        model=scripted(call("trigger-long-running-operation", duration=5, steps=5),
                       gzip_call(hanging.url), {"reply": "done"}),
        servers={"everything": http(everything_server, call_timeout=1)}))
    await process.start()
    try:
        await process.inject(TriggerEvent("t", "manual", {}))
        run = await parked(process)
        [read, write] = [s for s in run.steps if s.kind == "tool"]
        assert read.name == "trigger-long-running-operation" and not read.ok
        assert read.result.startswith("interrupted: MCP server 'everything' did not answer "
                                      "'trigger-long-running-operation' within 1 s")
        assert write.name == "gzip-file-as-resource" and "outcome unknown" in write.result
        assert "servers.everything.call_timeout" in process.waiting_detail(run.run_id)["cause"]
        assert link(process)["link"] == "connected"  # slow is not lost
        await process.reconcile(run.run_id, "not_applied")
        await wait_for(lambda: process.invocation_count == 1, 30, "the run to finish")
        assert hanging.hits == 1
    finally:
        await process.close()
