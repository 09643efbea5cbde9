"""The real ``promptui`` command in a real terminal (tmux, 80x24): wait for the process table,
filter to the flaky deployer once it has dead letters, open it, redeliver them all from the
"3 Dead" tab, go back, quit; the journal then holds the ``redelivered`` entry and the command
exited 0."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.ports import free_port
from tests.helpers.tmux import Tmux, private_tmux

PROCESS = "flaky-deployer"  # fails every other build: dead letters after a few seconds
WIDTH, HEIGHT = 80, 24
DEADLINE = 60.0  # the whole test; each wait below takes what is left, at most its own cap

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None,
                       reason="tmux is not installed (needed to drive a real terminal)"),
]


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    with private_tmux(width=WIDTH, height=HEIGHT, deadline=DEADLINE) as session:
        yield session


def dead_count(screen: str, process: str) -> int | None:
    """The Dead column of ``process``'s row, located by the header (bars have no spaces)."""
    lines = screen.splitlines()
    header = next((line for line in lines if " Process " in line and " Dead " in line), None)
    row = next((line for line in lines if line.startswith(f"│ {process} ")), None)
    if header is None or row is None:
        return None
    start, end = header.index(" Dead "), header.index(" Health ")
    cell = row[start:end].strip()
    return int(cell) if cell.isdigit() else None


def journal_rows(journal: Path, sql: str) -> list[tuple[object, ...]] | None:
    """Rows of a read-only query, or None while the file or its tables are not there yet."""
    if not journal.exists():
        return None
    try:
        conn = sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=2)
    except sqlite3.Error:
        return None
    try:
        return [tuple(row) for row in conn.execute(sql).fetchall()]
    except sqlite3.Error:  # not created yet, or busy: poll again
        return None
    finally:
        conn.close()


def redeliveries(journal: Path, process: str) -> list[dict[str, object]]:
    """``redelivered`` entries of ``process``, read-only (the app may still be writing)."""
    rows = journal_rows(journal, "SELECT data FROM entries WHERE process = "
                                 f"'{process}' AND entry_type = 'redelivered'")
    return [json.loads(str(data)) for (data,) in rows or []]


def demo_room(folder: Path, journal: Path) -> str:
    """The shell command that opens the real control room on the demo, on ``journal``, with
    its files, webhook port and settings private to ``folder``."""
    env = {"PROMPTUI_DEMO_DIR": str(folder / "demo"),
           "PROMPTUI_DEMO_WEBHOOK_PORT": str(free_port()),
           "XDG_CONFIG_HOME": str(folder / "cfg"), "TERM": "xterm-256color"}
    return shlex.join(["env", *(f"{k}={v}" for k, v in env.items()),
                       str(Path(sys.executable).parent / "promptui"), "ui", "--journal",
                       str(journal)])


def test_redeliver_dead_letters_from_the_detail_screen(tmp_path: Path, tmux: Tmux) -> None:
    journal = tmp_path / "j.db"
    exit_file = tmp_path / "exit-code"
    ui = demo_room(tmp_path, journal)
    # The exit code lands in a file: the pane closes with the command.
    tmux.start(tmp_path, f"{ui}; echo $? > {shlex.quote(str(exit_file))}")

    tmux.expect(f"the table with {PROCESS} holding a dead letter",
               lambda s: (dead_count(s, PROCESS) or 0) > 0, cap=25)
    assert not redeliveries(journal, PROCESS)

    tmux.keys("/")  # filter, typed live; Enter keeps it and gives the table the focus
    tmux.expect("the filter box", lambda s: "filter:" in s, cap=5)
    tmux.keys(PROCESS, literal=True)
    tmux.expect("the filtered table", lambda s: "│ looper " not in s
               and f"│ {PROCESS} " in s, cap=5)
    tmux.keys("Enter")
    tmux.keys("Enter")  # open the only row (also when it reaches the box before the focus moves)
    tmux.expect("the detail screen", lambda s: "3 Dead" in s, cap=15)
    tmux.keys("3")
    tmux.keys("R")  # redeliver all: a bulk action asks first, Cancel focused
    tmux.expect("the redeliver question", lambda s: "distinct payload" in s, cap=5)
    tmux.keys("Tab", "Enter")  # from Cancel to "Redeliver all"

    deadline = time.monotonic() + 8
    while not redeliveries(journal, PROCESS) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert redeliveries(journal, PROCESS), f"no redelivery journaled; screen:\n{tmux.screen()}"

    tmux.keys("Escape")
    tmux.expect("the dashboard again", lambda s: " Process " in s and "3 Dead" not in s,
               cap=5)
    tmux.keys("q")
    deadline = time.monotonic() + 10
    answered = False
    while tmux.alive() and time.monotonic() < deadline:
        if not answered and "Quit? " in tmux.screen():  # a run in flight: let it finish
            tmux.keys("Tab", "Enter")  # from Cancel to "Drain, then quit"
            answered = True
        time.sleep(0.2)
    assert not tmux.alive(), f"promptui did not quit; screen:\n{tmux.screen()}"
    assert exit_file.read_text().strip() == "0", "promptui ui exited with an error"

    entries = redeliveries(journal, PROCESS)
    assert entries and all(entry.get("event_ids") for entry in entries), entries


CLOCK = re.compile(r"\b(\d\d):(\d\d):(\d\d)\b")


