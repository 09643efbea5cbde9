"""No secret on any screen (issue 19): a process holds a planted secret in every place a secret
can go (its secret scope, escalation headers and URL, an MCP server's environment, a webhook's
signing secret) and runs that carry the scope's value through a tool's result and arguments,
the context, the conversation, an incident, a dead letter, a waiting run and rewind plans.
Then every read of the control plane in process, every GET route and the event stream of a
real ``promptui serve``, every CLI command's output, every screen of the control room and the
journal file itself are searched for it (raw, URL-encoded, JSON-escaped, base64, hex)."""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import os
import sqlite3
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from textual.widgets import OptionList, Static

from promptui.app import ControlRoom
from promptui.cli.options import load_runtime
from promptui.screens.dashboard import DashboardScreen
from promptui.screens.detail import TAB_FOCUS, VIEWABLE, ProcessDetailScreen
from promptui.screens.incidents import IncidentsScreen
from promptui.screens.live_tail import LiveTailScreen
from promptui.screens.pager import PagerScreen
from promptui.screens.rewind_dialog import RewindPreview
from promptui.screens.run_steps import RunStepsDialog
from promptui.screens.timeline import TimelineScreen
from runtime_core import AgentRuntime
from runtime_core.control import ControlError, ControlPlane, LocalControl, RemoteControl
from runtime_core.events import EventNotifier, HealthAnomaly, RunFinished, RuntimeEvent
from runtime_core.governance.redaction import hide_credentials, literal_redactor
from tests.helpers.cli import promptui_command
from tests.helpers.planted import (
    REPLY,
    Driven,
    Findings,
    drive,
    findings,
    plant_environment,
    write_agents,
)
from tests.helpers.polling import until
from tests.helpers.room import demo_app, rows, select, tap
from tests.helpers.serving import start_serve

MODES = ("both", "conversation_only", "code_only", "summarize", "cancel")
#: The modes the HTTP API and the control plane both take (the API names the others
#: "conversation" and "state", which the control plane refuses).
SHARED_MODES = ("both", "cancel")
#: The protocol's members that change something or are not a read: each is covered below or
#: by a read of its effect. A new member of ControlPlane must be placed in one of the lists.
COMMANDS = {"start", "stop", "restart", "suspend", "resume", "inject", "inject_once", "redeliver",
            "clear_dead_letters", "reconcile", "answer_evidence", "answer_elicitation", "fork",
            "add_trigger", "remove_trigger", "clear_health_anomalies", "start_all", "close"}
VIEW_COMMANDS = {"rewind", "resolve_incident", "reopen_incident", "update_health"}
READS = {"name", "read_only", "link", "subscribe", "list_processes", "process_detail", "runs",
         "dead_letters", "dead_letter", "triggers", "waiting_detail", "journal_entries",
         "journal_entry", "rewind_plan", "incidents", "runtime_info", "process_status",
         "health_anomalies", "manifest_text", "pulse"}


def protocol_members() -> set[str]:
    return {name for name, _ in inspect.getmembers(ControlPlane)
            if not name.startswith("_")}


def planted_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentRuntime:
    plant_environment(monkeypatch)
    monkeypatch.chdir(tmp_path)
    runtime, _ = load_runtime([write_agents(tmp_path)], journal=tmp_path / "journal.db")
    return runtime


async def read_everything(control: ControlPlane, driven: Driven, seen: Findings,
                          modes: tuple[str, ...] = MODES) -> None:
    """Every read of the control plane, with every id it can be given."""
    name = "vault"
    seen.check("runtime_info", await control.runtime_info())
    seen.check("list_processes", await control.list_processes())
    seen.check("process_detail", await control.process_detail(name))
    seen.check("process_status", await control.process_status(name))
    seen.check("manifest_text", await control.manifest_text(name))
    seen.check("runs", await control.runs(name))
    seen.check("triggers", await control.triggers(name))
    seen.check("health_anomalies", await control.health_anomalies(name))
    seen.check("incidents", await control.incidents())
    seen.check("incidents(vault)", await control.incidents(name))
    seen.check("dead_letters", await control.dead_letters(name))
    for event_id in driven.dead_event_ids:
        seen.check(f"dead_letter({event_id})", await control.dead_letter(name, event_id))
    for run_id in driven.waiting_run_ids:
        seen.check(f"waiting_detail({run_id})", await control.waiting_detail(name, run_id))
    entries = await control.journal_entries(name, limit=5000)
    seen.check("journal_entries", entries)
    seen.check("journal_entries(text)", await control.journal_entries(name, text="vault"))
    for entry in entries:
        seen.check(f"journal_entry({entry.entry_id})",
                   await control.journal_entry(name, entry.entry_id))
        seen.check(f"rewind_plan({entry.entry_id})",
                   await control.rewind_plan(name, entry.entry_id))
    for mode in modes:
        seen.check(f"rewind_plan({driven.first_run_start}, {mode})",
                   await control.rewind_plan(name, driven.first_run_start, mode))
    seen.check("name/read_only/link", [control.name, control.read_only, control.link])


