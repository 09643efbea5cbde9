"""Answering a waiting run from its dialog, for the runs that wait for something other than a
write's reconciliation: a reply waiting for completion evidence (evidence_dialog.py) and an MCP
server's question (elicit_dialog.py). The process detail opens these on Enter; each answer goes
through the control plane as a room command (it says how it went)."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen

from promptui.screens.base import room_of
from promptui.screens.elicit_dialog import ElicitationChoice, ElicitationDialog
from promptui.screens.evidence_dialog import EvidenceChoice, EvidenceDialog

EVIDENCE_DONE = {"supplied": "evidence supplied", "returned": "sent back to the model",
                 "failed": "failed"}
QUESTION_DONE = {"accept": "answer accepted", "decline": "question declined",
                 "cancel": "question dismissed"}


def answer_waiting(screen: Screen[Any], process: str, run_id: str,
                   detail: dict[str, Any]) -> bool:
    """Open the dialog for ``detail``'s reason; False when it is a write to reconcile."""
    reason = detail.get("reason")
    if reason == "missing_completion_evidence":
        _answer_evidence(screen, process, run_id, detail)
    elif reason == "elicitation":
        _answer_question(screen, process, run_id, detail)
    else:
        return False
    return True


def _answer_evidence(screen: Screen[Any], name: str, run_id: str,
                     detail: dict[str, Any]) -> None:
    room = room_of(screen)
    control = room.control

    def decided(choice: EvidenceChoice | None) -> None:
        if choice is None:
            return
        room.command(
            f"answer run {run_id[:8]}",
            lambda: control.answer_evidence(name, run_id, choice.action,
                                            evidence=choice.evidence, note=choice.note),
            lambda _: f"run {run_id[:8]}: {EVIDENCE_DONE[choice.action]}")

    screen.app.push_screen(EvidenceDialog(name, detail), decided)


def _answer_question(screen: Screen[Any], name: str, run_id: str,
                     detail: dict[str, Any]) -> None:
    room = room_of(screen)
    control = room.control

    def decided(choice: ElicitationChoice | None) -> None:
        if choice is None:
            return
        room.command(
            f"answer {detail.get('server', 'the server')} for run {run_id[:8]}",
            lambda: control.answer_elicitation(name, run_id, choice.action,
                                               content=choice.content),
            lambda _: f"run {run_id[:8]}: {QUESTION_DONE[choice.action]}")

    screen.app.push_screen(ElicitationDialog(name, detail), decided)
