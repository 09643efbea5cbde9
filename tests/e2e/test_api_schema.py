"""The control API against its own OpenAPI schema: schemathesis (``st run``) sends generated
and mutated requests to every operation of a real ``promptui serve`` and checks that none is
answered with a 5xx. A throwaway server: the generated requests stop, fork and rewind its
processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.test_serve import start_serve, write_agents

# Path parameters named ``name`` are mostly real process names, so the requests reach the
# commands behind the 404s; the rest stay random.
CONFIG = """\
[dictionaries.processes]
values = ["worker", "broken", "judge"]

[parameters]
"path.name" = { dictionary = "processes", probability = 0.8 }
"""


def st_command() -> list[str]:
    exe = Path(sys.executable).parent / "st"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "schemathesis.cli"]


def test_no_operation_answers_a_server_error(tmp_path: Path) -> None:
    agents = write_agents(tmp_path)
    (tmp_path / "schemathesis.toml").write_text(CONFIG)  # read from the working folder
    server = start_serve(tmp_path, str(agents), "--journal", str(tmp_path / "journal.db"))
    report = tmp_path / "report.json"
    try:
        operations = len([m for item in server.client().get("/openapi.json").json()[
            "paths"].values() for m in item])
        result = subprocess.run([
            *st_command(), "run", f"{server.url}/api/v1/openapi.json",
            "--checks", "not_a_server_error",
            "-H", f"Authorization: Bearer {server.token}",
            "--exclude-path", "/api/v1/events",  # a stream that never ends; see test_serve
            "--phases", "coverage,fuzzing", "--max-examples", "25", "--seed", "1",
            # one worker: hypothesis's lambda descriptions race in ast.parse across threads
            "--workers", "1", "--request-timeout", "10", "--generation-database", "none",
            "--no-color", "--report", "json", "--report-json-path", str(report),
        ], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    finally:
        code = server.stop()
    summary = json.loads(report.read_text())
    shown = result.stdout[-6000:]
    assert summary["failures"] == [], shown
    assert summary["test_cases"]["with_failures"] == 0, shown
    assert summary["errors"] == [], shown  # every operation was generated for and sent
    assert summary["operations"]["tested"] == operations - 1, shown
    assert summary["test_cases"]["generated"] >= 10 * (operations - 1), shown
    log = server.stderr()
    assert "INTERNAL_ERROR" not in log and "ERROR promptui.api" not in log, log[-6000:]
    assert code == 0, log[-3000:]
