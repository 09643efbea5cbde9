"""The installed ``promptui`` command runs the offline demo end to end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path


def promptui_command() -> list[str]:
    exe = shutil.which("promptui", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "promptui.cli"]


def test_demo_runs_headless_and_reports_every_process(tmp_path: Path) -> None:
    result = subprocess.run(
        [*promptui_command(), "demo", "--seconds", "3", "--json"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    processes = status["processes"]
    assert set(processes) == {"heartbeat", "researcher", "flaky-deployer", "looper"}
    # every process was stopped cleanly at the end
    assert {p["state"] for p in processes.values()} <= {"stopped", "failed"}
    assert processes["heartbeat"]["invocation_count"] >= 1
    assert processes["researcher"]["invocation_count"] >= 1
    # the stuck looper used up its model-call budget
    assert "model-call budget" in processes["looper"]["last_outcome"]


def test_version_flag() -> None:
    result = subprocess.run([*promptui_command(), "--version"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0
    assert result.stdout.startswith("promptui ")
