"""``promptui manifest NAME``: a process's configuration as a manifest on stdout, from the served
runtime or, with ``--from``, from manifest files (a reference-runtime manifest comes out in
promptui's spellings)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helpers.cli import promptui_command
from tests.helpers.serving import start_serve, write_agents

pytestmark = pytest.mark.slow


def _cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GITHUB_WEBHOOK_SECRET": "porting-secret-value-123"}
    return subprocess.run([*promptui_command(), *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_from_files_in_promptui_spellings(tmp_path: Path) -> None:
    manifests = Path(__file__).parent / "manifests"
    done = _cli(tmp_path, "manifest", "inbox-files", "--from", str(manifests))
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(done.stdout)
    trigger = data["triggers"][0]
    assert trigger["patterns"] == ["*.csv", "*.json"] and trigger["debounce"] == 0.2
    assert trigger["watch_events"] == ["added", "modified"]
    assert "watch_patterns" not in trigger
    assert data["journal"]["path"] == ".promptise/journal/journal.db"
    hooks = _cli(tmp_path, "manifest", "github-prs", "--from",
                 str(manifests / "github-prs.agent"))
    assert hooks.returncode == 0, hooks.stderr
    assert "porting-secret-value-123" not in hooks.stdout
    assert yaml.safe_load(hooks.stdout)["triggers"][0]["hmac_secret"] == \
        "${GITHUB_WEBHOOK_SECRET}"
    missing = _cli(tmp_path, "manifest", "nope", "--from", str(manifests))
    assert missing.returncode == 2 and "no process 'nope'" in missing.stderr


def test_from_the_served_runtime(tmp_path: Path) -> None:
    server = start_serve(tmp_path, str(write_agents(tmp_path, broken=False, judge=False)))
    try:
        done = _cli(tmp_path, "manifest", "worker", "--url", server.url, "--token",
                    server.token)
        assert done.returncode == 0, done.stderr
        assert yaml.safe_load(done.stdout)["name"] == "worker"
        (tmp_path / "again.agent").write_text(done.stdout)
        assert _cli(tmp_path, "validate", "again.agent").returncode == 0
        gone = _cli(tmp_path, "manifest", "nope", "--url", server.url, "--token",
                    server.token)
        assert gone.returncode != 0 and "nope" in gone.stderr
    finally:
        assert server.stop() == 0, server.stderr()
