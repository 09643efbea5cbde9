"""CLI parity with the room (issue 36): ``inject NAME --payload JSON|@file``, ``runs NAME
[--waiting] [--json]``, ``incidents resolve|reopen ID``, against a real ``promptui serve``
(and refused by a read-only one), and ``runs`` on the folder's journal without a server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli import run_promptui
from tests.helpers.polling import poll
from tests.helpers.serving import Served, start_serve, write_agents

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("parity")
    served = start_serve(folder, str(write_agents(folder, broken=False)), "--journal",
                         str(folder / "journal.db"))
    try:
        yield served
    finally:
        assert served.stop() == 0, served.stderr()


def cli(server: Served, *args: str) -> tuple[int, str, str]:
    done = run_promptui(*args, "--url", server.url, "--token", server.token)
    return done.returncode, done.stdout, done.stderr


def test_inject_takes_payload_json_and_a_file(server: Served, tmp_path: Path) -> None:
    code, out, err = cli(server, "inject", "worker", "--type", "event", "--payload",
                         '{"summary": "disk full"}')  # an event: incidents count it
    assert code == 0 and "queued" in out, err
    payload = tmp_path / "event.json"
    payload.write_text('{"summary": "cpu hot"}')
    code, out, err = cli(server, "inject", "worker", "--type", "event", "--payload",
                         f"@{payload}", "--json")
    assert code == 0, err
    assert json.loads(out)["event_id"]
    api = server.client()
    poll(lambda: len(api.get("/incidents", params={"process": "worker"}).json()) == 2, 20,
         "two incidents, one per summary")


def test_a_bad_payload_file_names_its_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "summary": "x",\n  oops\n}')
    done = run_promptui("inject", "worker", "--payload", f"@{bad}", "--url", "http://127.0.0.1:9")
    assert done.returncode == 2
    assert f"{bad}:3:3: not JSON" in " ".join(done.stderr.split())  # file:line:column
    missing = run_promptui("inject", "worker", "--payload", f"@{tmp_path / 'none.json'}")
    assert missing.returncode == 2 and "cannot read the payload file" in missing.stderr


def test_incidents_resolve_and_reopen_by_a_short_id(server: Served) -> None:
    api = server.client()
    api.post("/processes/worker/inject", json={"payload": {"summary": "queue stuck"},
                                                "trigger_type": "event"}).raise_for_status()
    incident = poll(lambda: next(iter(api.get("/incidents").json()), None), 20, "an incident")
    short = incident["incident_id"][:8]
    code, out, err = cli(server, "incidents", "resolve", short, "--note", "fixed by hand")
    assert code == 0 and f"incident {short} resolved" in out, err
    state = {i["incident_id"]: i for i in api.get("/incidents").json()}[incident["incident_id"]]
    assert (state["state"], state["note"]) == ("resolved", "fixed by hand")
    code, out, err = cli(server, "incidents", "reopen", short)
    assert code == 0 and f"incident {short} open" in out, err
    code, out, err = cli(server, "incidents", "resolve", "nothing-like-it")
    assert code == 1 and "no incident 'nothing-like-it'" in " ".join(err.split())


def test_runs_lists_runs_and_the_waiting_ones(server: Served) -> None:
    code, out, err = cli(server, "inject", "judge", "--payload", '{"task": "solve"}')
    assert code == 0, err

    def waiting() -> list[dict[str, object]]:
        code, out, _ = cli(server, "runs", "judge", "--waiting", "--json")
        return json.loads(out) if code == 0 else []

    runs = poll(waiting, 20, "a run of judge waiting for an operator")
    assert all(r["state"] == "waiting" for r in runs)
    code, out, err = cli(server, "runs", "judge", "--waiting", "--wide")
    assert code == 0, err
    assert str(runs[0]["run_id"])[:8] in out and "settle with" in out
    code, out, err = cli(server, "runs", "worker", "--json")
    assert code == 0 and json.loads(out), err


def test_a_read_only_server_refuses_the_changes(tmp_path: Path) -> None:
    served = start_serve(tmp_path, str(write_agents(tmp_path, broken=False, judge=False)),
                         "--journal", str(tmp_path / "journal.db"), "--read-only")
    try:
        code, _, err = cli(served, "inject", "worker", "--payload", "{}")
        assert code == 1 and "read-only" in err.lower()
        code, _, err = cli(served, "incidents", "resolve", "abc")
        assert code == 1 and ("read-only" in err.lower() or "no incident" in err)
        code, out, err = cli(served, "runs", "worker", "--json")
        assert code == 0 and json.loads(out) == [], err  # reading is fine
    finally:
        assert served.stop() == 0, served.stderr()


def test_runs_and_status_on_the_folders_journal_without_a_server(
        server: Served, tmp_path: Path) -> None:
    """What the served runtime journaled, read from its file as another folder would."""
    server.client().post("/processes/worker/inject", json={"payload": {}}).raise_for_status()
    journal = server.folder / "journal.db"

    def finished() -> bool:
        done = run_promptui("runs", "worker", "--journal", str(journal), "--json")
        assert done.returncode == 0, done.stderr
        return any(r["state"] == "succeeded" for r in json.loads(done.stdout))

    poll(finished, 20, "a finished run of worker in the journal file")
    relative = run_promptui("runs", "worker", "--journal", str(journal), "--time", "relative")
    assert relative.returncode == 0, relative.stderr
    # the run's time as how long ago (under a second: "now"), not as a date
    assert re.search(r"succeeded\s+(now|\d+ s ago)\s", relative.stdout), relative.stdout
    assert not re.search(r"\d{4}-\d\d-\d\d", relative.stdout), relative.stdout

    logs = run_promptui("logs", "worker", "-n", "1", "--journal", str(journal))
    assert re.search(r"^\s*\d+ \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} ", logs.stdout), logs
    ago = run_promptui("logs", "worker", "-n", "1", "--journal", str(journal), "--time",
                       "relative")
    assert re.search(r"^\s*\d+\s+(now|\d+ (s|min) ago) ", ago.stdout), ago
    wrong = run_promptui("runs", "worker", "--journal", str(journal), "--time", "epoch")
    assert wrong.returncode == 2 and "not a time format" in wrong.stderr


def test_tables_fit_the_terminal_and_wide_prints_every_column_whole(server: Served) -> None:
    import os
    import subprocess

    from tests.helpers.cli import promptui_command

    journal = str(server.folder / "journal.db")

    def lines(columns: int, *args: str) -> list[str]:
        env = {**os.environ, "COLUMNS": str(columns), "PROMPTUI_URL": ""}
        done = subprocess.run([*promptui_command(), *args, "--journal", journal],
                              capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    server.client().post("/processes/worker/inject", json={"payload": {}}).raise_for_status()
    wide_terminal = poll(lambda: (found := lines(200, "runs", "worker")) and len(found) > 2
                         and found, 20, "the runs table")
    assert max(map(len, wide_terminal)) == 200  # the whole width, not 80 columns
    narrow = lines(50, "status")
    assert max(map(len, narrow)) <= 50
    assert not any("worker" in line and "20" in line.split("worker", 1)[1] for line in narrow
                   if "shut down" in line)  # the date did not fit next to the name
    whole = lines(50, "status", "--wide")
    row = next(line for line in whole if line.strip().startswith("worker"))
    assert max(map(len, whole)) > 50 and row.split()[-1].isdigit()  # one line, every column
    assert len([line for line in whole if line.strip()]) < len([x for x in narrow if x.strip()])
