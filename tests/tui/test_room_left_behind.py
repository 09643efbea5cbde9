"""The room over a runtime that started fresh on a damaged journal (on_damage: start_fresh):
the header says a journal was left behind, and the Anomalies feed says where and how to
salvage it."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptui.widgets.feeds import AnomalyFeed
from promptui.widgets.header import StatusHeader
from runtime_core import AgentRuntime, ProcessConfig
from tests.helpers.polling import until
from tests.helpers.room import make_app

pytestmark = pytest.mark.slow


async def test_the_room_says_a_damaged_journal_was_left_behind(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    path.write_bytes(b"not a journal at all " * 100)
    runtime = AgentRuntime()
    runtime.add_process("worker", ProcessConfig(model="echo", journal={
        "level": "checkpoint", "path": str(path), "on_damage": "start_fresh"}))
    app = make_app(runtime)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            header = app.screen.query_one(StatusHeader)
            await until(pilot, lambda: "journal left behind (1)" in str(header.render()),
                        what="the header's badge")
            [moved] = [p for p in tmp_path.glob("journal.db.damaged-*")]
            lines = [AnomalyFeed.render_line_text(line) for line in app.store.feed]
            assert any(f"left behind at {moved} (promptui journal salvage {moved})" in line
                       for line in lines), lines
            await runtime.stop_all()
    finally:
        await runtime.close()
