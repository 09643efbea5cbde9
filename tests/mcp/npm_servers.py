"""The reference MCP servers from the npm registry, pinned, installed once into a cache folder
outside the repository and reused: ``$PROMPTUI_NPM_CACHE`` or ``~/.cache/promptui-tests/npm``,
then a folder named by a hash of the pins (a new pin installs beside the old, never over it).

Parallel pytest-xdist workers take a file lock, so only one of them runs ``npm install``; the
others wait and then find the bins. Where node or npm is missing, or the install fails (offline),
the test that asked is skipped with the reason."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

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
