"""Issue 36: after a `:` jump, Enter opens the process jumped to, not the line under a feed's
cursor. Driven in a real terminal (tmux, 80x24) with the keys an operator types: Tab Tab to
the Activity log, Up onto a line, `:inv` Enter, then Enter."""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.ports import free_port
from tests.helpers.tmux import Tmux, private_tmux

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None,
                       reason="tmux is not installed (needed to drive a real terminal)"),
]


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    with private_tmux(width=80, height=24, deadline=120.0) as session:
        yield session


def demo_room(folder: Path) -> str:
    """The real control room on the demo, its files and settings private to ``folder``."""
    env = {"PROMPTUI_DEMO_DIR": str(folder / "demo"),
           "PROMPTUI_DEMO_WEBHOOK_PORT": str(free_port()),
           "XDG_CONFIG_HOME": str(folder / "cfg"), "TERM": "xterm-256color"}
    return shlex.join(["env", *(f"{k}={v}" for k, v in env.items()),
                       str(Path(sys.executable).parent / "promptui"), "ui", "--journal",
                       str(folder / "j.db")])


def activity_lines(screen: str) -> list[str]:
    """The Activity panel's lines (the right half of the feeds' row)."""
    return [line[41:] for line in screen.splitlines() if line.count("│") >= 4]


def test_enter_after_a_jump_opens_the_process_jumped_to(tmp_path: Path, tmux: Tmux) -> None:
    tmux.start(tmp_path, demo_room(tmp_path))
    tmux.expect("activity from processes other than invoice-watcher", lambda s: sum(
        1 for line in activity_lines(s) if "run " in line and "invoice" not in line) >= 3,
        cap=60)
    tmux.keys("Tab", "Tab")  # the Anomalies feed, then the Activity log
    tmux.keys("Up")  # a cursor on the newest line: Enter there would open its process
    tmux.keys(":")
    tmux.expect("the jump prompt", lambda s: "process name (tab completes" in s, cap=5)
    tmux.keys("inv", literal=True)
    tmux.expect("the jump's target", lambda s: "→ invoice-watcher" in s, cap=5)
    tmux.keys("Enter")
    tmux.expect("the prompt gone", lambda s: "process name (tab completes" not in s, cap=5)
    tmux.keys("Enter")
    screen = tmux.expect("a detail screen", lambda s: "3 Dead" in s, cap=15)
    title = screen.splitlines()[0]
    assert "invoice-watcher" in title, f"Enter opened another process:\n{screen}"
