"""MCP servers for the tests: one of ours or an npm reference server over streamable HTTP on a
fixed loopback port (started, killed and started again on the same port), and the pinned
reference servers from the npm registry.

The npm servers are installed once into a cache folder outside the repository and reused:
``$PROMPTUI_NPM_CACHE`` or ``~/.cache/promptui-tests/npm``, then a folder named by a hash of the
pins (a new pin installs beside the old, never over it). Parallel pytest-xdist workers take a
file lock, so only one of them runs ``npm install``; the others wait and then find the bins.
Where node or npm is missing, or the install fails (offline), the test that asked is skipped
with the reason."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.ports import free_port
from tests.helpers.workers import FLAKY_SERVER, LOOPBACK

START_WITHIN = 60.0  # a cold node or Python server on a slow CI box


# -- a server over streamable HTTP ---------------------------------------------------------------
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
    """Our flaky server (workers/flaky_server.py) over HTTP; its ledgers in ``tmp``."""
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


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


# -- the npm reference servers -------------------------------------------------------------------
PINS = (
    ("@modelcontextprotocol/server-everything", "2026.8.31"),
    ("@modelcontextprotocol/server-memory", "2026.8.31"),
)
BINS = {"everything": "mcp-server-everything", "memory": "mcp-server-memory"}
INSTALL_TIMEOUT = 600.0
DONE = ".installed"  # written last: a folder without it is an interrupted install


@dataclass(frozen=True, slots=True)
class NpmServers:
    folder: Path
    everything: Path  # takes "stdio" or "streamableHttp" (PORT=<port> picks its port)
    memory: Path  # stdio only


def cache_root() -> Path:
    default = Path.home() / ".cache" / "promptui-tests" / "npm"
    return Path(os.environ.get("PROMPTUI_NPM_CACHE") or default)


def pins_folder(root: Path | None = None) -> Path:
    spec = "\n".join(f"{name}@{version}" for name, version in PINS)
    digest = hashlib.sha256(spec.encode()).hexdigest()[:16]
    return (root or cache_root()) / f"pins-{digest}"


def install(root: Path | None = None) -> NpmServers:
    """The installed bins; installs the pins first when they are not there yet. Skips the
    calling test, saying why, where that cannot be done."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for the reference MCP servers (install Node.js)")
    folder = pins_folder(root)
    bin_dir = folder / "node_modules" / ".bin"
    servers = NpmServers(folder, bin_dir / BINS["everything"], bin_dir / BINS["memory"])
    if (folder / DONE).exists():
        return servers
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other workers wait here, then find DONE
        if not (folder / DONE).exists():
            _npm_install(npm, folder)
    missing = [str(p) for p in (servers.everything, servers.memory) if not p.exists()]
    if missing:
        pytest.skip(f"npm installed the pins into {folder} but not {', '.join(missing)}")
    return servers


def _npm_install(npm: str, folder: Path) -> None:
    # A package.json of our own keeps npm from climbing to a parent folder's project.
    (folder / "package.json").write_text(json.dumps({"name": "promptui-test-servers",
                                                     "private": True}))
    command = [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund",
               "--save-exact", *(f"{name}@{version}" for name, version in PINS)]
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm install of the reference MCP servers took over {INSTALL_TIMEOUT:g} s "
                    "(offline?)")
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-600:]
        pytest.skip(f"npm install of the reference MCP servers failed (offline?): {tail}")
    (folder / DONE).write_text("\n".join(f"{n}@{v}" for n, v in PINS) + "\n")
