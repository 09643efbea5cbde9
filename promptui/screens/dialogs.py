"""Modal dialogs: confirm (Cancel focused), ask for one line (a fork's name, a time to jump
to), inject an event (a JSON payload validated before it is sent) and reconcile a run whose
write outcome is unknown."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, TextArea

from runtime_core.control.views import DeadLetterView


class ConfirmDialog(ModalScreen[bool]):
    """Yes/no for a destructive action; Cancel has the focus so Enter does nothing harmful."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="promptui.dialog.cancel")]

    def __init__(self, title: str, body: str, confirm_label: str = "Confirm") -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.body = body
        self.confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(self.body, classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button(self.confirm_label, id="confirm", variant="error")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed, "#confirm")
    def _confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)


def dead_letters_count(count: int) -> str:
    return f"{count} dead letter{'s' if count != 1 else ''}"


def redeliver_all_dialog(process: str, letters: Sequence[DeadLetterView]) -> ConfirmDialog:
    """Before every dead letter of ``process`` runs again: how many, and how many distinct
    payloads (told apart by their JSON, as the rows show it): 17 letters of one payload
    are likely one poison event, not 17 pieces of work."""
    payloads = len({letter.payload_preview for letter in letters})
    return ConfirmDialog(
        f"Redeliver {dead_letters_count(len(letters))} ({payloads} distinct "
        f"payload{'s' if payloads != 1 else ''})?",
        f"Each goes back on {process}'s queue and runs again.", "Redeliver all")


def clear_dead_dialog(process: str, count: int) -> ConfirmDialog:
    return ConfirmDialog(
        f"Clear {dead_letters_count(count)} of {process}?",
        f"All {count} are dropped and cannot be redelivered after." if count != 1 else
        "It is dropped and cannot be redelivered after.", "Clear")


