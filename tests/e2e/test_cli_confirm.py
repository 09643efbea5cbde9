"""One rule for confirmations on the command line (issue 18): a bulk or irreversible action asks,
saying what it will do, with "no" as the default; --yes skips the question; with no terminal on
stdin and no --yes it refuses (exit 2) and never hangs. ``dead-letters --clear`` and ``--all``
against a real ``promptui serve``; ``rewind --apply`` on a real journal, where writes to the
outside world after the target want the process name typed, as in the control room.

The questions are answered on a real pseudo-terminal (stdin is a tty, as for an operator)."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime_core.control import offline
from tests.helpers.cli import promptui_command
from tests.helpers.history import make_history, state_after_start
from tests.helpers.polling import poll
from tests.helpers.serving import Served, start_serve, write_agents

pytestmark = pytest.mark.slow

TIMEOUT = 60.0


def environ() -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "200"}
    for name in ("PROMPTUI_URL", "PROMPTUI_TOKEN"):
        env.pop(name, None)
    return env


@dataclass
class Asked:
    code: int
    stdout: str
    stderr: str


def ask(folder: Path, *args: str, question: str, answer: str) -> Asked:
    """Run the command with a terminal on stdin; once ``question`` (a regex) is on its stdout,
    type ``answer`` and Enter; its exit status and what it printed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*promptui_command(), *args], cwd=folder, env=environ(),
                            stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(follower)
    seen = {"out": b"", "err": b""}

    def read(stream: object, key: str) -> None:
        for chunk in iter(lambda: stream.read1(4096), b""):  # type: ignore[attr-defined]
            seen[key] += chunk

    readers = [threading.Thread(target=read, args=(proc.stdout, "out"), daemon=True),
               threading.Thread(target=read, args=(proc.stderr, "err"), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        poll(lambda: re.search(question, seen["out"].decode(errors="replace"))
             or proc.poll() is not None, TIMEOUT, f"the question {question!r}")
        assert proc.poll() is None, (seen["out"], seen["err"])  # it asked, and waits
        os.write(leader, answer.encode() + b"\r")
        code = proc.wait(TIMEOUT)
        for reader in readers:
            reader.join(TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(leader)
    return Asked(code, seen["out"].decode(errors="replace"), seen["err"].decode(errors="replace"))


def without_terminal(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """No terminal on stdin (a script, CI): it must answer at once, never wait for input."""
    return subprocess.run([*promptui_command(), *args], cwd=folder, env=environ(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT)


# -- dead letters ------------------------------------------------------------------------------
@pytest.fixture
def broken(tmp_path: Path) -> Iterator[Served]:
    """A served process that dead-letters every event (no retries): three, two payloads."""
    agents = write_agents(tmp_path, worker_names=(), judge=False)
    served = start_serve(tmp_path, str(agents), "--journal", str(tmp_path / "journal.db"))
    client = served.client()
    for summary in ("disk full", "disk full", "db down"):
        sent = client.post("/processes/broken/inject", json={"payload": {"summary": summary}})
        assert sent.status_code == 202, sent.text
    poll(lambda: len(letters(served)) == 3, TIMEOUT, "three dead letters")
    yield served
    assert served.stop() == 0, served.stderr()


def letters(served: Served) -> list[dict[str, object]]:
    answer = served.client().get("/processes/broken/dead-letters")
    assert answer.status_code == 200, answer.text
    rows: list[dict[str, object]] = answer.json()
    return rows


CLEAR = r"Clear 3 dead letters of broken\? They cannot be redelivered after\. \[y/N\]"
REDELIVER = r"Redeliver 3 dead letters of broken \(2 distinct payloads\)\? Each runs again\. " \
            r"\[y/N\]"


def test_clear_asks_with_no_as_the_default(broken: Served) -> None:
    folder = broken.folder
    refused = without_terminal(folder, "dead-letters", "broken", "--clear")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip() == ("error: clear 3 dead letters of broken: not asked, as "
                                      "stdin is not a terminal; pass --yes (-y) to go ahead")
    for answer in ("n", ""):  # "no", and Enter alone: the default is no
        kept = ask(folder, "dead-letters", "broken", "--clear", question=CLEAR, answer=answer)
        assert kept.code == 1 and "Nothing changed." in kept.stdout, kept
    assert len(letters(broken)) == 3
    cleared = ask(folder, "dead-letters", "broken", "--clear", question=CLEAR, answer="y")
    assert cleared.code == 0, cleared
    assert "broken: 3 dead letter(s) cleared" in cleared.stdout
    assert letters(broken) == []
    nothing = without_terminal(folder, "dead-letters", "broken", "--clear")
    assert nothing.returncode == 0 and "broken has no dead letters" in nothing.stdout


def test_redeliver_all_asks_and_yes_skips_the_question(broken: Served) -> None:
    folder = broken.folder
    refused = without_terminal(folder, "dead-letters", "broken", "--all")
    assert refused.returncode == 2 and "pass --yes (-y)" in refused.stderr, refused.stderr
    assert "redeliver 3 dead letters of broken (2 distinct payloads)" in refused.stderr
    kept = ask(folder, "dead-letters", "broken", "--all", question=REDELIVER, answer="n")
    assert kept.code == 1 and "Nothing changed." in kept.stdout, kept
    assert len(letters(broken)) == 3
    again = ask(folder, "dead-letters", "broken", "--all", question=REDELIVER, answer="y")
    assert again.code == 0 and "broken: 3 dead letter(s) redelivered" in again.stdout, again
    # they fail again (the model always raises) and come back as dead letters
    poll(lambda: len(letters(broken)) == 3, TIMEOUT, "the redelivered events to fail again")
    done = without_terminal(folder, "dead-letters", "broken", "--clear", "--yes")
    assert done.returncode == 0 and "3 dead letter(s) cleared" in done.stdout, done.stderr
    assert letters(broken) == []


# -- rewind --------------------------------------------------------------------------------------
def entry_of(path: Path, entry_type: str, index: int) -> str:
    return offline.read_entries(path, "books", entry_type=entry_type)[index].entry_id


def test_rewind_past_outside_writes_wants_the_process_name(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    asyncio.run(make_history(path))
    target = entry_of(path, "run_started", 1)  # two booking writes after it
    apply = ("rewind", "books", target, "-j", str(path), "--apply")
    question = r"2 write\(s\) to the outside world after it stay done\.\s+Type books to go " \
               r"ahead \(anything else cancels\)"
    refused = without_terminal(tmp_path, *apply)
    assert refused.returncode == 2 and "pass --yes (-y)" in refused.stderr, refused.stderr
    for answer in ("y", "book", ""):  # a yes is not the name
        kept = ask(tmp_path, *apply, question=question, answer=answer)
        assert kept.code == 1 and "Nothing changed." in kept.stdout, kept
        assert "Not undone: 2 write(s)" in kept.stdout  # the plan came first
    assert asyncio.run(state_after_start(path)) == (3, 6)
    done = ask(tmp_path, *apply, question=question, answer="books")
    assert done.code == 0 and f"Rewound books to just before {target}" in done.stdout, done
    assert asyncio.run(state_after_start(path)) == (1, 2)


def test_rewind_without_outside_writes_asks_yes_or_no(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    asyncio.run(make_history(path))
    target = entry_of(path, "run_finished", -1)  # nothing written to the world after it
    apply = ("rewind", "books", target, "-j", str(path), "--apply")
    question = rf"Rewind books to just before {target} \(mode both\)\? History is kept; a " \
               r"rewind entry is appended\. \[y/N\]"
    kept = ask(tmp_path, *apply, question=question, answer="")
    assert kept.code == 1 and "Nothing changed." in kept.stdout, kept
    done = ask(tmp_path, *apply, question=question, answer="y")
    assert done.code == 0 and "Rewound books" in done.stdout, done
    started = time.monotonic()
    yes = without_terminal(tmp_path, *apply, "--yes")
    assert yes.returncode == 0 and "Rewound books" in yes.stdout, yes.stderr
    assert time.monotonic() - started < TIMEOUT
    assert len(offline.read_entries(path, "books", entry_type="rewind")) == 2
