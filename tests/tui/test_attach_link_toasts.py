"""An attached room says when it lost the server and when it is back (issue 36): a real
``promptui serve`` killed (SIGKILL) and started again on the same port; the header shows the
link meanwhile and a toast says each change."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from promptui.app import ControlRoom
from promptui.widgets.header import StatusHeader
from runtime_core.control import RemoteControl
from tests.helpers.polling import until
from tests.helpers.ports import free_port
from tests.helpers.room import notes
from tests.helpers.serving import start_serve, write_agents

pytestmark = pytest.mark.slow


async def test_lost_and_reconnected_toasts_around_a_killed_server(tmp_path: Path) -> None:
    port = free_port()
    agents = str(write_agents(tmp_path, broken=False, judge=False))
    args = (agents, "--journal", str(tmp_path / "journal.db"), "--port", str(port))
    first = start_serve(tmp_path, *args)
    app = ControlRoom(RemoteControl(first.url, token=first.token), refresh_hz=20)
    app.animation_level = "none"
    second = None
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "worker" in app.store.processes, what="the row")
            assert first.stop(signal.SIGKILL) != 0  # killed: no goodbye on the stream
            await until(pilot, lambda: any("lost the server at" in n and "retrying" in n
                                           for n in notes(app)), timeout=20,
                        what="the lost-the-server toast")
            header = str(app.screen.query_one(StatusHeader).content)
            assert "reconnecting" in header
            second = start_serve(tmp_path, *args, token=first.token, log_name="serve2.log")
            await until(pilot, lambda: any(n.startswith("reconnected after ")
                                           for n in notes(app)), timeout=30,
                        what="the reconnected toast")
            await until(pilot, lambda: "reconnecting" not in str(
                app.screen.query_one(StatusHeader).content), what="the header's link back")
            await pilot.press("q")
    finally:
        if second is not None:
            assert second.stop() == 0, second.stderr()
