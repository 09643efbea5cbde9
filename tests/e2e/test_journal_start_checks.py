"""Journal faults at the command line's start: 'promptui run', 'serve' and 'ui' refuse a journal
another runtime holds (naming it), a path that cannot hold a journal, and a damaged journal
(damaged where recovery reads it, cut short, its schema page overwritten), with one line and
exit status 2 before anything starts, naming the salvage command; the runtime that holds the
journal is not disturbed, and a write parked for an operator never runs again.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import promptui_command
from tests.helpers.polling import poll
from tests.helpers.serving import WRITER, WRITER_TOOLS, start_serve, write_agents

pytestmark = pytest.mark.slow

JOURNAL = Path(".promptui") / "journal.db"  # the manifests' default, from the test's folder
SINCE = r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


def cli(folder: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PROMPTUI_DEMO_WEBHOOK_PORT": "0",
           "PROMPTUI_DEMO_DIR": str(folder / "demo")}
    env.pop("PROMPTUI_CRASH_AT", None)
    return subprocess.run([*promptui_command(), *args], cwd=folder, env=env, timeout=timeout,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)


def refused(out: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a command that refused to start (exit 2, no traceback)."""
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out.stderr
    return errors[0].removeprefix("error: ")


def starts(folder: Path, agents: Path) -> list[subprocess.CompletedProcess[str]]:
    """What each start command answers (ui's refusal comes before its screen opens)."""
    return [cli(folder, "serve", str(agents), "--port", "0", "--journal", str(JOURNAL)),
            cli(folder, "run", str(agents), "--seconds", "1"),
            cli(folder, "ui", str(agents), "--journal", str(JOURNAL))]


# -- 1. two runtimes on one journal ---------------------------------------------------------------
def test_a_second_runtime_is_refused_naming_the_holder_and_the_first_goes_on(
        tmp_path: Path) -> None:
    agents = write_agents(tmp_path, broken=False, judge=False)
    first = start_serve(tmp_path, str(agents), "--journal", str(JOURNAL))
    client = first.client()
    held = (rf"journal {re.escape(str(JOURNAL))} is held by pid {first.proc.pid} on host "
            rf"{re.escape(socket.gethostname())} {SINCE}; stop that runtime first, or use "
            r"another --journal")
    for out in starts(tmp_path, agents):
        assert re.fullmatch(held, refused(out)), out.stderr
    absolute = str(tmp_path / JOURNAL)
    # Offline writes on the file are refused too, saying how to go through the server instead.
    through = (rf"journal {re.escape(absolute)} is held by promptui serve \(pid "
               rf"{first.proc.pid}, {re.escape(first.url)}\): run this with --url "
               rf"{re.escape(first.url)}, or stop the server")
    rewind = cli(tmp_path, "rewind", "worker", "worker:1", "--apply", "--yes", "-j", absolute)
    assert re.fullmatch(through, refused(rewind))
    fork = cli(tmp_path, "fork", "worker", "worker:1", "copy", "-j", absolute)
    assert re.fullmatch(through, refused(fork))
    # Readers never take the lock.
    assert cli(tmp_path, "journal", "verify", "-j", absolute).returncode == 0
    assert cli(tmp_path, "logs", "worker", "-n", "1", "-j", absolute).returncode == 0
    # The first runtime was not disturbed: it accepts, runs and journals.
    event = client.post("/processes/worker/inject", json={"payload": {"task": "a"}})
    assert event.status_code == 202, event.text
    event_id = event.json()["event_id"]
    poll(lambda: [r for r in client.get("/processes/worker/runs").json()
                  if r["event_id"] == event_id and r["state"] == "succeeded"],
         what="the first server's run")
    assert first.stop() == 0, first.stderr()
    assert "journal write failed" not in first.stderr()


def test_a_runtime_killed_with_sigkill_does_not_block_the_next_start(tmp_path: Path) -> None:
    agents = write_agents(tmp_path, broken=False, judge=False)
    first = start_serve(tmp_path, str(agents), "--journal", str(JOURNAL))
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    assert (tmp_path / JOURNAL.with_name("journal.db.lock")).exists()  # left by the dead one
    again = start_serve(tmp_path, str(agents), "--journal", str(JOURNAL), log_name="2.log")
    assert again.client().get("/processes").status_code == 200
    assert again.stop() == 0, again.stderr()
    assert not (tmp_path / JOURNAL.with_name("journal.db.lock")).exists()


# -- 2. bad journal paths -------------------------------------------------------------------------
def manifest_on(folder: Path, journal: str) -> Path:
    """One journaling manifest whose journal is at ``journal`` ('promptui run' has no
    --journal: the manifest names it)."""
    agents = folder / "agents"
    agents.mkdir(exist_ok=True)
    (agents / "one.agent").write_text(f'version: "1.0"\nname: one\nmodel: echo\n'
                                      f"journal: {{level: checkpoint, path: {journal!r}}}\n")
    return agents


BAD_PATHS = {
    "a parent that is a file": ("file/journal.db", r"cannot make the folder {parent} for "
                                r"journal {path}: {parent} is a file, not a folder; move that "
                                r"file, or use another --journal"),
    # As root, permission bits do not stop a write; /sys refuses even root (see README).
    "a read-only folder": ("/sys/journal.db", r"cannot write in the folder /sys of journal "
                           r"{path}: .+; make it writable by this user, or use another "
                           r"--journal"),
    "a parent that cannot be made": ("/sys/promptui-test/journal.db",
                                     r"cannot make the folder {parent} for journal {path}: .+; "
                                     r"create it \(writable by this user\), or use another "
                                     r"--journal"),
}


