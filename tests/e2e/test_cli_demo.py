"""The installed ``promptui`` command runs the bundled demo manifests end to end, offline."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import promptui_command

pytestmark = pytest.mark.slow


def test_demo_runs_headless_and_stops_cleanly(tmp_path: Path) -> None:
    env = {**os.environ, "PROMPTUI_DEMO_DIR": str(tmp_path / "demo"),
           "PROMPTUI_DEMO_WEBHOOK_PORT": "0"}
    result = subprocess.run(  # 14 s: the 3 s interval fires twice even after a start slowed
        # by a loaded machine (10 s was not always enough under a full CI run)
        [*promptui_command(), "demo", "--seconds", "14", "--json"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )
    assert result.returncode == 0, result.stderr
    processes = json.loads(result.stdout)["processes"]
    assert set(processes) == {"health-checker", "alert-handler", "demo-feeder",
                              "invoice-watcher", "flaky-deployer", "looper", "changelog"}
    assert {p["state"] for p in processes.values()} == {"stopped"}
    assert all(p["journal_enabled"] for p in processes.values())
    assert processes["health-checker"]["invocation_count"] >= 2
    assert processes["demo-feeder"]["invocation_count"] >= 1
    # the feeder's invoice reached the watcher through a real file and was booked
    assert processes["invoice-watcher"]["invocation_count"] >= 1
    assert (tmp_path / "demo" / "ledger.txt").read_text().count("invoice-0001.json") == 1
    # the deploy request reached the changelog writer, whose MCP stdio server wrote the line
    assert processes["changelog"]["invocation_count"] >= 1  # verified, so it succeeded
    assert processes["changelog"]["waiting_runs"] == 0
    assert "- build 1: deploy requested <!-- " in (tmp_path / "demo" / "changelog.md").read_text()
    # the flaky deployer's broken build failed and was retried, then dead-lettered
    assert processes["flaky-deployer"]["dead_letter_count"] >= 1
    assert "model-call budget" in processes["looper"]["last_outcome"]
    # ...after its health monitor saw it stuck (it paused the looper)
    assert processes["looper"]["health_anomalies"] >= 1
    # the journal holds it all and verifies
    verify = subprocess.run([*promptui_command(), "journal", "verify"], capture_output=True,
                            text=True, timeout=60, cwd=tmp_path)
    assert verify.returncode == 0, verify.stdout


def test_version_flag() -> None:
    result = subprocess.run([*promptui_command(), "--version"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0
    assert result.stdout.startswith("promptui ")
