"""The shell examples of the hand-written docs (README.md, docs/**/*.md) run as written.

Each page's runnable ``bash`` and ``console`` blocks run in order in one empty folder, as a
reader following the page would, with this checkout's venv first on the PATH (``promptui``,
``python3``), HOME in the folder and the demo's webhook on a free port. A ``bash`` block must
end with status 0 (``set -euo pipefail``); a ``console`` transcript's commands are run and the
output it shows must be what they print (its lines in order; a transcript may show a failure).
A block starting ``# with: promptui serve`` runs while ``promptui serve`` serves the demo in
the folder, and the server must stop cleanly after it. A block starting ``# not run: <reason>``
is skipped. The convention is in docs/contributing.md.

Also here: the first five minutes tell you to kill the runtime by the pid that ``promptui
status`` shows; that pid is the runtime's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import promptui_command
from tests.helpers.doc_blocks import ROOT, Block, blocks, console_steps, pages
from tests.helpers.polling import poll
from tests.helpers.serving import start_serve

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
TIMEOUT = 180  # seconds for one block


def _clone_venv(folder: Path) -> None:
    """Make ``folder`` stand for a clone with its venv, so that ``.venv/bin/promptui`` and
    ``. .venv/bin/activate`` work as the docs write them: a .venv/bin of links to this venv's
    promptui, python and activate (never pip: a stray install must not reach the real venv)."""
    bin_dir = folder / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("promptui", "python", "python3", "activate"):
        if (BIN / name).exists():
            (bin_dir / name).symlink_to(BIN / name)


def _runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang in ("bash", "console") and b.not_run is None]


PAGES = [p for p in pages() if _runnable(p)]


def _env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROMPTUI_")}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", HOME=str(folder / "home"),
               XDG_CONFIG_HOME=str(folder / "home" / ".config"), COLUMNS="200",
               PROMPTUI_DEMO_WEBHOOK_PORT="0", PYTHONDONTWRITEBYTECODE="1")
    return env


def _sh(script: str, folder: Path, *, strict: bool = True) -> subprocess.CompletedProcess[str]:
    flags = ["-euo", "pipefail"] if strict else []
    try:
        return subprocess.run(["bash", *flags, "-c", script], cwd=folder, env=_env(folder),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"still running after {TIMEOUT} s:\n{script}\n{exc.stdout}\n{exc.stderr}")


def _run_bash(block: Block, folder: Path) -> None:
    done = _sh(block.text, folder)
    assert done.returncode == 0, (f"{block.where} exited {done.returncode}:\n{block.text}\n"
                                  f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")


def _run_console(block: Block, folder: Path) -> None:
    for command, shown in console_steps(block):
        done = _sh(command, folder, strict=False)
        printed = [line.rstrip() for line in (done.stdout + done.stderr).splitlines()]
        at = 0
        for expected in (line.rstrip() for line in shown if line.strip()):
            while at < len(printed) and printed[at] != expected:
                at += 1
            assert at < len(printed), (f"{block.where}: '$ {command}' did not print\n"
                                       f"  {expected}\nafter the lines before it; it printed:\n"
                                       + "\n".join(printed))
            at += 1


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_shell_examples_of_the_page_run(page: Path, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    _clone_venv(tmp_path)
    for block in _runnable(page):
        if block.lang == "console":
            _run_console(block, tmp_path)
        elif block.with_serve:
            served = start_serve(tmp_path)
            try:
                _run_bash(block, tmp_path)
            finally:
                status = served.stop()
            assert status == 0, f"promptui serve exited {status}:\n{served.stderr()}"
        else:
            _run_bash(block, tmp_path)


def test_status_shows_the_pid_to_kill_and_it_is_the_runtime(tmp_path: Path) -> None:
    """getting-started.md, the first five minutes, step 4: 'promptui status' (in the same
    folder, no server) names the runtime that has the journal open, by its pid; killing that
    pid kills the runtime, and then nobody holds the journal."""
    (tmp_path / "home").mkdir()
    env = _env(tmp_path)
    runtime = subprocess.Popen([*promptui_command(), "run", "--seconds", "120"], cwd=tmp_path,
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        def held() -> dict[str, object] | None:
            assert runtime.poll() is None, "promptui run ended early"
            done = subprocess.run([*promptui_command(), "status", "--json"], cwd=tmp_path,
                                  env=env, capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                return None  # no journal yet
            holder = json.loads(done.stdout).get("held_by")
            return holder if isinstance(holder, dict) else None

        holder = poll(held, 60, "promptui status to name the runtime holding the journal",
                      interval=0.2)
        assert holder["pid"] == runtime.pid
        table = subprocess.run([*promptui_command(), "status"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=60).stdout
        assert f"Open in a runtime now: pid {runtime.pid} on host" in " ".join(table.split())
        os.kill(runtime.pid, signal.SIGKILL)
        assert runtime.wait(30) == -signal.SIGKILL
    finally:
        if runtime.poll() is None:
            runtime.kill()
            runtime.wait(30)
    after = subprocess.run([*promptui_command(), "status", "--json"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
    assert json.loads(after.stdout)["held_by"] is None
