"""Modal dialogs: confirm (Cancel focused), ask for one line (a fork's name, a time to jump
to), inject an event (a JSON payload validated before it is sent) and reconcile a run whose
write outcome is unknown.

The screen behind a dialog stays live, and a question that shows counts ("1 run(s) in
flight", "3 dead letters") keeps them true: a dialog given ``figures`` (the store to its title
and body) is a ``LiveFigures``, and the room's pump calls its ``refresh_figures`` every tick."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Input, Label, Static, TextArea

from promptui.screens.base import LiveScreen
from promptui.store import UIStore
from runtime_core.control.views import DeadLetterView

R = TypeVar("R")
#: A question's title and body from what the room knows now (``store``, the time).
Figures = Callable[[UIStore, float], tuple[str, str]]


@runtime_checkable
class LiveFigures(Protocol):
    """A dialog whose words hold figures that change while it is open: the pump tells it."""

    def refresh_figures(self, store: UIStore, now: float) -> None:
        """Show the figures as they are now."""


class FiguresDialog(ModalScreen[R]):
    """The title label and body of a question, rewritten from ``figures`` each tick."""

    figures: Figures | None = None

    def refresh_figures(self, store: UIStore, now: float) -> None:
        """Rewrite the title and body when their figures changed (the pump calls this)."""
        labels, texts = self.query(".dialog-title"), self.query(".dialog-body")
        if self.figures is None or not labels or not texts:  # none, or not composed yet
            return
        title, body = self.figures(store, now)
        label, text = labels.first(Label), texts.first(Static)
        if str(label.content) != title:
            label.update(title)
        if str(text.content) != body:
            text.update(body)


class ConfirmDialog(FiguresDialog[bool]):
    """Yes/no for a destructive action; Cancel has the focus so Enter does nothing harmful.
    With ``figures``, its title and body follow the store while it is open."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="promptui.dialog.cancel")]

    def __init__(self, title: str, body: str, confirm_label: str = "Confirm", *,
                 figures: Figures | None = None) -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.body = body
        self.confirm_label = confirm_label
        self.figures = figures

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


def dead_letters_now(store: UIStore, process: str, known: int) -> int:
    """How many dead letters ``process`` holds now (the row's figure), else ``known``."""
    row = store.processes.get(process)
    return row.dead_letters if row is not None else known


def redeliver_all_dialog(process: str, letters: Sequence[DeadLetterView]) -> ConfirmDialog:
    """Before every dead letter of ``process`` runs again: how many (kept true while it is
    open), and how many distinct payloads (told apart by their JSON, as the rows show it): 17
    letters of one payload are likely one poison event, not 17 pieces of work."""
    payloads = len({letter.payload_preview for letter in letters})
    read = len(letters)

    def figures(store: UIStore, now: float) -> tuple[str, str]:
        count = dead_letters_now(store, process, read)
        among = "" if count == read else f" among the {read} read when this opened"
        return (f"Redeliver {dead_letters_count(count)} ({payloads} distinct "
                f"payload{'s' if payloads != 1 else ''}{among})?",
                f"Each goes back on {process}'s queue and runs again.")

    title, body = figures(UIStore(), 0.0)
    return ConfirmDialog(title, body, "Redeliver all", figures=figures)


def clear_dead_dialog(process: str, count: int) -> ConfirmDialog:
    """Before every dead letter of ``process`` is dropped: how many (kept true while open)."""

    def figures(store: UIStore, now: float) -> tuple[str, str]:
        n = dead_letters_now(store, process, count)
        return (f"Clear {dead_letters_count(n)} of {process}?",
                f"All {n} are dropped and cannot be redelivered after." if n != 1 else
                "It is dropped and cannot be redelivered after.")

    title, body = figures(UIStore(), 0.0)
    return ConfirmDialog(title, body, "Clear", figures=figures)


class ChoiceDialog(FiguresDialog[str | None]):
    """Cancel (focused, escape) or one of several actions; returns the chosen action's id.
    With ``figures``, its title and body follow the store while it is open."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="promptui.dialog.cancel")]

    def __init__(self, title: str, body: str, choices: list[tuple[str, str]], *,
                 figures: Figures | None = None) -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.body = body
        self.choices = choices  # (id, label), the last one the most drastic
        self.figures = figures

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


def quit_question(flights: Mapping[str, int], drain: float) -> tuple[str, str]:
    """The quit dialog's title and body for these runs in flight (per process), a drain
    lasting up to ``drain`` seconds."""
    return (f"Quit? {sum(flights.values())} run(s) in flight in {len(flights)} process(es)",
            f"Drain: they finish first (up to {drain:g} s) while no new event "
            "is taken, then the room closes (q again cuts it short). Quit now: they are cut "
            "off and go on from their last durable step at the next start (a write cut off "
            "waits for an operator to reconcile). Queued events stay queued in the journal "
            "and run at the next start.")


def live_under_dialogs(stack: list[Screen[Any]]
                       ) -> tuple[LiveScreen | None, list[LiveFigures]]:
    """The live screen the pump draws on (the top one, or the one under the dialogs on top
    of it) and those dialogs that want fresh figures each tick."""
    dialogs: list[LiveFigures] = []
    for screen in reversed(stack):
        if isinstance(screen, ModalScreen):
            if isinstance(screen, LiveFigures):
                dialogs.append(screen)
            continue
        return (screen if isinstance(screen, LiveScreen) else None), dialogs
    return None, dialogs
