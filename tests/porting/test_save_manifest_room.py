"""The control room's "save as manifest" (``m`` on a process's Config tab): asks where, writes the
process's configuration now through the control plane, asks before replacing a file, and the file
loads back as a manifest."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from promptui.screens.detail import ProcessDetailScreen
from promptui.screens.dialogs import AskDialog, ConfirmDialog
from runtime_core import AgentRuntime, ProcessConfig
from runtime_core.manifest.loader import load_manifest
from tests.helpers.polling import until
from tests.helpers.room import make_app, notes, open_detail, running

pytestmark = pytest.mark.slow


async def test_save_as_manifest_from_the_config_tab(tmp_path: Path) -> None:
    runtime = AgentRuntime()
    runtime.add_process("worker", ProcessConfig(
        model="echo", instructions="Be brief.", concurrency=2,
        triggers=[{"type": "interval", "seconds": 3600}]))
    app = make_app(runtime, read_only=True)  # reading a config: a read-only room may
    target = tmp_path / "out" / "worker.agent"
    async with running(app) as pilot:
        screen = await open_detail(app, pilot, "worker")
        await pilot.press("m")  # not on the Live tab
        await pilot.pause()
        assert not isinstance(app.screen, AskDialog)
        await pilot.press("8")
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, AskDialog), what="the dialog")
        box = app.screen.query_one("#ask-input", Input)
        assert box.value == "./worker.agent"
        box.value = str(target)
        await pilot.press("enter")
        await until(pilot, target.exists, what="the file")
        await until(pilot, lambda: any("saved as" in n for n in notes(app)), what="the note")
        loaded = load_manifest(target)
        assert loaded.name == "worker" and loaded.config.concurrency == 2
        assert [t.type for t in loaded.config.triggers] == ["interval"]
        # again: the file exists, so the room asks first
        target.write_text("# mine\n")
        assert isinstance(app.screen, ProcessDetailScreen) and app.screen is screen
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, AskDialog), what="the dialog")
        app.screen.query_one("#ask-input", Input).value = str(target)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="confirm")
        await pilot.press("escape")  # no: the file stays
        await pilot.pause()
        assert target.read_text() == "# mine\n"
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, AskDialog), what="the dialog")
        app.screen.query_one("#ask-input", Input).value = str(target)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="confirm")
        await pilot.click("#confirm")
        await until(pilot, lambda: target.read_text().startswith("# The configuration"),
                    what="replaced")
        # a folder is refused in the dialog itself
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, AskDialog), what="the dialog")
        app.screen.query_one("#ask-input", Input).value = str(tmp_path)
        await pilot.pause()
        assert "that is a folder" in str(app.screen.query_one("#ask-error").render())
        await pilot.press("escape")
