"""A start imports the Python tools under validate's deadline, off the event loop (issue 32): a
module that hangs at import fails the process's start with one line naming the tool, its file,
the field and the fix, while the loop (the room's screen, a webhook's 503) goes on."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from runtime_core.agent.config import ToolDeclaration
from runtime_core.agent.factory import build_tools_within
from runtime_core.agent.tools import ToolError
from runtime_core.lifecycle import field_of


def tools_module(folder: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> str:
    """A module of ``body`` importable from ``folder``; its name is new to this interpreter."""
    name = f"tools_{uuid.uuid4().hex[:12]}"
    (folder / f"{name}.py").write_text(body, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    return name


GOOD = "def fine() -> str:\n    return 'fine'\n"


async def test_a_hanging_import_fails_within_the_deadline_and_the_loop_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = tools_module(tmp_path, monkeypatch, GOOD)
    hung = tools_module(tmp_path, monkeypatch, "import time\ntime.sleep(3600)\n" + GOOD)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    try:
        with pytest.raises(ToolError) as caught:
            await asyncio.wait_for(build_tools_within(
                [ToolDeclaration(path=f"{good}:fine"), ToolDeclaration(path=f"{hung}:fine")],
                import_timeout=0.3), 5)
    finally:
        ticker.cancel()
    message = str(caught.value)
    assert field_of(caught.value) == "tools[1]"
    assert f"importing module {hung!r} ({tmp_path / hung}.py) did not finish within 0.3 s" \
        in message
    assert "move that work into the tool function" in message and "\n" not in message
    assert ticks >= 10  # the loop ran while the import hung


async def test_tools_that_import_load_as_before(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    good = tools_module(tmp_path, monkeypatch, GOOD)
    def extra() -> str:
        """A tool handed over as a callable."""
        return "extra"

    tools = await build_tools_within([ToolDeclaration(path=f"{good}:fine", name="a")],
                                     [extra])
    assert set(tools) == {"a", "extra"}
    assert set(await build_tools_within([], [extra])) == {"extra"}
    with pytest.raises(ToolError, match="two tools are named 'a'") as twice:
        await build_tools_within([ToolDeclaration(path=f"{good}:fine", name="a"),
                                  ToolDeclaration(path=f"{good}:fine", name="a")])
    assert field_of(twice.value) == "tools[1]"


async def test_an_import_that_raises_names_its_field(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tools_module(tmp_path, monkeypatch, "raise RuntimeError('boom at import')\n")
    with pytest.raises(ToolError, match="raised RuntimeError: boom at import") as caught:
        await build_tools_within([ToolDeclaration(path=f"{bad}:fine")])
    assert field_of(caught.value) == "tools[0]"
