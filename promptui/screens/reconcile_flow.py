"""Enter on a waiting run, wherever it is listed (the process detail's Runs tab, the fleet
inbox): read why it waits, then open the dialog that settles it (the reconcile dialog for a
write whose outcome is unknown; evidence or a server's question otherwise) and send the answer
as a room command."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen

from promptui.screens.base import room_of
from promptui.screens.dialogs import ReconcileChoice, ReconcileDialog
from promptui.screens.waiting_answers import answer_waiting
from runtime_core.control.plane import ControlError


async def settle_waiting(screen: Screen[Any], name: str, run_id: str) -> None:
    """Open the dialog for the run ``run_id`` of ``name`` that waits for an operator."""
    room = room_of(screen)
    control = room.control
    try:
        detail = await control.waiting_detail(name, run_id)
    except ControlError as exc:  # reconciled elsewhere meanwhile, or the process went
        screen.app.notify(str(exc), severity="error", timeout=6)
        return

    if answer_waiting(screen, name, run_id, detail):  # evidence, or a server's question
        return

    def decided(choice: ReconcileChoice | None) -> None:
        if choice is None:
            return
        room.command(
            f"reconcile run {run_id[:8]}",
            lambda: control.reconcile(name, run_id, choice.outcome, result=choice.result,
                                      note=choice.note),
            lambda _: f"run {run_id[:8]} reconciled: {choice.outcome.replace('_', ' ')}")

    screen.app.push_screen(ReconcileDialog(name, detail), decided)
