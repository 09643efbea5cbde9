"""bench/soak_run.py trimmed to two stops and two SIGKILLs of `promptui run` under signed
webhook load (issue 31): every acknowledged event ran exactly once or waits for an operator,
no dead letter "process stopped", no write made twice, every stop exits 0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak_run.py"


def test_two_stops_and_two_kills_lose_nothing_and_run_nothing_twice(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SOAK), "--stops", "2", "--kills", "2",
                           "--folder", str(tmp_path)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["acknowledged"] > 0 and result["kills"] == 2
    assert sum(result["stops"].values()) == 2
    assert result["ran_once"] + result["waiting_for_operator"] == result["acknowledged"], result
    assert result["ran_twice"] == result["never_ran"] == result["still_queued"] == 0, result
    assert result["dead_letters_process_stopped"] == result["dead_letters"] == 0, result
    assert result["duplicate_writes"] == 0, result
    assert result["kept_at_stops"] > 0, result  # the stops did find a queue to keep
    assert all(code.endswith(":0") for code in result["stop_exit_codes"]
               if not code.startswith("SIGKILL")), result
    assert result["final_exit"] == 0 and result["final_stopped"]["kept"] == 0, result