class ChoiceDialog(ModalScreen[str | None]):
    """Cancel (focused, escape) or one of several actions; returns the chosen action's id."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="promptui.dialog.cancel")]

    def __init__(self, title: str, body: str, choices: list[tuple[str, str]]) -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.body = body
        self.choices = choices  # (id, label), the last one the most drastic

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(self.body, classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                for index, (choice, label) in enumerate(self.choices):
                    last = index == len(self.choices) - 1
                    yield Button(label, id=f"choice-{choice}",
                                 variant="error" if last else "primary")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        pressed = event.button.id or ""
        self.dismiss(pressed.removeprefix("choice-") if pressed.startswith("choice-")
                     else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class AskDialog(ModalScreen[str | None]):
    """One line of input, checked as typed; enter or OK returns it, escape returns None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="promptui.dialog.cancel")]

    def __init__(self, title: str, prompt: str, value: str = "",
                 check: Callable[[str], str] | None = None) -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.prompt = prompt
        self.value = value
        self.check = check or (lambda _: "")

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Input(self.value, placeholder=self.prompt, id="ask-input")
            yield Static("", id="ask-error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("OK", id="ok", variant="primary")

    def on_mount(self) -> None:
        box = self.query_one("#ask-input", Input)
        box.border_title = self.prompt
        box.focus()

    @on(Input.Changed, "#ask-input")
    def _validate(self, event: Input.Changed) -> None:
        error = self.check(event.value)
        self.query_one("#ask-error", Static).update(error)
        self.query_one("#ok", Button).disabled = bool(error)

    @on(Input.Submitted, "#ask-input")
    @on(Button.Pressed, "#ok")
    def _ok(self) -> None:
        value = self.query_one("#ask-input", Input).value
        error = self.check(value)
        if error:
            self.query_one("#ask-error", Static).update(error)
            return
        self.dismiss(value)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


@dataclass(frozen=True, slots=True)
class InjectRequest:
    trigger_type: str
    payload: dict[str, Any]


def parse_payload(text: str) -> tuple[dict[str, Any] | None, str]:
    """The payload as a dict, or None and an error that says where and how to fix it."""
    if not text.strip():
        return {}, ""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
    if not isinstance(value, dict):
        return None, f"the payload must be a JSON object {{...}}, not a {type(value).__name__}"
    return value, ""


EXAMPLE_PAYLOAD = '{"task": "check"}'


class InjectDialog(ModalScreen[InjectRequest | None]):
    """The payload box starts empty, the example as its placeholder, so what the operator
    types is the payload (empty sends ``{}``). Escape and ctrl+a are the dialog's, with
    priority: the editor would take the first Esc to leave itself, and ctrl+a to go to the
    start of the line."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="promptui.dialog.cancel",
                        priority=True),
                Binding("ctrl+s", "send", "Send", id="promptui.dialog.send"),
                Binding("ctrl+a", "select_all", "Select all", id="promptui.dialog.select_all",
                        priority=True)]

    def __init__(self, process: str, payload: str = "",
                 example: str = EXAMPLE_PAYLOAD) -> None:
        super().__init__(classes="dialog-screen")
        self.process = process
        self.initial = payload
        self.example = example

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide"):
            yield Label(f"Inject an event into {self.process}", classes="dialog-title")
            yield Input("manual", placeholder="trigger type", id="trigger-type")
            yield TextArea(self.initial, id="payload", soft_wrap=True, tab_behavior="indent",
                           show_line_numbers=False, placeholder=f"e.g. {self.example}")
            yield Static("", id="payload-error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Send (ctrl+s)", id="send", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#trigger-type", Input).border_title = "trigger type"
        payload = self.query_one("#payload", TextArea)
        payload.border_title = "payload: a JSON object"
        payload.focus()

    @on(TextArea.Changed)
    def _validate_live(self) -> None:
        _, error = parse_payload(self.query_one("#payload", TextArea).text)
        self.query_one("#payload-error", Static).update(error and f"Invalid JSON: {error}")
        self.query_one("#send", Button).disabled = bool(error)

    def action_select_all(self) -> None:
        focused = self.focused
        if isinstance(focused, TextArea | Input):
            focused.select_all()

    @on(Button.Pressed, "#send")
    def action_send(self) -> None:
        payload, error = parse_payload(self.query_one("#payload", TextArea).text)
        if payload is None:
            self.query_one("#payload-error", Static).update(f"Invalid JSON: {error}")
            return
        trigger = self.query_one("#trigger-type", Input).value.strip() or "manual"
        self.dismiss(InjectRequest(trigger, payload))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


def json_or_text(raw: str) -> Any:
    """What an operator typed: JSON when it parses, else the text itself; None when empty."""
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw  # plain text is a fine observation


@dataclass(frozen=True, slots=True)
class ReconcileChoice:
    outcome: str  # "applied", "not_applied", "failed"
    result: Any
    note: str


class ReconcileDialog(ModalScreen[ReconcileChoice | None]):
    """The write a crash left unknown: the tool, its arguments and idempotency key; the
    operator says whether it happened (with the observed result), did not, or fails the run."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="promptui.dialog.cancel")]

    def __init__(self, process: str, detail: dict[str, Any]) -> None:
        super().__init__(classes="dialog-screen")
        self.process = process
        self.detail = detail

    def compose(self) -> ComposeResult:
        d = self.detail
        args = json.dumps(d.get("args", {}), indent=1, default=str, ensure_ascii=False)
        with Vertical(classes="dialog dialog-wide"):
            yield Label(f"Reconcile run {str(d.get('run_id', ''))[:12]} of {self.process}",
                        classes="dialog-title")
            where = ""
            if d.get("mcp_server"):
                where = f"[b]Where[/b] MCP server {escape(str(d['mcp_server']))}"
                if d.get("idempotent"):
                    where += " · idempotent (a repeat is harmless)"
                where += "\n"
            yield Static(
                f"[b]Tool[/b] {d.get('tool', '')}   [b]step[/b] {d.get('step', '')}\n{where}"
                f"[b]Idempotency key[/b] {d.get('idempotency_key', '')}\n"
                f"[b]Why[/b] {d.get('reason', '')}"
                f"{': ' + escape(str(d['cause'])) if d.get('cause') else ''}\n"
                f"[b]Arguments[/b] {args}",
                classes="dialog-body", markup=True)
            yield Input(placeholder="observed result (JSON or text) if it was applied",
                        id="result")
            yield Input(placeholder="note for the journal (optional)", id="note")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Applied", id="applied", variant="success")
                yield Button("Not applied", id="not_applied", variant="warning")
                yield Button("Fail run", id="failed", variant="error")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed, "#applied, #not_applied, #failed")
    def _decide(self, event: Button.Pressed) -> None:
        result = json_or_text(self.query_one("#result", Input).value)
        outcome = str(event.button.id)
        self.dismiss(ReconcileChoice(outcome, result if outcome == "applied" else None,
                                     self.query_one("#note", Input).value))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
