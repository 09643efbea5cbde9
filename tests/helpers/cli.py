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


def finish_promptui(args: list[str], cwd: Path, *, hang: float = 60.0,
                    env: dict[str, str] | None = None
                    ) -> tuple[subprocess.CompletedProcess[str], float]:
    """``promptui ARGS`` in ``cwd`` (this checkout first on the path, no server named by the
    environment, ``env`` added) to its end: its output and how long it took. Still running
    after ``hang`` seconds is a hang: the test fails and the process is killed."""
    import time

    import pytest

    root = Path(__file__).resolve().parents[2]
    full = {**os.environ, "PYTHONPATH": str(root), **(env or {})}
    full.pop("PROMPTUI_TOKEN", None)
    full.pop("PROMPTUI_URL", None)
    started = time.monotonic()
    child = subprocess.Popen([*promptui_command(), *args], cwd=cwd, env=full, text=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        out, err = child.communicate(timeout=hang)
    except subprocess.TimeoutExpired:
        pytest.fail(f"promptui {' '.join(args)} still running after {hang:g}s (it hangs)")
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    return (subprocess.CompletedProcess(child.args, child.returncode, out, err),
            time.monotonic() - started)
