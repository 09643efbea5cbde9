"""SIGTERM drains: a deploy stops 'promptui serve' (or 'promptui run') while a write tool is in
flight. With the default drain the write completes, its result is journaled and the next start
has nothing to reconcile; with --drain-timeout 0 the write is cut off and the next start holds
the run for an operator, as before; a second signal cuts a drain short."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.cli import promptui_command
from tests.helpers.polling import poll
from tests.helpers.serving import start_serve

pytestmark = pytest.mark.slow

WRITER = """\
version: "1.0"
name: writer
instructions: Deploy the release.
model:
  provider: scripted
  turns:
    - tool_calls: [{name: deploy, args: {ref: $payload.ref}}]
    - reply: Deployed.
tools:
  - {path: "deploy_tools:deploy", effect: write}
journal: {level: checkpoint}
"""
TOOLS = '''\
import asyncio
import os
from pathlib import Path

LEDGER = Path(os.environ["DEPLOY_LEDGER"])


async def deploy(ref: str) -> str:
    """Takes 1.5 s (set DEPLOY_SECONDS), then records the deploy: the test counts lines."""
    (LEDGER.parent / "started.txt").write_text(ref)
    await asyncio.sleep(float(os.environ.get("DEPLOY_SECONDS", "1.5")))
    with LEDGER.open("a", encoding="utf-8") as ledger:
        ledger.write(ref + "\\n")
    return f"deployed {ref}"
'''


def agents_in(folder: Path) -> Path:
    agents = folder / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "writer.agent").write_text(WRITER)
    (agents / "deploy_tools.py").write_text(TOOLS)
    return agents


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize(("drain", "deployed", "waiting"), [
    ("30", ["R-1"], 0),  # the default: the deploy in flight finishes
    ("0", [], 1),  # as before: cut off, the next start holds it for an operator
])
def test_sigterm_drains_the_write_in_flight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            drain: str, deployed: list[str],
                                            waiting: int) -> None:
    ledger = tmp_path / "ledger.txt"
    monkeypatch.setenv("DEPLOY_LEDGER", str(ledger))
    args = (str(agents_in(tmp_path)), "--journal", str(tmp_path / "journal.db"))
    server = start_serve(tmp_path, *args, "--drain-timeout", drain)
    client = server.client()
    assert client.post("/processes/writer/inject",
                       json={"payload": {"ref": "R-1"}}).status_code == 202
    poll(lambda: (tmp_path / "started.txt").exists(), what="the deploy to start")
    server.proc.send_signal(signal.SIGTERM)
    if drain != "0":  # while it drains the API still answers, and says so
        state = poll(lambda: client.get("/processes/writer").json().get("draining"),
                     what="the process to say it drains")
        assert state["runs_left"] == 1
    assert server.proc.wait(30) == 0, server.stderr()  # one signal: no second one to cut it
    assert server.stop() == 0, server.stderr()
    assert lines(ledger) == deployed

    monkeypatch.setenv("DEPLOY_SECONDS", "0")
    again = start_serve(tmp_path, *args, log_name="serve2.log")
    runs = again.client().get("/processes/writer/runs", params={"state": "waiting"}).json()
    assert len(runs) == waiting
    if waiting:
        assert runs[0]["waiting_reason"] == "unknown_write_outcome"
    assert again.stop() == 0
    assert lines(ledger) == deployed  # never dispatched again without an operator


def test_a_second_sigterm_cuts_the_drain_short(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEPLOY_LEDGER", str(tmp_path / "ledger.txt"))
    monkeypatch.setenv("DEPLOY_SECONDS", "60")
    server = start_serve(tmp_path, str(agents_in(tmp_path)), "--journal",
                         str(tmp_path / "journal.db"))
    assert server.client().post("/processes/writer/inject",
                                json={"payload": {"ref": "R-1"}}).status_code == 202
    poll(lambda: (tmp_path / "started.txt").exists(), what="the deploy to start")
    server.proc.send_signal(signal.SIGTERM)
    poll(lambda: "may finish first" in server.stderr(), what="the drain to begin")
    began = time.monotonic()
    assert server.stop() == 0, server.stderr()  # the second SIGTERM
    assert time.monotonic() - began < 15
    assert "stopping now" in server.stderr()


def test_promptui_run_drains_on_sigterm(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    agents = agents_in(tmp_path)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (agents / "writer.agent").write_text(WRITER.replace("$payload.ref", "$payload.path") + f"""\
triggers:
  - {{type: file_watch, watch_path: "{inbox}", debounce: 0.05}}
""")
    env = {**os.environ, "DEPLOY_LEDGER": str(ledger)}
    proc = subprocess.Popen([*promptui_command(), "run", str(agents), "--json"], cwd=tmp_path,
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        def dropped() -> bool:
            (inbox / "release.txt").write_text("v2")  # again until the watcher is up
            return (tmp_path / "started.txt").exists() or proc.poll() is not None

        poll(dropped, timeout=30, what="the deploy to start")
        proc.send_signal(signal.SIGTERM)
        out, errors = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, errors
    assert len(lines(ledger)) == 1 and lines(ledger)[0].endswith("release.txt")
    assert '"invocation_count": 1' in out, out
