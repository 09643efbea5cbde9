"""The installed ``promptui`` command, and runs of it as a subprocess."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path


def promptui_command() -> list[str]:
    """The venv's ``promptui`` executable, or ``python -m promptui.cli`` without one."""
    exe = shutil.which("promptui", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "promptui.cli"]


def run_promptui(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``promptui ARGS`` to its end, its output captured as text."""
    return subprocess.run([*promptui_command(), *args], capture_output=True, text=True,
                          timeout=timeout)


async def run_promptui_async(*args: str, cwd: Path) -> tuple[int, str, str]:
    """``promptui ARGS`` in ``cwd`` without blocking the test's loop (a runtime served in it
    must keep answering), with no server named by the environment: (status, stdout, stderr)."""
    env = {**os.environ, "PROMPTUI_URL": "", "PROMPTUI_TOKEN": ""}
    proc = await asyncio.create_subprocess_exec(
        *promptui_command(), *args, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=cwd, env=env)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
