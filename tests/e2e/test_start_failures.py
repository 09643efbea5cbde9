"""``promptui run`` and ``promptui serve`` with a process that cannot start: each ends within a
few seconds with status 1 and one error line naming the process, its manifest file, the field
and the cause, and no traceback. Before, every case hung forever: the failed start skipped
the runtime's close, and the journal's threads kept the interpreter alive."""

from __future__ import annotations

import sqlite3
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.cli import finish_promptui
from tests.helpers.start_failures import CASES, manifest, write_case

pytestmark = pytest.mark.slow

HANG = 60.0  # what a hang is; a failed start must end long before it
FEW_SECONDS = 15.0


def run_cli(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    return finish_promptui(args, cwd, hang=HANG)


COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "run": lambda agents: ["run", str(agents)],
    "serve": lambda agents: ["serve", str(agents), "--port", "0", "--log-level", "warning"],
}


def check_one_error(done: subprocess.CompletedProcess[str], took: float,
                    expected: list[str]) -> str:
    assert done.returncode == 1, f"status {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert took < FEW_SECONDS, f"took {took:.1f}s"
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, done.stderr
    assert "CRITICAL" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    for part in expected:
        assert part in errors[0], f"{part!r} not in {errors[0]!r}"
    return errors[0]


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(CASES))
def test_a_process_that_cannot_start_ends_the_command_with_one_line(
        case: str, command: str, tmp_path: Path, taken_port: int) -> None:
    agents = write_case(tmp_path, case, taken_port)
    done, took = run_cli(COMMANDS[command](agents), tmp_path)
    _, _, _, field, cause = CASES[case]
    path = str(agents / f"{case}.agent")
    error = check_one_error(done, took, [f"process {case!r} did not start", path, field,
                                         cause])
    assert f"{path}: {field}: " in error
    if command == "run":  # nothing else on stderr, and no status table on stdout
        assert done.stderr.strip().splitlines() == [error], done.stderr
        assert "Stopped cleanly" not in done.stdout
    else:
        assert done.stderr.strip().splitlines()[-1] == error  # the last word
        assert not (tmp_path / ".promptui" / "serve.json").exists()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_processes_that_started_are_shut_down_with_the_one_that_did_not(
        command: str, tmp_path: Path, taken_port: int) -> None:
    """A healthy process beside a broken one: the command still ends, status 1, naming only
    the broken one; the healthy one was shut down as for a restart (nothing dead-lettered)."""
    agents = write_case(tmp_path, "script-missing", taken_port)
    (agents / "healthy.agent").write_text(manifest("healthy", textwrap.dedent("""\
        triggers:
          - {type: interval, seconds: 3600}
        """)))
    done, took = run_cli(COMMANDS[command](agents), tmp_path)
    error = check_one_error(done, took, ["'script-missing'", "model"])
    assert "healthy" not in error
    with sqlite3.connect(tmp_path / ".promptui" / "journal.db") as db:
        kinds = [kind for (kind,) in db.execute(
            "SELECT entry_type FROM entries WHERE process = 'healthy' ORDER BY seq")]
    assert "shutdown" in kinds and "dead_lettered" not in kinds, kinds

