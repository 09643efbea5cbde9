"""The command line's edges (issue 18): a fork name the room refuses, a write into a journal a
running ``promptui serve`` holds, ``logs --type`` with a type nothing journals, an unknown id in
the config file's ``[keymap]``, help that reads like a command line, and uvicorn's lines in the
log of ``promptui serve`` once each. Each drives the real ``promptui`` command (a subprocess, or
typer's CliRunner for the help pages) against real journal files and a real server."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from promptui import actions
from promptui.cli import app
from runtime_core.control import offline
from tests.helpers.cli import promptui_command
from tests.helpers.history import make_history
from tests.helpers.polling import poll
from tests.helpers.serving import start_serve, write_agents

RULE = "a letter, then letters, digits, '-' or '_' (at most 64)"


def promptui(folder: Path, *args: str, env: dict[str, str] | None = None,
             timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The real command in ``folder``, with no terminal on stdin and no server named."""
    environ = {**os.environ, "PROMPTUI_DEMO_WEBHOOK_PORT": "0",
               "PROMPTUI_DEMO_DIR": str(folder / "demo"), **(env or {})}
    for name in ("PROMPTUI_URL", "PROMPTUI_TOKEN", "PROMPTUI_CONFIG"):
        if name not in (env or {}):
            environ.pop(name, None)
    return subprocess.run([*promptui_command(), *args], cwd=folder, env=environ,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


def one_error(out: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a command refused with exit status 2 (no traceback)."""
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr + out.stdout
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out.stderr
    return errors[0].removeprefix("error: ")


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """A stopped process ``books`` with three runs, each a write, in a journal file."""
    path = tmp_path / "j.db"
    asyncio.run(make_history(path))
    return path


# -- 1. fork names ---------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["bad name!", "9lives", "_under", "a.b", "x" * 65, ""])
def test_fork_refuses_a_name_the_control_room_refuses(tmp_path: Path, history: Path,
                                                      name: str) -> None:
    before = offline.read_entries(history, "books")
    refused = one_error(promptui(tmp_path, "fork", "books", "books:3", name, "-j", str(history)))
    assert refused == f"{name!r} is not a process name: {RULE}"
    assert offline.process_names(history) == ["books"]  # nothing was recorded
    assert offline.read_entries(history, "books") == before


@pytest.mark.slow
def test_fork_accepts_a_name_the_control_room_accepts(tmp_path: Path, history: Path) -> None:
    name = "B" + "x_-9" * 15 + "abc"  # 64 characters
    done = promptui(tmp_path, "fork", "books", "books:3", name, "-j", str(history))
    assert done.returncode == 0, done.stderr
    assert sorted(offline.process_names(history)) == sorted(["books", name])


# -- 2. writes to a journal a running server holds ------------------------------------------------
@pytest.mark.slow
def test_writes_go_through_the_running_server_or_say_how(tmp_path: Path) -> None:
    agents = write_agents(tmp_path, broken=False, judge=False)
    journal = tmp_path / "journal.db"
    served = start_serve(tmp_path, str(agents), "--journal", str(journal))
    client = served.client()
    event = client.post("/processes/worker/inject", json={"payload": {"task": "a"}})
    assert event.status_code == 202, event.text
    event_id = event.json()["event_id"]
    poll(lambda: [r for r in client.get("/processes/worker/runs").json()
                  if r["event_id"] == event_id and r["state"] == "succeeded"],
         what="the worker's run")
    names = {p["name"] for p in client.get("/processes").json()}

    # Named as a file (-j), the journal is not written: the refusal says how to do it.
    held = (rf"journal {re.escape(str(journal))} is held by promptui serve \(pid "
            rf"{served.proc.pid}, {re.escape(served.url)}\): run this with --url "
            rf"{re.escape(served.url)}, or stop the server")
    for args in (["fork", "worker", "worker:1", "copy"],
                 ["rewind", "worker", "worker:1", "--apply", "--yes"],
                 ["rewind", "worker", "worker:1", "--plan"]):
        assert re.fullmatch(held, one_error(promptui(tmp_path, *args, "-j", str(journal))))
    assert {p["name"] for p in client.get("/processes").json()} == names

    # A bad name is refused before anything reaches the server.
    bad = one_error(promptui(tmp_path, "fork", "worker", "worker:1", "bad name!"))
    assert bad == f"'bad name!' is not a process name: {RULE}"

    # Without -j the server running here takes the fork: the new process runs there at once.
    forked = promptui(tmp_path, "fork", "worker", "worker:1", "worker-b")
    assert forked.returncode == 0, forked.stderr
    assert f"as worker-b on {served.url}" in forked.stdout
    rows = poll(lambda: {p["name"]: p for p in client.get("/processes").json()
                         if p["name"] == "worker-b"}, what="the fork on the server")
    assert rows["worker-b"]["state"] == "running"
    again = promptui(tmp_path, "fork", "worker", "worker:1", "worker-b")
    assert again.returncode == 1 and "worker-b" in again.stderr  # the server's refusal
    # ...and so does a rewind, applied while the process runs.
    rewound = promptui(tmp_path, "rewind", "worker", "worker:1", "--apply", "--yes")
    assert rewound.returncode == 0, rewound.stderr
    assert "it continues from this state" in rewound.stdout

    assert served.stop() == 0, served.stderr()
    assert "journal write failed" not in served.stderr()
    assert promptui(tmp_path, "journal", "verify", "-j", str(journal)).returncode == 0
    assert "worker-b" in offline.process_names(journal)


# -- 3. logs --type --------------------------------------------------------------------------
@pytest.mark.slow
def test_logs_with_an_unknown_type_names_the_valid_ones(tmp_path: Path, history: Path) -> None:
    out = promptui(tmp_path, "logs", "books", "--type", "bogus", "-j", str(history))
    message = one_error(out)
    assert out.stdout == ""
    assert message.startswith("unknown entry type 'bogus'; use one of: ")
    listed = message.split("use one of: ", 1)[1].split(", ")
    assert listed == list(offline.ENTRY_TYPES)
    assert {"run_finished", "tool_intent", "dead_lettered", "rewind", "forked"} <= set(listed)
    # refused before a server is asked (none listens there)
    remote = promptui(tmp_path, "logs", "books", "-t", "bogus", "--url", "http://127.0.0.1:9")
    assert one_error(remote) == message
    # a valid type still lists its entries
    finished = promptui(tmp_path, "logs", "books", "--type", "run_finished", "-j", str(history))
    assert finished.returncode == 0, finished.stderr
    assert len(finished.stdout.splitlines()) == 3


# -- 4. the keymap ----------------------------------------------------------------------------
def every_spec_id() -> set[str]:
    found = set()
    for value in vars(actions).values():
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, actions.ActionSpec):
                found.add(item.binding_id)
    return found


def open_room(folder: Path, keymap: str) -> subprocess.CompletedProcess[str]:
    """``promptui ui`` with ``keymap`` as the config file's [keymap] table, stopped at its
    unknown --theme, after the config file was read and before the screen opens."""
    config = folder / "xdg" / "promptui" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'theme = "promptui-dark"\n\n[keymap]\n{keymap}')
    agents = write_agents(folder, broken=False, judge=False)
    return promptui(folder, "ui", str(agents), "--journal", str(folder / "j.db"),
                    "--theme", "no-such-theme", env={"XDG_CONFIG_HOME": str(folder / "xdg")})


@pytest.mark.slow
def test_an_unknown_keymap_id_is_named_with_the_valid_ids(tmp_path: Path) -> None:
    out = open_room(tmp_path, '"promptui.quitt" = "x"\n"promptui.feed.follow" = "F"\n'
                              '"promptui.quit" = "q,ctrl+q"\n')
    assert one_error(out).startswith("unknown theme 'no-such-theme'")
    warnings = [line.removeprefix("warning: ") for line in out.stderr.splitlines()
                if line.startswith("warning: ")]
    assert len(warnings) == 2, out.stderr
    config = tmp_path / "xdg" / "promptui" / "config.toml"
    assert warnings[0] == (f"{config}:4: [keymap] 'promptui.quitt' is not a binding id, so it "
                           "is ignored (did you mean 'promptui.quit'?)")
    valid = set(warnings[1].split(": ", 1)[1].split(", "))
    assert every_spec_id() <= valid  # every action of promptui.actions
    assert {"promptui.feed.follow", "promptui.rewind.apply", "promptui.dialog.cancel"} <= valid


@pytest.mark.slow
def test_a_keymap_of_known_ids_says_nothing(tmp_path: Path) -> None:
    out = open_room(tmp_path, '"promptui.feed.follow" = "F"\n"promptui.detail.redeliver" = '
                              '"r,ctrl+d"\n')
    assert one_error(out).startswith("unknown theme 'no-such-theme'")
    assert "warning" not in out.stderr


# -- 5. help --------------------------------------------------------------------------------------
TYPE_LABEL = re.compile(r"<[\w\[\]|, .]+>")  # typer's "<bool>", "<list[Path]>", "<plain|json>"


def command_paths() -> list[list[str]]:
    """Every command and group of the app, as the words that reach it."""
    root = typer.main.get_command(app)
    found: list[list[str]] = [[]]

    def walk(group: object, words: list[str]) -> None:
        for name, command in getattr(group, "commands", {}).items():
            found.append([*words, name])
            walk(command, [*words, name])

    walk(root, [])
    return found


@pytest.mark.parametrize("words", command_paths(), ids=lambda words: " ".join(words) or "-")
def test_help_reads_like_a_command_line(words: list[str]) -> None:
    shown = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert not TYPE_LABEL.findall(shown.output), shown.output
    for line in shown.output.splitlines():  # a flag has nothing between its name and its help
        if re.search(r"│ --(help|yes|json|plan|apply|all|clear|follow|read-only|version)\b",
                     line):
            assert not re.search(r"--[\w/-]+(\s+-\w)?\s+[A-Z]{2,}\b", line), line


@pytest.mark.slow
def test_help_of_the_real_command() -> None:
    out = subprocess.run([*promptui_command(), "rewind", "--help"], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "COLUMNS": "120"})
    assert out.returncode == 0, out.stderr
    assert "Usage: promptui rewind [OPTIONS] PROCESS [ENTRY]" in out.stdout
    assert re.search(r"--journal\s+-j\s+PATH\s", out.stdout)
    assert re.search(r"--limit\s+-n\s+N \[x>=1\]\s", out.stdout)
    assert re.search(r"--yes\s+-y\s+Apply without asking", out.stdout)
    serve = subprocess.run([*promptui_command(), "serve", "--help"], capture_output=True,
                           text=True, timeout=60, env={**os.environ, "COLUMNS": "120"})
    assert "[PATHS]..." in serve.stdout and re.search(r"--log-format\s+\[plain\|json\]",
                                                      serve.stdout)
    assert re.search(r"--drain-timeout\s+SECONDS", serve.stdout)
    assert not TYPE_LABEL.findall(out.stdout + serve.stdout)


# -- 6. uvicorn's lines in promptui serve's log ---------------------------------------------------
HOOKED = """\
version: "1.0"
name: hooked
instructions: Note the alert.
model:
  provider: scripted
  turns:
    - reply: Noted.
triggers:
  - {type: webhook, webhook_host: 127.0.0.1, webhook_port: 0, webhook_path: /alerts}
journal: {level: checkpoint}
"""


@pytest.mark.slow
def test_uvicorn_lines_appear_once_with_a_webhook_server_running(tmp_path: Path) -> None:
    agents = write_agents(tmp_path, broken=False, judge=False)
    (agents / "hooked.agent").write_text(HOOKED)
    served = start_serve(tmp_path, str(agents), "--journal", str(tmp_path / "journal.db"))
    client = served.client()
    triggers = client.get("/processes/hooked/triggers")
    assert triggers.status_code == 200 and triggers.json(), triggers.text  # its server runs
    assert served.stop() == 0, served.stderr()
    log = served.stderr()
    for line in ("Started server process", "Waiting for application startup",
                 "Application startup complete", "Uvicorn running on", "Shutting down",
                 "Waiting for application shutdown", "Application shutdown complete",
                 "Finished server process"):
        assert log.count(line) == 1, (line, log)
