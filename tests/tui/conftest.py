"""Fixtures for the control-room tests: the bundled demo as a real runtime in a temp folder, and
the UTC zone the frozen scene's snapshots are taken in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime_core import AgentRuntime
from tests.helpers.room import load_demo
from tests.helpers.snapshots import utc_zone


@pytest.fixture
def demo_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentRuntime:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROMPTUI_DEMO_DIR", str(tmp_path / "demo"))
    monkeypatch.setenv("PROMPTUI_DEMO_WEBHOOK_PORT", "0")
    return load_demo(tmp_path)


@pytest.fixture
def utc() -> Iterator[None]:
    """TZ=UTC for the test (the snapshot modules use it for every test)."""
    with utc_zone():
        yield
