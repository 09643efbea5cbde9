"""A run whose final reply waits for completion evidence: what is missing, the reply, the
artifacts so far; the operator supplies evidence, sends the reply back to the model with a note,
or fails the run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from promptui.screens.dialogs import json_or_text


@dataclass(frozen=True, slots=True)
class EvidenceChoice:
    action: str  # "supplied", "returned", "failed"
    evidence: Any
    note: str


class EvidenceDialog(ModalScreen[EvidenceChoice | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="promptui.dialog.cancel")]

    def __init__(self, process: str, detail: dict[str, Any]) -> None:
        super().__init__(classes="dialog-screen")
        self.process = process
        self.detail = detail

    def compose(self) -> ComposeResult:
        d = self.detail
        artifacts = d.get("artifacts") or []
        listed = ", ".join(f"{a.get('kind')} {a.get('tool')}@{a.get('step')}"
                           for a in artifacts[-4:]) or "none"
        body = (f"[b]Missing[/b] {escape(str(d.get('missing', '')))}\n"
                f"[b]Reply[/b] {escape(str(d.get('reply', ''))[:160])}\n"
                f"[b]Completion[/b] {escape(str(d.get('evaluator', '')))}   "
                f"[b]latest action[/b] {escape(str(d.get('latest_action') or 'none'))}\n"
                f"[b]Artifacts[/b] {escape(listed)}")
        with Vertical(classes="dialog dialog-wide"):
            yield Label(f"Completion evidence for run {str(d.get('run_id', ''))[:12]} of "
                        f"{self.process}", classes="dialog-title")
            yield Static(body, classes="dialog-body", markup=True)
            yield Input(placeholder="evidence for the latest action (JSON or text)",
                        id="evidence")
            yield Input(placeholder="note (for the journal, or for the model)", id="note")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Supply", id="supplied", variant="success")
                yield Button("Back to model", id="returned", variant="warning")
                yield Button("Fail run", id="failed", variant="error")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed, "#supplied, #returned, #failed")
    def _decide(self, event: Button.Pressed) -> None:
        action = str(event.button.id)
        raw = self.query_one("#evidence", Input).value
        note = self.query_one("#note", Input).value
        if action == "supplied" and not raw.strip():
            self.notify("type the evidence first (what you observed)", severity="warning")
            return
        if action == "returned" and not note.strip():
            self.notify("type a note for the model first", severity="warning")
            return
        self.dismiss(EvidenceChoice(action, json_or_text(raw), note))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
