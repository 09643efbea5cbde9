"""The control room attached to a served runtime through RemoteControl: the same screens and
keys as embedded, and a header that says when the server is away and recovers by itself."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from promptui.app import ControlRoom
from promptui.widgets.header import StatusHeader
from runtime_core.control import RemoteControl
from tests.helpers.polling import until
from tests.helpers.ports import free_port
from tests.helpers.room import dead_letters, make_runtime, notes, open_detail, queued_ids
from tests.helpers.serving import TOKEN, served, start_serve, write_agents


def header_text(app: ControlRoom) -> str:
    return str(app.screen.query_one(StatusHeader).content)


@pytest.mark.slow
async def test_attached_room_redelivers_a_dead_letter_by_key() -> None:
    runtime = make_runtime()
    async with served(runtime, name="ops") as url:
        app = ControlRoom(RemoteControl(url, token=TOKEN), refresh_hz=20)
        app.animation_level = "none"
        async with app.run_test(size=(120, 40)) as pilot:
            ids = await dead_letters(runtime, pilot, 2)
            await until(pilot, lambda: "ops @ 127.0.0.1:" in header_text(app),
                        what="the header naming the runtime and server")
            screen = await open_detail(app, pilot, "worker")
            await pilot.press("3")
            table = screen.table("dead")
            await until(pilot, lambda: table.keys == ids, what="the dead letters over HTTP")
            await pilot.press("down")
            await pilot.press("r")
            await until(pilot, lambda: queued_ids(runtime) == [ids[1]], what="redelivered")
            await until(pilot, lambda: table.keys == [ids[0]], what="the row gone")
            await until(pilot, lambda: "1 redelivered to worker" in " ".join(notes(app)))
            assert runtime.get_process("worker").status()["dead_letter_count"] == 1
            await pilot.press("q")
        # Quitting the attached room detached: the served runtime still runs.
        assert runtime.get_process("worker").state.value == "suspended"


@pytest.mark.slow
async def test_header_says_reconnecting_then_recovers_without_a_restart(tmp_path: Any) -> None:
    port = free_port()
    journal = {"level": "checkpoint", "backend": "sqlite", "path": str(tmp_path / "j.db")}
    first = AsyncExitStack()
    url = await first.enter_async_context(served(make_runtime(journal=journal), port=port,
                                                 name="ops"))
    app = ControlRoom(RemoteControl(url, token=TOKEN), refresh_hz=20)
    app.animation_level = "none"
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: "worker" in app.store.processes, what="the row")
        await first.aclose()  # the server stops (SIGTERM-like), the room stays open
        await until(pilot, lambda: "reconnecting" in header_text(app),
                    what="the reconnecting badge")
        assert "worker" in app.store.processes  # the last view stays on screen
        async with served(make_runtime(journal=journal), port=port, name="ops"):
            await until(pilot, lambda: "reconnecting" not in header_text(app),
                        what="the link back", timeout=15)
            await until(pilot, lambda: app.store.processes["worker"].state == "running")
            await pilot.press("q")


@pytest.mark.slow
async def test_attached_to_a_promptui_serve_subprocess(tmp_path: Path) -> None:
    """The same, against a real 'promptui serve' in its own process (its own event loop)."""
    server = start_serve(tmp_path, str(write_agents(tmp_path, judge=False)), "--journal",
                         str(tmp_path / "journal.db"))
    api = server.client()
    try:
        for n in range(2):  # 'broken' fails every run: two dead letters
            api.post("/processes/broken/inject", json={"payload": {"n": n}}).raise_for_status()
        app = ControlRoom(RemoteControl(server.url, token=server.token), refresh_hz=20)
        app.animation_level = "none"
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "broken" in app.store.processes
                        and app.store.processes["broken"].dead_letters == 2,
                        what="two dead letters in the row", timeout=15)
            screen = await open_detail(app, pilot, "broken")
            await pilot.press("3")
            table = screen.table("dead")
            await until(pilot, lambda: table.row_count == 2, what="the dead letters tab")
            first = table.cursor_key
            await pilot.press("r")
            await until(pilot, lambda: "1 redelivered to broken" in " ".join(notes(app)),
                        what="the redelivery")
            # it ran again (and failed again: 'broken' always does)
            await until(pilot, lambda: [r["event_id"] for r in api.get(
                "/processes/broken/runs").json()].count(first) == 2,
                what="the redelivered event run again")
            await pilot.press("q")
        assert api.get("/processes/broken").json()["state"] == "running"  # detached only
    finally:
        assert server.stop() == 0, server.stderr()


def test_attach_says_what_is_wrong_before_opening_the_screen(
        tmp_path: Path, monkeypatch: Any) -> None:
    from typer.testing import CliRunner

    from promptui.cli import app as cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PROMPTUI_URL", raising=False)
    runner = CliRunner()
    nothing = runner.invoke(cli, ["attach"])
    assert nothing.exit_code == 2 and "no server to attach to" in nothing.output
    bad = runner.invoke(cli, ["attach", "ftp://x"])
    assert bad.exit_code == 2 and "not a server URL" in bad.output
    closed = free_port()  # a port nothing listens on
    gone = runner.invoke(cli, ["attach", f"http://127.0.0.1:{closed}", "--token", TOKEN])
    assert gone.exit_code == 1 and "cannot reach the runtime" in gone.output
