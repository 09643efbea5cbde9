"""Fixtures for the control-room tests: the bundled demo as a real runtime in a temp folder,
and a pilot-side wait that polls a condition instead of sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual import events
from textual.pilot import Pilot

from promptui.cli.options import BUNDLED_DEMO, load_runtime
from runtime_core import AgentRuntime


@pytest.fixture
def demo_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentRuntime:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROMPTUI_DEMO_DIR", str(tmp_path / "demo"))
    monkeypatch.setenv("PROMPTUI_DEMO_WEBHOOK_PORT", "0")
    runtime, _ = load_runtime([BUNDLED_DEMO], journal=tmp_path / "journal.db")
    return runtime


async def until(pilot: Pilot[object], predicate: Callable[[], bool], timeout: float = 10.0,
                what: str = "") -> None:
    """Let the app run until ``predicate()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what or predicate}")
        await pilot.pause(0.02)


async def tap(pilot: Pilot[object], *keys: str, gap: bool = True) -> None:
    """Send keys as the terminal would, without ``pilot.press``'s wait for the whole process
    to go idle after each one: a live runtime's threads keep the CPU busy, so that wait runs to
    its one-second cap per key. The caller waits for what the key should bring, with ``until``.
    ``gap=False`` queues all the keys before the app handles the first (a paste, fast typing)."""
    driver = pilot.app._driver
    assert driver is not None
    for index, key in enumerate(keys):
        if index and gap:
            await pilot.pause(0.02)
        event = events.Key(key, key if len(key) == 1 else None)
        event.set_sender(pilot.app)
        driver.send_message(event)
    await pilot.pause(0.02)
