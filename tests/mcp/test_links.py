"""Links that come back, with our own server (helpers/workers/flaky_server.py) killed and restarted
underneath: a new HTTP session after a restart, reconnection with backoff, the call timeout, and
what a call cut off means: a read is sent again or interrupted, a write is never sent again."""

from __future__ import annotations

import asyncio
import random
import re
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

from runtime_core.agent.mcp.config import HttpServerConfig, StdioServerConfig
from runtime_core.agent.mcp.link import McpServerError, McpServerLink
from runtime_core.agent.mcp.probe import ProbedClient, probing
from runtime_core.agent.mcp.reconnect import Backoff, LinkStatus
from runtime_core.agent.tools import OutcomeUnknown
from tests.helpers.mcp import HttpServer, flaky_env, lines
from tests.helpers.polling import wait_for
from tests.helpers.workers import FLAKY_SERVER

RECONNECTING = re.compile(r"^reconnecting \(attempt (\d+), next in (\d+) s\)$")


def http_link(server: HttpServer, **extra: Any) -> McpServerLink:
    return McpServerLink("flaky", HttpServerConfig(type="http", url=server.url, timeout=20,
                                                   **extra))


def stdio_link(tmp: Path, **extra: Any) -> McpServerLink:
    return McpServerLink("flaky", StdioServerConfig(
        command=sys.executable, args=[str(FLAKY_SERVER)], env=flaky_env(tmp), timeout=30,
        **extra))


def text(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


async def pid_of(link: McpServerLink) -> int:
    found = re.search(r"pid=(\d+)", text(await link.call("peek", {}, {}, read=True)))
    assert found is not None
    return int(found.group(1))


def attempt(link: McpServerLink) -> int:
    """The attempt the link waits for, from the text the Config tab shows (0: none)."""
    shown = RECONNECTING.match(link.status.text())
    return int(shown.group(1)) if shown else 0


def link_tasks() -> list[str]:
    return sorted(t.get_name() for t in asyncio.all_tasks()
                  if t.get_name().startswith("mcp-") and not t.done())


# -- the policy and the status, on their own ---------------------------------------------------

def test_backoff_is_immediate_then_doubles_from_half_a_second_to_30_s_jittered() -> None:
    rand = random.Random(7)
    backoff = Backoff()
    assert backoff.delay(1, rand) == 0.0
    for attempt, base in [(2, 0.5), (3, 1.0), (4, 2.0), (5, 4.0), (8, 30.0), (60, 30.0)]:
        delays = [backoff.delay(attempt, rand) for _ in range(200)]
        assert all(min(base * 0.8, 30.0) <= d <= min(base * 1.2, 30.0) for d in delays), attempt
        assert len(set(delays)) > 1 or base == 30.0  # jittered, except at the cap


def test_the_status_says_what_the_config_tab_shows() -> None:
    assert LinkStatus("connected").text() == "connected"
    waiting = LinkStatus("reconnecting", 3, 100.0, "connection refused")
    assert waiting.text(now=95.2) == "reconnecting (attempt 3, next in 5 s)"
    assert waiting.row(now=95.2) == {"link": "reconnecting (attempt 3, next in 5 s)",
                                     "link_attempt": 3, "link_error": "connection refused"}
    assert LinkStatus("reconnecting", 4, None, "x").text() == (
        "reconnecting (attempt 4, connecting now)")
    assert LinkStatus("down", reason="closed").text() == "down: closed"


@pytest.mark.parametrize(("status", "body", "lost"), [
    (404, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}',
     True),
    (400, b'{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session '
          b'ID provided"},"id":1}', True),
    (400, b'{"jsonrpc":"2.0","error":{"code":-32602,"message":"bad params"},"id":1}', False),
    (500, b"oops", False),
])
async def test_the_probe_tells_a_lost_session_from_an_answer(status: int, body: bytes,
                                                             lost: bool) -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, content=body,
                               headers={"content-type": "application/json"})

    request = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}'
    async with ProbedClient(transport=httpx2.MockTransport(answer)) as client:
        with probing() as probe:
            response = await client.post("http://127.0.0.1:1/mcp", content=request,
                                         headers={"mcp-session-id": "s1"})
        assert await response.aread() == body  # still readable by the SDK after the probe
    assert probe.session_lost is lost and probe.answered is not lost
    assert probe.safe_to_resend is lost


async def test_the_probe_knows_a_refused_connection_was_never_sent() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("All connection attempts failed")

    async with ProbedClient(transport=httpx2.MockTransport(refuse)) as client:
        with probing() as probe, pytest.raises(httpx2.ConnectError):
            await client.post("http://127.0.0.1:1/mcp",
                              content=b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}')
    assert probe.not_sent.startswith("connection refused") and probe.safe_to_resend


# -- HTTP: restarts and outages ----------------------------------------------------------------

@pytest.mark.slow
async def test_after_an_http_restart_the_call_goes_through_on_a_new_session(
        flaky_server: HttpServer, tmp_path: Path) -> None:
    link = http_link(flaky_server)
    await link.connect()
    try:
        first = await pid_of(link)
        await flaky_server.restart()  # the server's sessions are gone
        # A write: the server refused it for its session, so it is sent once more, once.
        assert text(await link.call("record", {"item": "a", "idempotency_key": "k1"}, {})) == (
            "recorded a")
        assert lines(tmp_path / "ledger.txt") == ["k1 a"]
        assert await pid_of(link) != first
        assert link.connections == 2 and link.status.text() == "connected"
    finally:
        await link.close()