@pytest.mark.slow
async def test_no_read_of_the_control_plane_shows_the_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert protocol_members() == COMMANDS | VIEW_COMMANDS | READS
    runtime = planted_runtime(tmp_path, monkeypatch)
    control = LocalControl(runtime, name="planted")
    stream = control.subscribe()
    seen = findings()
    try:
        await control.start_all()
        driven = await drive(control)
        await read_everything(control, driven, seen)
        assert_shown_as_references((await control.process_detail("vault")).config)
        # The commands that answer with a view: the view is redacted like any read.
        incident = (await control.incidents("vault"))[0]
        resolved = await control.resolve_incident(
            "vault", incident.incident_id, generation=incident.generation,
            version=incident.version, note="done")
        seen.check("resolve_incident", resolved)
        seen.check("update_health", await control.update_health("vault", {"cooldown": 301}))
        seen.check("rewind(cancel)", await control.rewind("vault", driven.first_run_start,
                                                         "cancel"))
        seen.check("rewind(conversation_only)", await control.rewind(
            "vault", driven.first_run_start, "conversation_only"))
        seen.check("pulse", await control.pulse())  # numbers only: it must stay so
        with pytest.raises(ControlError):  # an unknown id answers without echoing anything
            await control.journal_entry("vault", "vault:999999")
        seen.check("events (subscribe)", [e.to_dict() for e in stream.drain()])
    finally:
        stream.close()
        await control.close()
    check_journal_file(tmp_path / "journal.db", seen)
    seen.assert_none()


def assert_shown_as_references(config: dict[str, Any]) -> None:
    """The Config tab and the detail route: references stay, values are [redacted] or
    [secret:name], and what is no credential is shown as it is."""
    assert config["secrets"]["secrets"] == {"api_key": "${PLANTED_SCOPE}"}
    assert config["servers"]["ledger"]["env"]["LEDGER_TOKEN"] == "${PLANTED_MCP}"
    assert config["health"]["escalation"]["headers"] == {"Authorization": "[redacted]",
                                                         "X-Team": "ops"}
    assert config["budget"]["escalation"]["headers"] == {"X-Api-Key": "[redacted]"}
    assert config["budget"]["escalation"]["webhook_url"] == (
        "https://escalation.invalid/budget?team=ops&token=[redacted]")
    assert config["triggers"][0]["hmac_secret"] == "[redacted]"
    assert config["model"]["scripts"]["use"][2]["reply"] == REPLY


