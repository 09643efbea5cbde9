"""The picture of the control room that the README and the docs' home page show
(docs/images/room.svg) is what scripts/room_screenshot.py draws today: the real room over a
frozen scene of the demo, with a fixed clock, so a fresh drawing is byte for byte the committed
file. When the room changes, regenerate it with ``.venv/bin/python scripts/room_screenshot.py``
and look at it."""

from __future__ import annotations

import difflib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "room_screenshot.py"
PICTURE = ROOT / "docs" / "images" / "room.svg"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("room_screenshot", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _svg_text(svg: str) -> list[str]:
    """The characters the SVG draws, one string per text element (for a readable diff)."""
    return [re.sub(r"&#160;", " ", t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


@pytest.mark.slow
async def test_the_committed_picture_is_what_the_script_draws_now() -> None:
    room_screenshot = _script()
    drawn = await room_screenshot.capture()
    committed = PICTURE.read_text(encoding="utf-8") if PICTURE.exists() else ""
    if drawn.svg != committed:
        diff = "\n".join(difflib.unified_diff(_svg_text(committed), _svg_text(drawn.svg),
                                              "committed", "drawn now", lineterm="", n=1))
        pytest.fail(f"{PICTURE.relative_to(ROOT)} is stale: run '.venv/bin/python "
                    f"scripts/room_screenshot.py' and look at it. What it draws differs:\n"
                    f"{diff[:3000] or '(the same text: styles or layout changed)'}")


@pytest.mark.slow
async def test_the_picture_shows_the_demo_at_120x40() -> None:
    room_screenshot = _script()
    drawn = await room_screenshot.capture()
    lines = drawn.text.splitlines()
    assert len(lines) == 40 and max(len(line) for line in lines) <= 120
    for name in room_screenshot.demo_names():  # every process of demo_manifests/, by name
        assert re.search(rf"^│ {re.escape(name)}\s", drawn.text, re.M), name
    assert "demo 20:26:40" in lines[0]  # the fixed clock, in UTC, and the control's name
    assert "suspended*" in drawn.text and "0!" in drawn.text  # the scenes the docs describe


def test_the_readme_and_the_home_page_show_the_picture() -> None:
    assert PICTURE.exists(), "run .venv/bin/python scripts/room_screenshot.py"
    assert "](docs/images/room.svg)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](images/room.svg)" in (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
