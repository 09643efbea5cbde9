"""Fixtures for the MCP tests: the pinned reference servers from npm, and servers over
streamable HTTP started on a free loopback port (tests/helpers/mcp.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.helpers.mcp import HttpServer, NpmServers, everything_http, flaky_http, install


@pytest.fixture(scope="session")
def npm_servers() -> NpmServers:
    """The pinned reference servers, installed once per cache folder (skips where node or npm
    is missing or the install fails)."""
    return install()


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