@pytest.mark.slow
async def test_a_link_that_is_down_reconnects_with_backoff_and_shows_it(
        flaky_server: HttpServer) -> None:
    link = http_link(flaky_server, call_timeout=1)
    await link.connect()
    try:
        await flaky_server.kill()
        # Never sent (the connection is refused), so not an unknown outcome: an error.
        with pytest.raises(McpServerError, match=r"'peek' was not sent within 1 s "
                                                 r"\(servers\.flaky\.call_timeout\)"):
            await link.call("peek", {}, {}, read=True)
        await wait_for(lambda: attempt(link) >= 3, 15, "a few refused attempts")
        assert "connection refused" in str(link.status.row()["link_error"])
        assert not link.connected
        await flaky_server.start()
        await wait_for(lambda: link.connected, 30, "the backoff to reconnect")
        assert link.status.text() == "connected"
        assert "pid=" in text(await link.call("peek", {}, {}, read=True))
    finally:
        await link.close()
    assert link_tasks() == []
    assert link.status.text() == "down: closed (the process is not running)"


@pytest.mark.slow
async def test_a_call_waits_for_the_link_to_come_back(flaky_server: HttpServer,
                                                       tmp_path: Path) -> None:
    link = http_link(flaky_server, call_timeout=30)
    await link.connect()
    try:
        await flaky_server.kill()
        call = asyncio.create_task(link.call("record", {"item": "b", "idempotency_key": "k2"},
                                             {}))
        await wait_for(lambda: link.status.state == "reconnecting", 10, "the link to notice")
        assert not call.done()
        await flaky_server.start()
        assert text(await asyncio.wait_for(call, 30)) == "recorded b"
        assert lines(tmp_path / "ledger.txt") == ["k2 b"]
    finally:
        await link.close()


@pytest.mark.slow
async def test_closing_a_reconnecting_link_leaves_nothing_running(
        flaky_server: HttpServer) -> None:
    link = http_link(flaky_server, call_timeout=0.5)
    await link.connect()
    await flaky_server.kill()
    with pytest.raises(McpServerError):
        await link.call("peek", {}, {}, read=True)
    await wait_for(lambda: link.status.state == "reconnecting", 10)
    assert link_tasks() != []
    await link.close()
    assert link_tasks() == []
    with pytest.raises(McpServerError, match="not connected \\(the process is not running\\)"):
        await link.call("peek", {}, {}, read=True)


@pytest.mark.slow
async def test_an_http_write_cut_off_mid_call_has_an_unknown_outcome(
        flaky_server: HttpServer, tmp_path: Path) -> None:
    link = http_link(flaky_server)
    await link.connect()
    try:
        call = asyncio.create_task(link.call(
            "slow_record", {"item": "c", "seconds": 30, "idempotency_key": "k3"}, {}))
        await wait_for(lambda: lines(tmp_path / "started.txt") == ["k3 c"], 20, "the call")
        await flaky_server.kill()
        with pytest.raises(OutcomeUnknown, match="went away during 'slow_record'"):
            await asyncio.wait_for(call, 30)
        await flaky_server.start()
        await wait_for(lambda: link.connected, 30, "the link to come back")
        assert lines(tmp_path / "started.txt") == ["k3 c"]  # never sent again
    finally:
        await link.close()


# -- stdio: a server that dies mid-call, and the call timeout ---------------------------------

@pytest.mark.slow
async def test_a_stdio_write_cut_off_is_unknown_and_a_read_is_sent_again(
        tmp_path: Path) -> None:
    import os
    import signal

    link = stdio_link(tmp_path)
    await link.connect()
    try:
        call = asyncio.create_task(link.call(
            "slow_record", {"item": "d", "seconds": 30, "idempotency_key": "k4"}, {}))
        await wait_for(lambda: lines(tmp_path / "started.txt") == ["k4 d"], 20, "the write")
        first = await pid_of(link)
        os.kill(first, signal.SIGKILL)
        with pytest.raises(OutcomeUnknown, match="went away during 'slow_record'"):
            await asyncio.wait_for(call, 30)
        await wait_for(lambda: link.connected, 30, "the keeper to restart the server")
        second = await pid_of(link)
        assert second != first and lines(tmp_path / "ledger.txt") == []

        read = asyncio.create_task(link.call("slow_peek", {"seconds": 2}, {}, read=True))
        await wait_for(lambda: len(lines(tmp_path / "started.txt")) == 2, 20, "the read")
        os.kill(second, signal.SIGKILL)
        answer = text(await asyncio.wait_for(read, 60))  # sent again on the next server
        assert answer.startswith("pid=") and answer != f"pid={second}"
        assert len(lines(tmp_path / "started.txt")) == 3
    finally:
        await link.close()


@pytest.mark.slow
async def test_the_call_timeout_leaves_the_outcome_unknown(tmp_path: Path) -> None:
    link = stdio_link(tmp_path, call_timeout=0.5)
    await link.connect()
    try:
        with pytest.raises(OutcomeUnknown, match=r"did not answer 'slow_record' within 0\.5 s "
                                                 r"\(servers\.flaky\.call_timeout\)"):
            await link.call("slow_record", {"item": "e", "seconds": 5, "idempotency_key": "k5"},
                            {})
        assert link.connected  # a slow server is not a lost one
        assert "pid=" in text(await link.call("peek", {}, {}, read=True))
    finally:
        await link.close()


def test_call_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="call_timeout"):
        HttpServerConfig(type="http", url="http://127.0.0.1:1/mcp", call_timeout=0)
    assert HttpServerConfig(type="http", url="http://127.0.0.1:1/mcp").call_timeout == 60.0

