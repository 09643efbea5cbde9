"""A SIGKILL inside a read: the same run resumes (same run id), the read that had finished is not
run again, the open one is recorded as interrupted, and the counters come back, so the run's
tool-call budget holds across the crash (spec: run lifecycle, "The Runner restores durable calls
and counters before continuing")."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def worker(tmp: Path, *extra: str) -> tuple[int, list[str]]:
    cmd = [sys.executable, "-m", "tests.helpers.workers.read_crash_worker", "--db",
           str(tmp / "journal.db"), "--reads", str(tmp / "reads.txt"), *extra]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode in (0, -signal.SIGKILL), done.stderr
    return done.returncode, done.stdout.splitlines()


def run_entries(db: Path) -> list[tuple[str, str | None, dict[str, Any]]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT entry_type, run_id, data FROM entries "
                            "WHERE process = 'reader' ORDER BY seq").fetchall()
    return [(kind, run_id, json.loads(data)) for kind, run_id, data in rows]


def test_a_kill_inside_a_read_resumes_the_same_run_with_its_counters(tmp_path: Path) -> None:
    code, lines = worker(tmp_path, "--inject", "--kill-at", "2")
    assert code == -signal.SIGKILL
    assert "ACK ev-1" in lines  # acknowledged, then killed inside the second read
    # Each read's intent (and with it the run's start) was durable before its adapter ran.
    assert (tmp_path / "reads.txt").read_text().split() == ["1:1", "2:2"]

    code, lines = worker(tmp_path)
    assert code == 0
    idle = json.loads(next(line for line in lines if line.startswith("IDLE "))[5:])
    assert idle["recovered"]["resumed_runs"] == 1
    entries = run_entries(tmp_path / "journal.db")
    # a start of its own, or carried by the run's first intent (schema 9)
    started = [run_id for kind, run_id, data in entries
               if kind == "run_started" or (kind == "tool_intent" and "started" in data)]
    assert len(started) == 1  # the same run went on: no second run of the event
    assert idle["run"]["run_id"] == started[0] and idle["run"]["event_id"] == "ev-1"
    interrupted = [data for kind, _, data in entries if kind == "tool_interrupted"]
    assert [(d["tool"], d["step"]) for d in interrupted] == [("lookup", 4)]
    # The finished read did not run again, and the interrupted one was charged: the model's
    # third lookup finds the two-call budget used up, so the run fails for budget.
    assert (tmp_path / "reads.txt").read_text().split() == ["1:1", "2:2"]
    assert (idle["run"]["state"], idle["run"]["reason"]) == ("failed", "budget")
    assert idle["run"]["tool_calls"] == 2