def check_journal_file(db: Path, seen: Findings) -> None:
    """Every row of every table, and the files' bytes (WAL included)."""
    with sqlite3.connect(db) as connection:
        tables = [row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            rows: list[Any] = connection.execute(f'SELECT * FROM "{table}"').fetchall()
            seen.check(f"journal table {table}", repr(rows))
    for path in db.parent.glob(db.name + "*"):
        seen.check(f"journal file {path.name}", path.read_bytes())


# -- over HTTP: a real `promptui serve`, every GET route, the event stream, the CLI ------------
def get_routes(client: httpx.Client) -> list[tuple[str, dict[str, Any]]]:
    """Every GET operation of the OpenAPI document: (path template, operation)."""
    paths = client.get("/openapi.json").json()["paths"]
    return [(path, item["get"]) for path, item in paths.items() if "get" in item]


def route_calls(template: str, operation: dict[str, Any], driven: Driven,
                entries: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The URLs (under /api/v1) and query parameters to call a GET route with: every real
    id its path can name, and its required query parameters filled."""
    values = {"name": ["vault"], "event_id": driven.dead_event_ids,
              "run_id": driven.waiting_run_ids, "entry_id": entries}
    urls = [template.removeprefix("/api/v1")]
    for parameter in operation.get("parameters", []):
        if parameter["in"] != "path":
            continue
        known = values.get(parameter["name"])
        assert known, f"{template}: no value for path parameter {parameter['name']!r}"
        urls = [url.replace("{" + parameter["name"] + "}", value)
                for url in urls for value in known]
    query = {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "query"}
    required = [name for name, p in query.items() if p.get("required")]
    queries: list[dict[str, Any]] = [{}]
    if required:
        # the reference's alias names the entry target_entry_id (reference_routes.py)
        (key,) = required
        assert key in ("entry_id", "target_entry_id"), f"{template}: fill {required}"
        queries = [{key: entry} for entry in entries]
        modes = query.get("mode", {}).get("schema", {}).get("enum", [])
        queries += [{key: driven.first_run_start, "mode": mode} for mode in modes]
    elif template.endswith("/journal"):
        queries = [{"limit": 5000}, {"text": "vault"}, {"type": "tool_result"}]
    return [(url, query) for url in urls for query in queries]


def read_stream(client: httpx.Client, frames: list[str], until: str,
                headers: dict[str, str] | None = None) -> None:
    """Raw SSE text, until a frame of kind ``until`` (or the read times out)."""
    try:
        with client.stream("GET", "/events", headers=headers or {},
                           timeout=httpx.Timeout(60.0)) as stream:
            for line in stream.iter_lines():
                frames.append(line)
                if line == f"event: {until}":
                    return
    except httpx.HTTPError as exc:
        frames.append(f"(stream ended: {exc!r})")


def cli_commands(driven: Driven, db: Path, *, served: bool) -> list[list[str]]:
    """Every command that shows something: served, those that can ask the server running in
    the folder do (given --journal, they refuse to open the server's journal)."""
    journal = [] if served else ["--journal", str(db)]
    return [[*args, *journal] for args in (
        ["status"], ["status", "--json"], ["logs", "vault", "-n", "500"],
        ["logs", "vault", "-n", "500", "--json"], ["logs", "vault", "--type", "tool_result"],
        ["dead-letters", "vault"], ["dead-letters", "vault", "--json"],
        ["rewind", "vault", "-n", "500"],
        *(["rewind", "vault", driven.first_run_start, "--plan", "--mode", mode]
          for mode in (SHARED_MODES if served else MODES)))] + [
        [*args, "--journal", str(db)] for args in (
            ["incidents"], ["incidents", "--json"], ["journal", "export", "vault"],
            ["journal", "verify"])]


def cli(folder: Path, seen: Findings, *args: str) -> str:
    result = subprocess.run([*promptui_command(), *args], cwd=folder, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    seen.check(f"promptui {' '.join(args)}", result.stdout + result.stderr)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.stdout


@pytest.mark.slow
def test_no_route_stream_or_command_shows_the_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plant_environment(monkeypatch)
    monkeypatch.delenv("PROMPTUI_URL", raising=False)
    db = tmp_path / "journal.db"
    server = start_serve(tmp_path, str(write_agents(tmp_path)), "--journal", str(db))
    seen = findings()
    try:
        client = server.client()
        live: list[str] = []  # the stream as it happens, while the runs go
        reader = threading.Thread(target=read_stream, args=(client, live, "run.waiting"),
                                  daemon=True)
        reader.start()

        async def remote() -> tuple[Driven, list[str]]:
            control = RemoteControl(server.url, token=server.token)
            try:
                driven = await drive(control)
                await read_everything(control, driven, seen, SHARED_MODES)
                return driven, [e.entry_id for e in await control.journal_entries(
                    "vault", limit=5000)]
            finally:
                await control.close()

        driven, entries = asyncio.run(remote())
        reader.join(60)
        seen.check("GET /events (live)", "\n".join(live))
        replayed: list[str] = []  # everything the server's log holds, from its first event
        read_stream(client, replayed, "run.waiting", {"Last-Event-ID": "another-boot-0"})
        assert any("run.finished" in line for line in replayed), replayed[:20]
        seen.check("GET /events (replayed)", "\n".join(replayed))

        routes = get_routes(client)
        assert {"/api/v1/processes/{name}/detail", "/api/v1/processes/{name}/rewind-plan",
                "/api/v1/events"} <= {path for path, _ in routes}
        for template, operation in routes:
            if template.endswith("/events"):
                continue  # read above
            for url, query in route_calls(template, operation, driven, entries):
                response = client.get(url, params=query)
                # every answer is searched, a refusal too (see SHARED_MODES)
                assert response.status_code == 200 or query.get("mode") not in (
                    None, *SHARED_MODES), (url, query, response.text)
                seen.check(f"GET {url} {query}", response.text)
        # the commands that answer with a view
        incident = client.get("/incidents").json()[0]
        for method, url, body in (
                ("PATCH", "/processes/vault/health", {"cooldown": 302}),
                ("POST", "/processes/vault/rewind",
                 {"entry_id": driven.first_run_start, "mode": "cancel"}),
                ("POST", f"/processes/vault/incidents/{incident['incident_id']}/resolve",
                 {"generation": incident["generation"], "version": incident["version"]})):
            response = client.request(method, url, json=body)
            assert response.status_code == 200, (url, response.text)
            seen.check(f"{method} {url}", response.text)

        # the CLI, attached to the server running in this folder
        for args in cli_commands(driven, db, served=True):
            cli(tmp_path, seen, *args)
        cli(tmp_path, seen, "validate", "agents")
    finally:
        code = server.stop()
    seen.check("promptui serve's log", server.stderr())
    assert code == 0, server.stderr()[-3000:]
    for args in cli_commands(driven, db, served=False):  # the server gone: the file alone
        cli(tmp_path, seen, *args)
    check_journal_file(db, seen)
    seen.assert_none()


# -- every screen of the control room -----------------------------------------------------------
def screen_words(app: ControlRoom) -> str:
    """What the screen shows, and the whole text of every Static on it (a long config is
    shown a window at a time)."""
    shown = [strip.text for strip in app.screen._compositor.render_strips()]
    console = Console(width=200, file=io.StringIO(), record=True)
    for static in app.screen.query(Static):
        content = static.content
        if isinstance(content, str) or hasattr(content, "plain"):
            shown.append(content if isinstance(content, str) else str(content.plain))
        else:
            console.print(content)
    return "\n".join(shown) + console.export_text()


@pytest.mark.slow
async def test_no_screen_shows_the_secret(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    app = demo_app(planted_runtime(tmp_path, monkeypatch))
    app.animation_level = "none"
    seen = findings()
    async with app.run_test(size=(120, 40)) as pilot:

        async def look(what: str) -> None:
            await app.pump()
            await pilot._wait_for_screen()  # what the pump changed is drawn (not CPU idle)
            seen.check(what, screen_words(app))

        async def pager(what: str, key: str = "v") -> None:
            back = app.screen
            await tap(pilot, key)
            await until(pilot, lambda: isinstance(app.screen, PagerScreen), what=what)
            await look(f"pager: {what}")
            await tap(pilot, "escape")
            await until(pilot, lambda: app.screen is back)

        driven = await drive(app.control)
        await until(pilot, lambda: "vault" in rows(app))
        await select(app, pilot, "vault")
        await look("dashboard")
        await pager("the process on the dashboard")
        app.open_process("vault")
        await until(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
        detail = app.screen
        assert isinstance(detail, ProcessDetailScreen)
        await until(pilot, lambda: detail.detail is not None)
        for key, pane in zip("123456789", TAB_FOCUS, strict=True):
            await tap(pilot, key)
            await until(pilot, lambda pane=pane: detail.active_tab == pane)  # type: ignore[misc]
            await look(f"detail tab {key} ({pane})")
            if pane in VIEWABLE and detail.table(pane).row_count:
                for row in range(detail.table(pane).row_count):  # each row whole
                    detail.table(pane).move_cursor(row=row)
                    await pager(f"{pane} row {row}")
        await tap(pilot, "4")
        await until(pilot, lambda: detail.active_tab == "runs")
        runs = detail.table("runs")
        for row in range(runs.row_count):  # each run's steps, and each step whole
            runs.move_cursor(row=row)
            await tap(pilot, "enter")
            await until(pilot, lambda: not isinstance(app.screen, ProcessDetailScreen)
                        and app.screen.is_mounted)
            await look(f"run {row}: its steps or evidence")
            dialog = app.screen
            if isinstance(dialog, RunStepsDialog) and dialog.run_view.steps:
                await until(pilot, lambda d=dialog: bool(d.query("#run-steps")))  # type: ignore[misc]
                steps = dialog.query_one("#run-steps", OptionList)
                for step in range(len(dialog.run_view.steps)):
                    if step:
                        await tap(pilot, "down")
                        await until(pilot, lambda s=steps, i=step: s.highlighted == i)  # type: ignore[misc]
                    await pager(f"run {row}: step {step}")
            await tap(pilot, "escape")
            await until(pilot, lambda: app.screen is detail)
        await tap(pilot, "w")
        await until(pilot, lambda: isinstance(app.screen, TimelineScreen) and app.screen.loaded)
        timeline = app.screen
        assert isinstance(timeline, TimelineScreen)
        await look("timeline")
        ids = [e.entry_id for e in timeline.table.entries]
        for entry_id in (driven.first_run_start, ids[0], ids[len(ids) // 2]):
            timeline.table.move_cursor(row=ids.index(entry_id), animate=False)
            await pager(f"journal entry {entry_id}")
            await tap(pilot, "p")
            await until(pilot, lambda: isinstance(app.screen, RewindPreview)
                        and app.screen.plan is not None, what="the rewind plan")
            await look(f"rewind preview of {entry_id}")
            await tap(pilot, "escape")
            await until(pilot, lambda: app.screen is timeline)
        await tap(pilot, "escape")  # one at a time: a key sent before the screen is popped
        await until(pilot, lambda: app.screen is detail)  # would reach the old screen
        await tap(pilot, "escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await tap(pilot, "L")
        await until(pilot, lambda: isinstance(app.screen, LiveTailScreen))
        await look("live tail")
        await tap(pilot, "escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await tap(pilot, "I")
        await until(pilot, lambda: isinstance(app.screen, IncidentsScreen))
        await look("incidents")
        await tap(pilot, "escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await tap(pilot, "q")
    seen.assert_none()


# -- the rules, one by one ------------------------------------------------------------------------
def test_credentials_in_a_config_are_hidden_and_references_kept() -> None:
    hidden: set[str] = set()
    shown = hide_credentials({
        "headers": {"Authorization": "Bearer abc123def456", "X-Trace": "t-1",
                    "Cookie": "${COOKIE}", "X-Api-Key": "Bearer ${KEY}"},
        "env": {"DB_PASSWORD": "hunter2hunter2", "HOME": "/home/x"},
        "url": "https://user:p%40ssw0rd@example.com/x?key=1&access_token=tok-777777&a=b",
        "hmac_secret": ["**********", "${NEW}"], "api_key_env": "OPENAI_API_KEY",
        "signature_scheme": "github", "note": "no secret here"}, hidden)
    assert shown == {
        "headers": {"Authorization": "[redacted]", "X-Trace": "t-1", "Cookie": "${COOKIE}",
                    "X-Api-Key": "Bearer ${KEY}"},
        "env": {"DB_PASSWORD": "[redacted]", "HOME": "/home/x"},
        "url": "https://user:[redacted]@example.com/x?key=1&access_token=[redacted]&a=b",
        "hmac_secret": ["[redacted]", "${NEW}"], "api_key_env": "OPENAI_API_KEY",
        "signature_scheme": "github", "note": "no secret here"}
    assert {"Bearer abc123def456", "abc123def456", "hunter2hunter2", "p@ssw0rd",
            "tok-777777"} <= hidden
    redact = literal_redactor(hidden)
    assert redact is not None and literal_redactor({"short"}) is None  # words are not hidden
    assert redact("sent abc123def456 and p@ssw0rd") == "sent [redacted] and [redacted]"


def test_an_event_is_redacted_before_anyone_sees_it() -> None:
    notifier = EventNotifier()
    seen: list[RuntimeEvent] = []
    notifier.add_callback(seen.append)
    stream = notifier.subscribe()
    notifier.redact = lambda event: event.redacted(lambda text: text.replace("s3cret", "[x]"))
    notifier.emit(RunFinished(process="p", run_id="r", event_id="e", state="failed",
                              error="auth s3cret refused"))
    notifier.emit(HealthAnomaly(process="p", anomaly_type="stuck", description="ok",
                                details={"args": ["s3cret"]}))
    events = [*seen, *stream.drain()]
    assert [e.to_dict().get("error") for e in events[::2]] == ["auth [x] refused"] * 2
    assert all("s3cret" not in json.dumps(e.to_dict()) for e in events)
    unchanged = RunFinished(process="p", run_id="r", event_id="e", state="succeeded")
    assert unchanged.redacted(str.upper) is not unchanged  # ids are texts too
    assert unchanged.redacted(lambda text: text) is unchanged  # no copy when nothing changes
