"""Hostile clients against both HTTP servers (the control API and a webhook): idle connections
past the file limit, a client that trickles its headers, more connections than the budget, and
a log that says each kind of trouble once per interval with a count, not once per accept."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import resource
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime_core import AgentRuntime
from runtime_core.http.limits import (
    ENV_HEADER_TIMEOUT,
    ENV_MAX_CONNECTIONS,
    ServerLimits,
    default_max_connections,
)
from runtime_core.http.log_throttle import RepeatFilter
from tests.helpers.cli import promptui_command
from tests.helpers.polling import poll
from tests.helpers.serving import TOKEN, hook_agent, served

FILE_LIMIT = 256
IDLE = 300  # per server: more than the process may open
HEADER_TIMEOUT = 1.5
HOOK = hook_agent()


def _low_file_limit() -> None:  # in the child, before it opens anything
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


@pytest.fixture
def limited_serve(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """``promptui serve`` under a 256-file limit with a short header timeout: (url, token,
    log)."""
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "hook.agent").write_text(HOOK)
    log = tmp_path / "serve.log"
    env = {**os.environ, ENV_HEADER_TIMEOUT: str(HEADER_TIMEOUT), "PROMPTUI_TOKEN": TOKEN}
    env.pop(ENV_MAX_CONNECTIONS, None)
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [*promptui_command(), "serve", "--port", "0", "agents",
             "--journal", str(tmp_path / "journal.db")],
            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=sink, preexec_fn=_low_file_limit)
    try:
        def listening() -> str | None:
            assert proc.poll() is None, log.read_text()
            found = re.search(r"listening on (http://\S+)", log.read_text(errors="replace"))
            return found.group(1) if found else None

        yield poll(listening, 30, "promptui serve to listen"), TOKEN, log
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _answer(method: str, url: str, **kwargs: Any) -> int:
    """The status of one request on a fresh connection; a hang fails the test (timeout)."""
    with httpx.Client(timeout=10, trust_env=False) as client:
        response = client.request(method, url, **kwargs)
    if response.status_code == 503:  # over the budget: the error shape and when to retry
        assert response.headers["retry-after"].isdigit(), response.headers
        assert "connections" in response.text, response.text
    return response.status_code


def _idle(port: int, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]


@pytest.mark.slow
def test_idle_connections_past_the_file_limit_do_not_take_the_servers_down(
        limited_serve: tuple[str, str, Path]) -> None:
    url, token, log = limited_serve
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"{url}/api/v1", headers=auth, timeout=10) as api:
        hook_port = api.get("/processes/hook/triggers").json()[0]["port"]
        api_port = int(url.rsplit(":", 1)[1])
        hook = f"http://127.0.0.1:{hook_port}/hook"
        idle = _idle(api_port, IDLE) + _idle(hook_port, IDLE)  # 600 under a 256-file limit
        try:
            # Existing work goes on: the client's open keep-alive connection still answers.
            assert api.get("/processes").status_code == 200
            # A new connection is answered at once: 200, or 503 while the budget is full.
            assert _answer("GET", f"{url}/api/v1/health") in (200, 503)
            assert _answer("GET", f"{url}/api/v1/processes", headers=auth) in (200, 503)
            assert _answer("POST", hook, json={"n": 0}) in (202, 503)
            # The idle ones are closed after the header timeout; then the webhook accepts.
            started = time.monotonic()
            poll(lambda: _answer("POST", hook, json={"n": 1}) == 202, 15,
                 "the webhook to accept once the idle connections timed out")
            assert time.monotonic() - started < HEADER_TIMEOUT + 10
            assert _answer("GET", f"{url}/api/v1/health") == 200
            closed = sum(_closed_by_server(s) for s in idle)
            assert closed == len(idle)  # each refused (503) or timed out, none left open
        finally:
            for sock in idle:
                sock.close()
        assert _answer("GET", f"{url}/api/v1/processes", headers=auth) == 200
        assert _answer("POST", hook, json={"n": 2}) == 202
    text = log.read_text(errors="replace")
    assert log.stat().st_size < 100_000, text[-3000:]
    assert "out of system resource" not in text, text[-3000:]  # no descriptor ran out
    assert "connections are answered 503" in text


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server ended the connection (after a 503 or a timeout)."""
    sock.settimeout(5)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except OSError:  # reset: closed too
        return True
    return True


