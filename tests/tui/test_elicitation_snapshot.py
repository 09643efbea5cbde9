"""Snapshots of the answer dialog for an MCP server's question, at 80x24 and 120x40, on the
frozen scene (its waiting run answers with a question here), before and after an Accept with
nothing typed. Update with ``pytest tests/tui/test_elicitation_snapshot.py --snapshot-update``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.helpers.scenes import NOW, scene_app
from tests.helpers.snapshots import SIZES, opened

pytestmark = pytest.mark.usefixtures("utc")  # the scene's times read the same everywhere

QUESTION: dict[str, Any] = {
    "run_id": "77aa88bb99cc", "event_id": "e7", "reason": "elicitation", "server": "payments",
    "tool": "refund", "step": 3, "mode": "form", "url": "",
    "message": "Refund order 1042? Say how much and why.",
    "requested_schema": {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "title": "Amount", "minimum": 0, "maximum": 500,
                       "description": "in EUR"},
            "reason": {"type": "string", "enum": ["damaged", "late", "other"],
                       "title": "Reason"},
            "notify": {"type": "boolean", "title": "Tell the customer", "default": True},
            "note": {"type": "string", "title": "Note", "maxLength": 200},
        },
        "required": ["amount", "reason"],
    },
    "asked_at": NOW - 30, "expires_at": NOW + 570, "actions": ["accept", "decline", "cancel"],
}


def question_scene() -> Any:
    app = scene_app()

    async def waiting_detail(name: str, run_id: str) -> dict[str, Any]:
        return dict(QUESTION)

    app.control.waiting_detail = waiting_detail  # the scene's waiting run asks a question
    return app


def dialog_open(*then: str) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def go(pilot: Pilot[Any]) -> None:
        await opened("4", "enter")(pilot)
        for _ in range(50):  # the dialog opens after an awaited control call
            if type(pilot.app.screen).__name__ == "ElicitationDialog":
                break
            await pilot.pause(0.01)
        for node in pilot.app.screen.query("Input"):
            node.cursor_blink = False  # type: ignore[attr-defined]
        for button in then:
            pilot.app.screen.query_one(f"#{button}").press()  # type: ignore[attr-defined]
            await pilot.pause()
        for _ in range(50):  # what the press shows, settled: the field errors, no toast
            if not then or any(w.display for w in pilot.app.screen.query(".elicitation-error")):
                break
            await pilot.pause(0.01)
        pilot.app.clear_notifications()
        await pilot.pause()

    return go


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_elicitation_dialog(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(question_scene(), run_before=dialog_open(), terminal_size=size)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_elicitation_dialog_refuses_an_empty_answer(snap_compare: Any,
                                                    size: tuple[int, int]) -> None:
    assert snap_compare(question_scene(), run_before=dialog_open("accept"),
                        terminal_size=size)
