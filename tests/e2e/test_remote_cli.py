"""``status``, ``start|stop|suspend|resume|restart``, ``dead-letters``, ``logs`` and ``rewind``
against a real served runtime (uvicorn on 127.0.0.1, port 0, in a thread with its own event
loop), named by --url, by PROMPTUI_URL or by the discovery file of a server running here; and
what they answer without a server, with a wrong token or an unreachable URL."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import signal
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from typer.testing import CliRunner, Result

from promptui.cli import app
from runtime_core import AgentProcess, AgentRuntime, ProcessConfig, ToolContext, TriggerEvent
from runtime_core.api.server import create_app, make_server
from runtime_core.control import LocalControl, RemoteControl
from tests.helpers.cli import promptui_command
from tests.helpers.polling import poll, wait_for
from tests.helpers.ports import free_port

T = TypeVar("T")
TOKEN = "remote-cli-test-token-0123456789"
MODEL = {"provider": "scripted",
         "turns": [{"tool_calls": [{"name": "book", "args": {"invoice": "$payload.invoice"}}]},
                   {"reply": "Booked."}],
         "scripts": {"fail": [{"raise": "the ledger is offline"}]},
         "select": {"by_payload_field": "script"}}
runner = CliRunner()


def book(ctx: ToolContext, invoice: str) -> str:
    ctx.set("booked", int(ctx.get("booked", 0)) + 1)
    return f"booked {invoice}"


def config(journal: Path) -> ProcessConfig:
    return ProcessConfig.model_validate(
        {"model": MODEL, "journal": {"level": "checkpoint", "path": str(journal)}})


@contextmanager
def served(journal: Path) -> Iterator[str]:
    """A runtime with process ``books`` behind the HTTP API; yields its URL."""
    found: list[str] = []
    ready = threading.Event()
    servers: list[Any] = []

    def on_ready(url: str) -> None:
        found.append(url)
        ready.set()

    async def main() -> None:
        runtime = AgentRuntime()
        runtime.add_process("books", config(journal), tools=[book])
        control = LocalControl(runtime, name="ops")
        server = make_server(create_app(control, token=TOKEN), host="127.0.0.1", port=0,
                             on_ready=on_ready)
        servers.append(server)
        await server.serve()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(15), "the test server did not start"
    try:
        yield found[0]
    finally:
        servers[0].should_exit = True
        thread.join(15)
        assert not thread.is_alive(), "the test server did not stop"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with no server and no environment pointing at one."""
    monkeypatch.chdir(tmp_path)
    for name in ("PROMPTUI_URL", "PROMPTUI_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def url(here: Path) -> Iterator[str]:
    with served(here / "served.db") as address:
        yield address


def cli(*args: str, env: dict[str, str] | None = None, text: str | None = None) -> Result:
    return runner.invoke(app, list(args), env=env, input=text)


def remote(address: str, *args: str, text: str | None = None) -> Result:
    return cli(*args, "--url", address, "--token", TOKEN, text=text)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def on(address: str, action: Callable[[RemoteControl], Awaitable[T]]) -> T:
    async def go() -> T:
        control = RemoteControl(address, token=TOKEN)
        try:
            return await action(control)
        finally:
            await control.close()

    return asyncio.run(go())


def books(address: str) -> dict[str, Any]:
    """The process's row of ``status --json``."""
    data = json.loads(ok(remote(address, "status", "--json")).stdout)
    (row,) = data["processes"]
    return dict(row)


def inject(address: str, payload: dict[str, Any], runs: int | None = None) -> str:
    """Inject an event; with ``runs``, wait until the process has finished that many runs."""
    event_id = on(address, lambda control: control.inject("books", payload))
    if runs is not None:
        poll(lambda: books(address)["invocations"] >= runs, 10, f"{runs} run(s)")
    return event_id


# -- status ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_status_as_a_table_and_json_by_url_env_and_discovery(url: str, here: Path) -> None:
    inject(url, {"invoice": "A-1"}, runs=1)
    table = ok(remote(url, "status")).stdout
    assert "ops @ " + url in table
    assert "books" in table and "running" in table
    env = {"PROMPTUI_URL": url, "PROMPTUI_TOKEN": TOKEN}
    data = json.loads(ok(cli("status", "--json", env=env)).stdout)
    assert data["runtime"] == "ops" and data["source"] == "server"
    (row,) = data["processes"]
    assert row["name"] == "books" and row["state"] == "running"
    assert row["invocations"] == 1 and row["dead_letters"] == 0
    # a `promptui serve` running in this folder is found without --url or the environment
    (here / ".promptui").mkdir(exist_ok=True)
    (here / ".promptui" / "token").write_text(TOKEN)
    (here / ".promptui" / "serve.json").write_text(json.dumps({"url": url, "pid": os.getpid()}))
    assert json.loads(ok(cli("status", "--json")).stdout)["runtime"] == "ops"


# -- start, stop, suspend, resume, restart -------------------------------------------------------
@pytest.mark.slow
def test_lifecycle_commands_change_the_state(url: str) -> None:
    steps = [("suspend", "suspended"), ("resume", "running"), ("stop", "stopped"),
             ("start", "running"), ("restart", "running")]
    for command, state in steps:
        assert ok(remote(url, command, "books")).stdout.strip() == f"books: {state}"
        assert books(url)["state"] == state
    ok(remote(url, "stop", "books"))
    again = remote(url, "stop", "books")
    assert again.exit_code == 1 and "books is already stopped" in again.stderr
    missing = remote(url, "suspend", "nope")
    assert missing.exit_code == 1 and "no process named 'nope'" in missing.stderr


# -- dead letters --------------------------------------------------------------------------------
@pytest.mark.slow
def test_dead_letters_list_redeliver_and_clear(url: str) -> None:
    ok(remote(url, "suspend", "books"))
    first, second = (inject(url, {"invoice": f"B-{i}"}) for i in (1, 2))
    ok(remote(url, "stop", "books", "--dead-letter-queued"))  # to the dead letters
    listed = ok(remote(url, "dead-letters", "books")).stdout
    table, history = listed.split("History (newest first):")
    assert "2 dead letter(s)" in table and table.count("process stopped") == 2
    assert history.count("process stopped") == 2  # each letter's one attempt
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", table)  # --time iso: the date
    relative = ok(remote(url, "dead-letters", "books", "--time", "relative")).stdout
    assert re.search(r"(\d+ s ago|now)  attempt 0  process stopped", relative), relative
    assert first[:8] in listed and second[:8] in listed
    rows = json.loads(ok(remote(url, "dead-letters", "books", "--json")).stdout)
    assert [r["event_id"] for r in rows] == [first, second]
    assert rows[0]["payload_preview"] == '{"invoice": "B-1"}'

    ok(remote(url, "start", "books"))
    redone = ok(remote(url, "dead-letters", "books", "--redeliver", first[:8]))
    assert redone.stdout.strip() == "books: 1 dead letter(s) redelivered"
    poll(lambda: books(url)["invocations"] == 1, 10, "the redelivered run")
    assert [r["event_id"] for r in json.loads(
        ok(remote(url, "dead-letters", "books", "--json")).stdout)] == [second]
    unknown = remote(url, "dead-letters", "books", "--redeliver", "zzzz")
    assert unknown.exit_code == 1 and "'zzzz' is not one of them" in unknown.stderr

    inject(url, {"script": "fail"})  # fails, no retries: dead-lettered
    poll(lambda: books(url)["dead_letters"] == 2, 10, "the failed event's dead letter")
    everything = ok(remote(url, "dead-letters", "books", "--all", "--yes"))
    assert everything.stdout.strip() == "books: 2 dead letter(s) redelivered"
    poll(lambda: books(url)["invocations"] == 2 and books(url)["dead_letters"] == 1, 10,
         "the good event to run and the bad one to fail again")
    (left,) = json.loads(ok(remote(url, "dead-letters", "books", "--json")).stdout)
    assert left["reason"] == "retries exhausted" and "the ledger is offline" in left["error"]
    cleared = ok(remote(url, "dead-letters", "books", "--clear", "--yes"))
    assert cleared.stdout.strip() == "books: 1 dead letter(s) cleared"
    assert "books has no dead letters" in ok(remote(url, "dead-letters", "books")).stdout
    both = remote(url, "dead-letters", "books", "--all", "--clear")
    assert both.exit_code == 2 and "choose one of" in both.stderr


# -- logs ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_logs_reads_the_journal_over_the_api(url: str) -> None:
    inject(url, {"invoice": "C-1"}, runs=1)
    lines = ok(remote(url, "logs", "books", "-n", "4")).stdout.splitlines()
    assert len(lines) == 4
    seqs = [int(line.split()[0]) for line in lines]
    assert seqs == sorted(seqs)
    rows = [json.loads(line) for line in ok(remote(
        url, "logs", "books", "--type", "run_finished", "--json")).stdout.splitlines()]
    assert len(rows) == 1 and rows[0]["entry_type"] == "run_finished"
    assert rows[0]["entry_id"] == f"books:{rows[0]['seq']}" and rows[0]["process"] == "books"
    missing = remote(url, "logs", "nope")
    assert missing.exit_code == 1 and "no process named 'nope'" in missing.stderr


@pytest.mark.slow
def test_logs_follow_prints_new_entries_until_ctrl_c(url: str, here: Path) -> None:
    inject(url, {"invoice": "D-1"}, runs=1)
    env = {**os.environ, "PROMPTUI_URL": url, "PROMPTUI_TOKEN": TOKEN}
    follower = subprocess.Popen(
        [*promptui_command(), "logs", "books", "-f", "-n", "1", "--type", "run_finished"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=here, env=env)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:  # so a missing line fails the test after a timeout, never hangs it
        for line in follower.stdout or ():
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        first = lines.get(timeout=20)
        assert "run_finished" in first
        inject(url, {"invoice": "D-2"})
        inject(url, {"invoice": "D-3"})
        seen = [lines.get(timeout=10), lines.get(timeout=10)]
        assert all("run_finished" in line for line in seen)
        assert int(first.split()[0]) < int(seen[0].split()[0]) < int(seen[1].split()[0])
        follower.send_signal(signal.SIGINT)
        assert follower.wait(10) == 0, follower.stderr.read() if follower.stderr else ""
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait(10)


# -- rewind --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_rewind_lists_plans_and_applies_through_the_server(url: str) -> None:
    for i, invoice in enumerate(("E-1", "E-2", "E-3"), start=1):
        inject(url, {"invoice": invoice}, runs=i)
    listed = ok(remote(url, "rewind", "books", "-n", "5")).stdout
    assert "checkpoint" in listed or "run_finished" in listed
    assert "books:" in listed and "Preview: promptui rewind books ENTRY --plan" in listed
    starts = [json.loads(line) for line in ok(remote(
        url, "logs", "books", "--type", "run_started", "--json")).stdout.splitlines()]
    target = starts[1]["entry_id"]  # just before the second run
    plan = ok(remote(url, "rewind", "books", target, "--plan")).stdout
    assert "booked" in plan and "Not undone: 2 write(s)" in plan
    refused = remote(url, "rewind", "books", target, "--apply", text="books\n")
    assert refused.exit_code == 2 and "pass --yes" in refused.stderr  # no terminal to ask on
    detail = on(url, lambda control: control.process_detail("books"))
    assert detail.context["booked"] == 3
    applied = ok(remote(url, "rewind", "books", target, "--apply", "--yes")).stdout
    assert f"Rewound books to just before {target}" in applied
    detail = on(url, lambda control: control.process_detail("books"))
    assert detail.context["booked"] == 1 and detail.summary.state == "running"
    rewinds = ok(remote(url, "logs", "books", "--type", "rewind", "--json")).stdout
    assert len(rewinds.splitlines()) == 1
    cancel = remote(url, "rewind", "books", target, "--mode", "cancel", "--apply")
    assert cancel.exit_code == 2 and "only previews" in cancel.stderr


# -- wrong token, unreachable, no server ---------------------------------------------------
@pytest.mark.slow
def test_a_wrong_token_and_an_unreachable_url_say_so(url: str) -> None:
    refused = cli("status", "--url", url, "--token", "not-the-token-at-all-000")
    assert refused.exit_code == 1
    assert "refused the token" in refused.stderr and "--token" in refused.stderr
    closed = f"http://127.0.0.1:{free_port()}"  # a port nothing listens on
    for command in (["status"], ["stop", "books"], ["dead-letters", "books"],
                    ["logs", "books"]):
        away = cli(*command, "--url", closed, "--token", TOKEN)
        assert away.exit_code == 1, away.output
        assert f"cannot reach the runtime at {closed}" in away.stderr
    bad = cli("status", "--url", "ftp://example")
    assert bad.exit_code == 2 and "is not a server URL" in bad.stderr


async def make_local_journal(path: Path) -> None:
    """A stopped process's journal with one run and one dead letter."""
    async with AgentProcess("books", config(path), tools=[book]) as process:
        await process.inject(TriggerEvent("t", "manual", {"invoice": "F-1"}))
        await process.inject(TriggerEvent("t", "manual", {"script": "fail"}))
        await wait_for(lambda: len(process.dead_letters) == 1 and process.invocation_count == 1)


def test_without_a_server_reads_the_journal_and_refuses_commands(here: Path) -> None:
    asyncio.run(make_local_journal(here / ".promptui" / "journal.db"))
    table = ok(cli("status")).stdout
    assert "from the journal (no server running)" in table
    assert "books" in table and "stopped" in table
    data = json.loads(ok(cli("status", "--json")).stdout)
    assert data["source"] == "journal" and data["runtime"] is None
    (row,) = data["processes"]
    assert row["name"] == "books" and row["last_state"] == "stopped"
    assert row["dead_letters"] == 1 and row["last_entry_type"] == "state_transition"
    # (a clean stop journals its checkpoint, then the STOPPED transition: the spec's order)
    (letter,) = json.loads(ok(cli("dead-letters", "books", "--json")).stdout)
    assert letter["reason"] == "retries exhausted" and "the ledger is offline" in letter["error"]
    assert letter["payload_preview"] == '{"script": "fail"}'
    listed = ok(cli("dead-letters", "books")).stdout
    assert "from the journal (no server running)" in listed
    assert letter["event_id"][:8] in listed
    assert "run_finished" in ok(cli("logs", "books")).stdout
    for command in (["stop", "books"], ["start", "books"], ["dead-letters", "books", "--all"],
                    ["dead-letters", "books", "--clear"]):
        refused = cli(*command)
        assert refused.exit_code == 2, refused.output
        assert "no server: start one with 'promptui serve'" in refused.stderr
        assert "PROMPTUI_URL" in refused.stderr
    # an explicit --journal means that file, even with PROMPTUI_URL set
    env = {"PROMPTUI_URL": "http://127.0.0.1:9"}
    journal = str(here / ".promptui" / "journal.db")
    assert json.loads(ok(cli("status", "--json", "-j", journal, env=env)).stdout
                      )["source"] == "journal"
    nothing = cli("status", "-j", str(here / "missing.db"))
    assert nothing.exit_code == 2 and "no journal at" in nothing.stderr
