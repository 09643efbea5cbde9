"""``promptui validate`` finds what would otherwise fail only at start, each at its field: every
case tests/e2e/test_start_failures.py starts (and sees fail), plus tool modules that hang,
crash or exit, scripts that are alias bombs, watch paths under a file, webhook paths wanted
twice. A webhook port in use is a warning. A manifest that validates cleanly does start."""

from __future__ import annotations

import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers.cli import promptui_command
from tests.helpers.ports import free_port
from tests.helpers.start_failures import CASES, manifest, tools, write_case

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HANG = 90.0


def promptui(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([*promptui_command(), *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=HANG, stdin=subprocess.DEVNULL)


def lines_of(done: subprocess.CompletedProcess[str], kind: str) -> list[str]:
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return [line.removeprefix(f"{kind} ") for line in done.stdout.splitlines()
            if line.startswith(f"{kind} ")]


def points_at(problem: str, file: Path, field: str, words: str) -> None:
    """``problem`` is ``file:line:col: field: ...`` (or a field inside it) and that line of
    the file has ``words``."""
    assert problem.startswith(f"{file}:"), problem
    assert f": {field}: " in problem or f": {field}." in problem, problem
    line = int(problem[len(str(file)) + 1:].split(":", 1)[0])
    assert words in file.read_text().splitlines()[line - 1], problem


@pytest.mark.parametrize("case", list(CASES))
def test_validate_reports_what_the_start_would_fail_on(case: str, tmp_path: Path,
                                                       taken_port: int) -> None:
    agents = write_case(tmp_path, case, taken_port)
    done = promptui(["validate", str(agents), *(["--connect"] if "mcp" in case else [])],
                    tmp_path)
    _, _, _, field, cause = CASES[case]
    file = agents / f"{case}.agent"
    if case == "webhook-port-taken":  # it may be free by then: a warning, not an error
        assert done.returncode == 0, done.stdout
        (warning,) = lines_of(done, "warning")
        points_at(warning, file, f"{field}.webhook_port", "webhook_port")
        assert cause in warning and f"127.0.0.1:{taken_port}" in warning
        return
    assert done.returncode == 1, done.stdout + done.stderr
    if case == "mcp-server-exits":  # --connect's own report
        assert f"error servers.ledger: {cause}" in done.stdout
        return
    (error,) = lines_of(done, "error")
    points_at(error, file, field, {"tools": "path:", "triggers": "type:",
                                   "model": "model:"}[field.split("[")[0]])
    assert cause in error, error


HANGS = "import time\ntime.sleep(120)\ndef fn() -> None:\n    pass\n"
CRASHES = "import os\nos._exit(9)\n"
STARRED = "def starred(*args: int) -> int:\n    return 0\n"
FINE = '''def fine() -> str:\n    """A tool that loads."""\n    return "fine"\n'''
BOMB = "turns:\n  - reply: x\nlaughs:\n" + "".join(
    f"  x{i}: &x{i} [" + ", ".join([f"*x{i - 1}" if i else "lol"] * 9) + "]\n" for i in range(9))


def test_each_tool_is_imported_in_a_child_and_blamed_by_name(tmp_path: Path) -> None:
    """A module that hangs, crashes the interpreter or can't be described: each is an error
    at its own tools[i]; the tools after them are still checked; validate itself survives."""
    for name, text in {"hangs.py": HANGS, "crashes.py": CRASHES, "starred.py": STARRED,
                       "goodtools.py": FINE}.items():
        (tmp_path / name).write_text(text)
    agent = tmp_path / "tools.agent"
    agent.write_text(manifest("tools", tools("hangs:fn", "crashes:fn", "starred:starred",
                                             "goodtools:fine", "goodtools:fine", "json:dumps")))
    started = time.monotonic()
    done = promptui(["validate", "--import-timeout", "2", str(agent)], tmp_path)
    assert time.monotonic() - started < 30
    assert done.returncode == 1, done.stdout + done.stderr
    errors = lines_of(done, "error")
    assert [e.split(": ", 2)[1] for e in errors] == ["tools[0]", "tools[1]", "tools[2]",
                                                     "tools[4]"], errors
    points_at(errors[0], agent, "tools[0]", "hangs:fn")
    points_at(errors[3], agent, "tools[4]", "goodtools:fine")
    assert "'hangs:fn'" in errors[0] and "did not finish within 2 s" in errors[0]
    assert "importing module 'crashes' ended the process (exit status 9)" in errors[1]
    assert "*args cannot be described to a model" in errors[2]
    assert "two tools are named 'fine'" in errors[3]
    skipped = promptui(["validate", "--no-imports", str(agent)], tmp_path)
    assert skipped.returncode == 0 and "ok tools" in skipped.stdout


def test_scripts_watch_paths_and_webhook_paths(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text(BOMB)
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "script.agent").write_text(manifest("script", "", "model: scripted:bomb.yaml\n"))
    (tmp_path / "watch.agent").write_text(manifest(
        "watch", f"triggers:\n  - {{type: file_watch, watch_path: '{tmp_path}/a-file/inbox'}}\n"))
    hooks = "triggers:\n  - {type: webhook, webhook_port: PORT, webhook_path: /in}\n"
    port = free_port()  # free now; both hooks want /in on it
    (tmp_path / "hook-a.agent").write_text(manifest("hook-a", hooks.replace("PORT", str(port))))
    (tmp_path / "hook-b.agent").write_text(manifest("hook-b", hooks.replace("PORT", str(port))))
    done = promptui(["validate", str(tmp_path)], tmp_path)
    assert done.returncode == 1
    errors = lines_of(done, "error")
    assert len(errors) == 3, errors
    hook, script, watch = errors
    points_at(hook, tmp_path / "hook-b.agent", "triggers[0].webhook_path", "webhook_path")
    assert f"{tmp_path / 'hook-a.agent'}: triggers[0] already wants path '/in'" in hook
    assert script.startswith(f"{tmp_path / 'script.agent'}:4:8: model: model script ")
    assert "bomb.yaml:" in script and "the document grows past 100,000 YAML nodes" in script
    points_at(watch, tmp_path / "watch.agent", "triggers[0].watch_path", "watch_path")
    assert f"watch_path '{tmp_path}/a-file/inbox' cannot be created: " in watch
    assert "ok hook-a" in done.stdout and "ok hook-b" not in done.stdout


def test_a_manifest_that_validates_cleanly_starts(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    (agents / "scripts").mkdir(parents=True)
    (agents / "goodtools.py").write_text(FINE)
    (agents / "scripts" / "reply.yaml").write_text("turns:\n  - reply: done\n")
    (agents / "worker.agent").write_text(manifest("worker", textwrap.dedent(f"""\
        tools:
          - {{path: "goodtools:fine", effect: read}}
        triggers:
          - {{type: interval, seconds: 0.2}}
          - {{type: file_watch, watch_path: '{tmp_path}/inbox/new'}}
          - {{type: webhook, webhook_port: 0, webhook_path: /in}}
        """), "model: scripted:scripts/reply.yaml\n"))
    checked = promptui(["validate", str(agents)], tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert lines_of(checked, "error") == [] and lines_of(checked, "warning") == []
    ran = promptui(["run", str(agents), "--seconds", "1"], tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "did not start" not in ran.stderr


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_validate_leaves_no_child_behind(tmp_path: Path) -> None:
    """A module that starts a process of its own and hangs: the child and what it started
    are ended with the timeout."""
    marker = tmp_path / "grandchild.pid"
    (tmp_path / "spawner.py").write_text(textwrap.dedent(f"""\
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open({str(marker)!r}, "w").write(str(child.pid))
        time.sleep(120)
        """))
    agent = tmp_path / "spawn.agent"
    agent.write_text(manifest("spawn", tools("spawner:fn")))
    done = promptui(["validate", "--import-timeout", "2", str(agent)], tmp_path)
    assert done.returncode == 1 and "did not finish within 2 s" in done.stdout
    pid = int(marker.read_text())
    deadline = time.monotonic() + 10
    while running(pid):
        assert time.monotonic() < deadline, f"process {pid} the tool module started still runs"
        time.sleep(0.1)


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:  # a zombie only waits to be reaped: ended
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False