# -- in process: the same limits on a server in this test's loop ------------------------------
@pytest.mark.slow
async def test_a_client_that_trickles_its_headers_is_cut_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_HEADER_TIMEOUT, "0.5")
    async with served(AgentRuntime()) as url:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        started = time.monotonic()
        writer.write(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        try:
            for _ in range(40):  # a header line every 0.1 s would go on for 4 s
                await asyncio.sleep(0.1)
                writer.write(b"X-Slow: 1\r\n")
                await writer.drain()
        except ConnectionError:
            pass
        with contextlib.suppress(ConnectionError):  # a reset: the client was still writing
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing answered
        assert time.monotonic() - started < 2.5
        writer.close()
        async with httpx.AsyncClient(trust_env=False) as client:  # the server still answers
            assert (await client.get(f"{url}/api/v1/health")).status_code == 200


@pytest.mark.slow
async def test_connections_beyond_the_budget_get_503_and_existing_ones_go_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MAX_CONNECTIONS, "4")
    async with served(AgentRuntime()) as url, httpx.AsyncClient(
            base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {TOKEN}"},
            trust_env=False) as client:
        assert (await client.get("/processes")).status_code == 200  # its connection is open
        host, port = url.removeprefix("http://").split(":")
        idle = [await asyncio.open_connection(host, int(port)) for _ in range(3)]
        async with httpx.AsyncClient(trust_env=False) as fresh:
            busy = await fresh.get(f"{url}/api/v1/health")
        assert busy.status_code == 503, busy.text
        assert busy.json()["error"]["code"] == "TOO_MANY_CONNECTIONS"
        assert busy.headers["retry-after"] == "2"
        assert (await client.get("/processes")).status_code == 200  # existing work goes on
        for _reader, writer in idle:
            writer.close()
        async with httpx.AsyncClient(trust_env=False) as fresh:
            async def healthy() -> bool:
                return (await fresh.get(f"{url}/api/v1/health")).status_code == 200
            deadline = time.monotonic() + 5
            while not await healthy():
                assert time.monotonic() < deadline, "the freed slots were not given back"
                await asyncio.sleep(0.05)


@pytest.mark.slow
async def test_a_webhook_flood_leaves_the_control_api_its_reserve(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MAX_CONNECTIONS, "8")  # webhooks may hold 7: one is the API's
    runtime = AgentRuntime()
    runtime.add_process("hook", {"triggers": [
        {"type": "webhook", "webhook_port": 0, "webhook_path": "/hook"}]})
    async with served(runtime) as url:
        port = int(runtime.get_process("hook").status()["triggers"][0]["port"])
        idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(7)]
        async with httpx.AsyncClient(trust_env=False) as fresh:
            # Clients that never authenticated hold only a share: once the silent ones are
            # past their grace, the oldest makes room for a sender.
            deadline = time.monotonic() + 5
            while (taken := await fresh.post(f"http://127.0.0.1:{port}/hook",
                                             json={})).status_code != 202:
                assert taken.status_code == 503, taken.text
                assert time.monotonic() < deadline, "no room was made for the sender"
                await asyncio.sleep(0.05)
            assert (await fresh.get(f"{url}/api/v1/health")).status_code == 200
        for _reader, writer in idle:
            writer.close()


# -- the parts ---------------------------------------------------------------------------------
def test_the_budget_stays_under_the_file_limit() -> None:
    assert default_max_connections(256) == 192
    assert default_max_connections(1024) == 768
    assert default_max_connections(1 << 20) == 4096
    assert default_max_connections(None) == 1024
    limits = ServerLimits.from_env({ENV_HEADER_TIMEOUT: "2.5", ENV_MAX_CONNECTIONS: "nope",
                                    "PROMPTUI_KEEP_ALIVE_TIMEOUT": "-1"})
    assert limits.header_timeout == 2.5 and limits.keep_alive_timeout == 5
    assert limits.max_connections == ServerLimits.from_env({}).max_connections


def test_a_repeated_error_is_logged_once_per_interval_with_a_count() -> None:
    now = [100.0]
    throttle = RepeatFilter(10.0, clock=lambda: now[0])
    logger = logging.getLogger("test.throttle")

    def record(message: str, level: int = logging.ERROR) -> logging.LogRecord:
        return logger.makeRecord(logger.name, level, __file__, 1, message, None, None)

    assert throttle.filter(record("socket.accept() out of system resource\nsocket: fd=12"))
    passed = [throttle.filter(record(f"socket.accept() out of system resource\nsocket: "
                                     f"fd={n}")) for n in range(999)]
    assert not any(passed)
    assert throttle.filter(record("another error"))  # another kind has its own window
    assert throttle.filter(record("info lines pass", logging.INFO))
    now[0] += 10
    summary = record("socket.accept() out of system resource\nsocket: fd=13")
    assert throttle.filter(summary)
    assert summary.getMessage().endswith("(999 more in the last 10 s)")
