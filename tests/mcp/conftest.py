"""Fixtures for the MCP tests: the pinned reference servers from npm (tests/mcp/npm_servers.py),
free loopback ports, and servers started, killed and restarted on the same port."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.mcp.npm_servers import NpmServers, install

HERE = Path(__file__).resolve().parent
FLAKY_SERVER = HERE / "flaky_server.py"
LOOPBACK = HERE / "loopback.mjs"
START_WITHIN = 60.0  # a cold node or Python server on a slow CI box


@pytest.fixture(scope="session")
def npm_servers() -> NpmServers:
    """The pinned reference servers, installed once per cache folder (skips where node or npm
    is missing or the install fails)."""
    return install()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def listening(port: int, timeout: float = START_WITHIN) -> None:
    """Until something accepts connections on 127.0.0.1:``port``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:g} s"
                                   ) from None
            await asyncio.sleep(0.02)
            continue
        writer.close()
        await writer.wait_closed()
        return


class HttpServer:
    """One MCP server over streamable HTTP on a fixed loopback port: started, killed and
    started again on the same port (its sessions are then gone)."""

    def __init__(self, command: list[str], port: int, env: dict[str, str]) -> None:
        self.command = command
        self.port = port
        self.env = env
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def start(self) -> None:
        assert self.proc is None, "already running"
        self.proc = await asyncio.create_subprocess_exec(
            *self.command, env={**os.environ, **self.env, "PORT": str(self.port)},
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        try:
            await listening(self.port)
        except TimeoutError:
            await self.kill()
            raise
        self.starts += 1

    async def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()

    async def restart(self) -> None:
        await self.kill()
        await self.start()


def flaky_http(tmp: Path, port: int | None = None) -> HttpServer:
    """tests/mcp/flaky_server.py over HTTP; its ledgers in ``tmp``."""
    port = port or free_port()
    return HttpServer([sys.executable, str(FLAKY_SERVER), "--http", "--port", str(port)], port,
                      flaky_env(tmp))


def flaky_env(tmp: Path) -> dict[str, str]:
    return {"LEDGER": str(tmp / "ledger.txt"), "STARTED": str(tmp / "started.txt")}


def everything_http(servers: NpmServers, port: int | None = None) -> HttpServer:
    """The reference server-everything over streamable HTTP (it reads its port from PORT; the
    preload makes it bind 127.0.0.1 only)."""
    return HttpServer([str(servers.everything), "streamableHttp"], port or free_port(),
                      {"NODE_OPTIONS": f"--import {LOOPBACK.as_uri()}"})


@pytest.fixture
async def flaky_server(tmp_path: Path) -> AsyncIterator[HttpServer]:
    server = flaky_http(tmp_path)
    await server.start()
    try:
        yield server
    finally:
        await server.kill()


@pytest.fixture
async def everything_server(npm_servers: NpmServers) -> AsyncIterator[HttpServer]:
    server = everything_http(npm_servers)
    await server.start()
    try:
        yield server
    finally:
        await server.kill()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
