"""An MCP server's question a run waits on (elicitation): the server's message, and a form built
from the schema it sent (an Input per text or number field, a Select for a choice, a Switch for
yes/no), checked before it is sent, each problem under its field. Cancel (focused first) closes
the dialog and answers nothing; Accept sends the values; Decline says no; Dismiss tells the
server the question was dismissed (MCP's "cancel"). A URL question shows the URL to open."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static, Switch

from promptui.screens.base import room_of
from runtime_core.control.elicitation import (
    FormError,
    FormField,
    check_content,
    form_fields,
    parse_value,
)


@dataclass(frozen=True, slots=True)
class ElicitationChoice:
    action: str  # "accept", "decline", "cancel"
    content: dict[str, Any] | None = None


def _left(expires_at: Any, now: float) -> str:
    if not isinstance(expires_at, int | float):
        return ""
    seconds = max(0, int(expires_at - now))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class ElicitationDialog(ModalScreen[ElicitationChoice | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="promptui.dialog.cancel")]

    def __init__(self, process: str, detail: dict[str, Any]) -> None:
        super().__init__(classes="dialog-screen")
        self.process = process
        self.detail = detail
        self.schema: dict[str, Any] = dict(detail.get("requested_schema") or {})
        self.url_mode = detail.get("mode") == "url"
        self.problem = ""
        try:
            self.fields: list[FormField] = [] if self.url_mode else form_fields(self.schema)
        except FormError as exc:  # the runtime refuses such a schema; shown, never crashes
            self.fields, self.problem = [], str(exc)

    def compose(self) -> ComposeResult:
        d = self.detail
        left = _left(d.get("expires_at"), room_of(self).clock())
        about = (f"[b]{escape(str(d.get('message', '')))}[/b]\n"
                 f"[dim]during {escape(str(d.get('tool', '')))} (step {d.get('step', '')})"
                 + (f" · unanswered in {left}: cancel" if left else "") + "[/dim]")
        if self.url_mode:
            about += f"\n[b]Open[/b] {escape(str(d.get('url', '')))}"
        with Vertical(classes="dialog dialog-wide", id="elicitation-dialog"):
            yield Label(f"{d.get('server', '')} asks · run {str(d.get('run_id', ''))[:8]} of "
                        f"{self.process}", classes="dialog-title")
            yield Static(about, classes="dialog-body", markup=True)
            if self.problem:
                yield Static(f"cannot show this form: {escape(self.problem)}",
                             classes="dialog-error", markup=True)
            if self.fields:
                with VerticalScroll(id="elicitation-fields"):
                    for field in self.fields:
                        yield from self._field(field)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Accept", id="accept", variant="success",
                             disabled=bool(self.problem))
                yield Button("Decline", id="decline", variant="warning")
                yield Button("Dismiss", id="dismiss", variant="error")

    def _field(self, field: FormField) -> ComposeResult:
        mark = " *" if field.required else ""
        about = f" [dim]{escape(field.description)}[/dim]" if field.description else ""
        yield Label(f"[b]{escape(field.label)}[/b]{mark}{about}", markup=True,
                    classes="elicitation-label")
        ident = f"field-{self.fields.index(field)}"
        default = field.default
        if field.kind == "boolean":
            yield Switch(value=bool(default), id=ident, classes="elicitation-input")
        elif field.kind == "enum":
            options = [(label, value) for value, label in field.choices]
            values = [value for value, _ in field.choices]
            yield Select(options, id=ident, classes="elicitation-input",
                         allow_blank=not (field.required and default in values),
                         value=default if default in values else Select.NULL)
        else:
            shown = ", ".join(default) if isinstance(default, list) else (
                "" if default is None else str(default))
            yield Input(value=shown, placeholder=field.hint(), id=ident,
                        classes="elicitation-input")
        yield Static("", id=f"{ident}-error", classes="dialog-error elicitation-error")

    def on_mount(self) -> None:
        self._show_problems({})
        self.query_one("#cancel", Button).focus()

    def _values(self) -> tuple[dict[str, Any], dict[str, str]]:
        content: dict[str, Any] = {}
        problems: dict[str, str] = {}
        for index, field in enumerate(self.fields):
            widget = self.query_one(f"#field-{index}")
            value: Any
            if isinstance(widget, Switch):
                value = widget.value
            elif isinstance(widget, Select):
                value = None if widget.value is Select.NULL else widget.value
            else:
                assert isinstance(widget, Input)
                try:
                    value = parse_value(field, widget.value)
                except ValueError as exc:
                    problems[field.name] = str(exc)
                    continue
            if value is not None:
                content[field.name] = value
        return content, problems

    def _show_problems(self, problems: dict[str, str]) -> None:
        for index, field in enumerate(self.fields):
            shown = self.query_one(f"#field-{index}-error", Static)
            shown.update(escape(problems.get(field.name, "")))
            shown.display = field.name in problems  # no empty line under a good field

    @on(Button.Pressed, "#accept")
    def _accept(self) -> None:
        if self.url_mode:
            self.dismiss(ElicitationChoice("accept"))
            return
        content, problems = self._values()
        if not problems:
            try:
                content = check_content(self.schema, content)
            except FormError as exc:
                problems = exc.problems
        self._show_problems(problems)
        if problems:
            first = next(i for i, f in enumerate(self.fields) if f.name in problems) \
                if any(f.name in problems for f in self.fields) else None
            if first is not None:
                self.query_one(f"#field-{first}").focus()
            self.notify("the answer does not fit the form: see the fields marked",
                        severity="warning", timeout=4)
            return
        self.dismiss(ElicitationChoice("accept", content))

    @on(Button.Pressed, "#decline")
    def _decline(self) -> None:
        self.dismiss(ElicitationChoice("decline"))

    @on(Button.Pressed, "#dismiss")
    def _dismiss_question(self) -> None:
        self.dismiss(ElicitationChoice("cancel"))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
