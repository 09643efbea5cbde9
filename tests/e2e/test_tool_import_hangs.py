"""A tools file whose import never finishes (issue 32): ``promptui run`` and ``promptui serve``
give the import validate's deadline (IMPORT_TIMEOUT), then end with status 1 and one error line
naming the process, its manifest, the field, the tools file and the fix. Before, both waited
forever: the start imported the module in the event loop's own thread."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_core.agent.tool_probe import IMPORT_TIMEOUT
from tests.helpers.cli import finish_promptui
from tests.helpers.start_failures import manifest, tools

pytestmark = pytest.mark.slow

#: The deadline, then the start and the stop around it (a loaded 2-core machine).
BOUND = IMPORT_TIMEOUT + 15.0
COMMANDS = {
    "run": lambda agents: ["run", str(agents)],
    "serve": lambda agents: ["serve", str(agents), "--port", "0", "--log-level", "warning"],
}


def write_hanging(folder: Path) -> Path:
    agents = folder / "agents"
    agents.mkdir()
    (agents / "sleepy.agent").write_text(manifest("sleepy", tools("sleepytools:fetch")),
                                         encoding="utf-8")
    (agents / "sleepytools.py").write_text(
        "import time\ntime.sleep(3600)\n\n\ndef fetch() -> str:\n    return 'never'\n",
        encoding="utf-8")
    return agents


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_tools_file_that_hangs_at_import_ends_the_start_with_one_line(
        command: str, tmp_path: Path) -> None:
    agents = write_hanging(tmp_path)
    done, took = finish_promptui(COMMANDS[command](agents), tmp_path, hang=BOUND + 30)
    assert done.returncode == 1, f"status {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert IMPORT_TIMEOUT <= took < BOUND, f"took {took:.1f}s"
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    for part in ("process 'sleepy' did not start", str(agents / "sleepy.agent"), "tools[0]",
                 str(agents / "sleepytools.py"), f"did not finish within {IMPORT_TIMEOUT:g} s",
                 "move that work into the tool function", "promptui validate"):
        assert part in errors[0], f"{part!r} not in {errors[0]!r}"
    if command == "run":
        assert done.stderr.strip().splitlines() == errors, done.stderr