@pytest.mark.parametrize("case", list(BAD_PATHS))
def test_a_path_that_cannot_hold_a_journal_is_one_line_and_exit_2(tmp_path: Path,
                                                                     case: str) -> None:
    given, pattern = BAD_PATHS[case]
    if given.startswith("/sys") and not Path("/sys/kernel").is_dir():
        pytest.skip("needs Linux /sys")
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("a file")
    path = Path(given)
    expected = pattern.format(path=re.escape(str(path)), parent=re.escape(str(path.parent)))
    agents = manifest_on(tmp_path, given)
    for out in [cli(tmp_path, "run", str(agents), "--seconds", "1"),
                cli(tmp_path, "serve", str(agents), "--port", "0", "--journal", given),
                cli(tmp_path, "ui", str(agents), "--journal", given)]:
        assert re.fullmatch(expected, refused(out)), out.stderr
    assert (tmp_path / "file").read_text() == "a file"
    assert list((tmp_path / "folder").iterdir()) == []


def test_a_folder_holds_the_journal_as_journal_db(tmp_path: Path) -> None:
    """A journal path naming a folder (the reference runtime's ``.promptise/journal``) keeps
    the journal inside it as journal.db, rather than refusing."""
    (tmp_path / "folder").mkdir()
    agents = manifest_on(tmp_path, "folder")
    out = cli(tmp_path, "run", str(agents), "--seconds", "0.5", "--json")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "folder" / "journal.db").stat().st_size > 0


def test_missing_parent_folders_are_made(tmp_path: Path) -> None:
    agents = manifest_on(tmp_path, "state/deep/journal.db")
    out = cli(tmp_path, "run", str(agents), "--seconds", "0.5", "--json")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "state" / "deep" / "journal.db").stat().st_size > 0


# -- 3. a damaged journal is caught at start ------------------------------------------------------
def parked_write(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A served runtime SIGKILLed right after a write's intent is durable, then started again
    and stopped: the run waits with unknown_write_outcome, the tool never ran."""
    agents = folder / "agents"
    agents.mkdir()
    (agents / "writer.agent").write_text(WRITER)
    (agents / "ledger_tools.py").write_text(WRITER_TOOLS)
    args = (str(agents), "--journal", str(JOURNAL))
    monkeypatch.setenv("PROMPTUI_CRASH_AT", "tool_intent:1")
    doomed = start_serve(folder, *args)
    monkeypatch.delenv("PROMPTUI_CRASH_AT")
    answer = doomed.client().post("/processes/writer/inject", json={"payload": {"ref": "P-1"}})
    assert answer.status_code == 202
    assert doomed.proc.wait(30) == -signal.SIGKILL
    parked = start_serve(folder, *args, log_name="parked.log")
    client = parked.client()
    poll(lambda: client.get("/processes/writer/runs", params={"state": "waiting"}).json(),
         what="the run waiting for an operator")
    assert parked.stop() == 0, parked.stderr()
    assert not (folder / "ledger.txt").exists()
    return agents


def flip_intent(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        [(key,)] = conn.execute("SELECT '\"effect\":\"write\"' FROM entries "
                                "WHERE entry_type = 'tool_intent'").fetchall()
    data = bytearray(db.read_bytes())
    data[data.index(key.encode()) + 2] ^= 0x01
    db.write_bytes(bytes(data))


def lose_open_run(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM open_runs")


def cut_short(db: Path) -> None:
    """The file cut to 90 % (a disk that filled up, a copy that stopped)."""
    data = db.read_bytes()
    db.write_bytes(data[:len(data) * 9 // 10])


def schema_page(db: Path) -> None:
    """Page 1's schema area (after the 100-byte file header) overwritten."""
    data = bytearray(db.read_bytes())
    data[100:4096] = b"\xa5" * (4096 - 100)
    db.write_bytes(bytes(data))


DAMAGE = {"flipped": (flip_intent, "is damaged where a start reads it"),
          "index": (lose_open_run, "is damaged where a start reads it"),
          "cut": (cut_short, "cannot be read"), "schema": (schema_page, "cannot be read")}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_journal_refuses_every_start_and_the_write_never_runs_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    agents = parked_write(tmp_path, monkeypatch)
    db = tmp_path / JOURNAL
    make, what = DAMAGE[damage]
    make(db)
    verify = cli(tmp_path, "journal", "verify", "-j", str(JOURNAL))
    assert verify.returncode == 1 and "damaged:" in verify.stdout
    before, files = db.read_bytes(), sorted(db.parent.iterdir())
    for out in starts(tmp_path, agents):
        line = refused(out)
        assert line.startswith(f"journal {JOURNAL} {what}: "), line
        assert f"'promptui journal salvage {JOURNAL}' writes a new journal" in line
        assert f"'promptui journal verify -j {JOURNAL}'" in line
        assert "on_damage: start_fresh" in line
    assert db.read_bytes() == before and sorted(db.parent.iterdir()) == files
    assert not (tmp_path / "ledger.txt").exists()
    # The operator salvages it: the parked write still waits, and never ran.
    salvaged = cli(tmp_path, "journal", "salvage", str(JOURNAL), "-o", "salvaged.db")
    assert salvaged.returncode == 0, salvaged.stdout + salvaged.stderr
    assert "passes 'promptui journal verify'" in salvaged.stdout
    assert db.read_bytes() == before
    again = start_serve(tmp_path, str(agents), "--journal", "salvaged.db", log_name="again.log")
    client = again.client()
    waiting = poll(lambda: client.get("/processes/writer/runs",
                                      params={"state": "waiting"}).json(),
                   what="the parked run waiting again")
    assert [r["state"] for r in waiting] == ["waiting"]
    assert again.stop() == 0, again.stderr()
    assert not (tmp_path / "ledger.txt").exists()