def seconds_of(match: re.Match[str]) -> int:
    hours, minutes, seconds = (int(g) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def activity_is_live(screen: str, within: int = 6) -> bool:
    """The Activity panel's newest line starts with a time (not scrolled sideways) within
    ``within`` seconds of the header's clock."""
    lines = screen.splitlines()
    if not lines or (header := CLOCK.search(lines[0])) is None:
        return False
    top = next((i for i, line in enumerate(lines) if "─ Activity " in line), None)
    if top is None:
        return False
    column = lines[top].index("─ Activity ") - 1  # the panel's left border
    times = [CLOCK.match(line[column + 1:]) for line in lines[top + 1:]
             if len(line) > column and line[column] == "│"]
    found = [t for t in times if t is not None]
    if not found:
        return False
    gap = (seconds_of(header) - seconds_of(found[-1])) % 86400
    return gap <= within


def test_the_activity_feed_stays_live_through_screens_filter_and_resize(
        tmp_path: Path, tmux: Tmux) -> None:
    tmux.start(tmp_path, demo_room(tmp_path, tmp_path / "j.db"))
    tmux.started = time.monotonic() - DEADLINE + 90  # this test walks through more steps
    tmux.expect("the dashboard with live activity", activity_is_live, cap=25)
    tmux.keys("Enter")
    tmux.expect("the detail screen", lambda s: "3 Dead" in s, cap=8)
    time.sleep(1.5)  # away long enough for the dashboard's feeds to miss lines
    tmux.keys("Escape")
    tmux.expect("live activity after a trip to a process", activity_is_live, cap=15)
    tmux.keys("/")
    tmux.expect("the filter box", lambda s: "filter:" in s, cap=5)
    tmux.expect("live activity with the filter box open", activity_is_live, cap=15)
    tmux.keys("Escape")
    tmux.expect("live activity after the filter box closed",
               lambda s: "filter:" not in s and activity_is_live(s), cap=15)
    tmux.run("resize-window", "-t", tmux.session, "-x", "100", "-y", "30")
    tmux.expect("live activity at 100x30", activity_is_live, cap=15)
    tmux.run("resize-window", "-t", tmux.session, "-x", str(WIDTH), "-y", str(HEIGHT))
    tmux.expect("live activity back at 80x24", activity_is_live, cap=15)
    time.sleep(4)  # and a few seconds later, still
    tmux.expect("live activity a few seconds later", activity_is_live, cap=15)
    tmux.keys("q")


KEPT = re.compile(r"Stopped cleanly\. (\d+) queued event\(s\) kept in the journal")


def test_q_keeps_the_queue_in_the_journal_and_says_how_many(tmp_path: Path, tmux: Tmux) -> None:
    """``q`` on the demo once looper has a queue: the closing line's count is what the journal
    keeps queued for the next start, and nothing is dead-lettered "process stopped"."""
    journal = tmp_path / "j.db"
    exit_file = tmp_path / "exit-code"
    ui = demo_room(tmp_path, journal)
    # The pane stays open after the room exits, to read its closing line.
    tmux.start(tmp_path, f"{ui}; echo $? > {shlex.quote(str(exit_file))}; sleep 60")
    # looper's health monitor suspends it at its first run; its interval trigger then queues
    # an event every 6 s that nothing runs (a pending row of a running process may be its run)
    tmux.expect("looper suspended", lambda s: any(
        line.startswith("│ looper ") and "suspend" in line for line in s.splitlines()), cap=30)
    queued = "SELECT count(*) FROM pending WHERE process = 'looper'"
    until = time.monotonic() + 30
    while ((journal_rows(journal, queued) or [(0,)])[0][0] or 0) == 0:  # type: ignore[operator]
        assert time.monotonic() < until, f"looper never had a queue; screen:\n{tmux.screen()}"
        time.sleep(0.2)

    tmux.keys("q")
    answered = False
    until = time.monotonic() + 40
    while not exit_file.exists():
        assert time.monotonic() < until, f"promptui did not quit; screen:\n{tmux.screen()}"
        if not answered and "Quit? " in tmux.screen():  # runs in flight: let them finish
            tmux.keys("Tab", "Enter")  # from Cancel to "Drain, then quit"
            answered = True
        time.sleep(0.2)
    assert exit_file.read_text().strip() == "0", tmux.screen()
    match = KEPT.search(tmux.screen(joined=True))
    assert match is not None, tmux.screen(joined=True)
    # Every pending row is kept for the next start: queued, or the event of a run cut short
    # (its run is open and it goes back on the queue, as a held retry does), all but a run's
    # parked for an operator (it waits in the inbox, not in the queue).
    kept = journal_rows(journal, "SELECT process, event_id FROM pending WHERE event_id NOT IN "
                                 "(SELECT event_id FROM open_runs WHERE state = 'waiting')")
    rows = journal_rows(journal, "SELECT p.process, p.event_id, o.state FROM pending p LEFT JOIN "
                                 "open_runs o ON o.event_id = p.event_id")
    assert kept is not None and len(kept) == int(match.group(1)) > 0, (rows, match.group(0))
    assert any(process == "looper" for process, _ in kept), kept
    stopped = journal_rows(journal, "SELECT process, error, attempts, at, event FROM dead_letters "
                                    "WHERE reason = 'process stopped'")
    assert stopped == [], stopped
