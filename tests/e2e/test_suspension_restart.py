"""The demo's looper under ``promptui serve`` (issue 36): its health pause survives a crash of
the server (SIGKILL) and a restart, with its reason and since when; ``promptui resume`` says
the monitor kept its memory, and ``promptui resume --watch-again`` makes the next stuck run
pause it again at once."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import finish_promptui
from tests.helpers.polling import poll
from tests.helpers.serving import Served, start_serve

pytestmark = pytest.mark.slow

DEMO = Path(__file__).resolve().parents[2] / "demo_manifests"


def agents_in(folder: Path) -> Path:
    """The demo's looper, firing every second, each failed run dead-lettered at once (so the
    dead letters count its runs)."""
    agents = folder / "agents"
    agents.mkdir(parents=True)
    shutil.copy(DEMO / "promptui_demo_tools.py", agents)
    text = (DEMO / "looper.agent").read_text()
    text = text.replace("{type: interval, seconds: 6}", "{type: interval, seconds: 1}")
    text = text.replace("max_consecutive_failures: 1000",
                        "max_consecutive_failures: 1000\n  trigger_delivery: {max_retries: 0}")
    assert "seconds: 1}" in text and "max_retries: 0" in text
    (agents / "looper.agent").write_text(text)
    return agents


def looper(served: Served) -> dict[str, Any]:
    rows = served.client().get("/processes").json()
    found: dict[str, Any] = next(row for row in rows if row["name"] == "looper")
    return found


def paused(served: Served) -> dict[str, Any] | None:
    row = looper(served)
    return row if row["state"] == "suspended" and row["suspend_reason"] == "health" else None


def test_a_health_pause_survives_a_crash_and_watch_again_pauses_at_once(
        tmp_path: Path) -> None:
    agents = agents_in(tmp_path)
    journal = str(tmp_path / "journal.db")
    served = start_serve(tmp_path, str(agents), "--journal", journal)
    first = poll(lambda: paused(served), 30, "the first health pause")
    assert first["suspended_by"] == "health" and first["suspension_kept"]
    served.stop(signal.SIGKILL)  # a crash: nothing but the journal is left

    served = start_serve(tmp_path, str(agents), "--journal", journal, log_name="serve2.log")
    row = looper(served)
    assert (row["state"], row["suspend_reason"]) == ("suspended", "health")
    assert row["suspended_since"] == first["suspended_since"]
    status, _ = finish_promptui(["status"], tmp_path)
    assert "suspended (health since" in status.stdout, status.stdout

    done, _ = finish_promptui(["resume", "looper"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "kept its memory" in done.stdout and "--watch-again" in done.stdout
    letters = looper(served)["dead_letters"]
    # The same stuck call is in the monitor's cooldown: only once the error window fills
    # (high_error_rate) is it paused again, runs later (the "9 runs, 53 s").
    again = poll(lambda: paused(served), 60, "the pause after a plain resume")
    assert again["dead_letters"] - letters >= 5

    letters = again["dead_letters"]
    done, _ = finish_promptui(["resume", "looper", "--watch-again"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "kept its memory" not in done.stdout
    again = poll(lambda: paused(served), 30, "the pause after watch again")
    assert again["dead_letters"] - letters <= 2  # within the first run or two
    assert served.stop() == 0
