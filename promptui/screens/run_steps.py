"""A run's steps, for any run picked in the Runs tab: what it executed, each step, how it
ended, and a note (a read-only room says why it does not reconcile)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from promptui.widgets.runs import identity_lines, run_end, run_header, step_line
from runtime_core.control import RunView


class RunStepsDialog(ModalScreen[None]):
    BINDINGS = [Binding("escape,enter", "close", "Close", id="promptui.dialog.close")]
    DEFAULT_CSS = """
    RunStepsDialog #run-steps { height: auto; max-height: 16; }
    """

    def __init__(self, process: str, run: RunView, note: str = "") -> None:
        super().__init__(classes="dialog-screen")
        self.process = process
        self.run_view = run
        self.note = note

    def compose(self) -> ComposeResult:
        run = self.run_view
        lines: list[RenderableType] = [run_header(run)]
        if run.identity or run.config_changed:
            lines.append(identity_lines(run))
        lines += [step_line(s) for s in run.steps] or [Text("  (no steps)", style="dim")]
        if run.state != "running":
            lines.append(run_end(run))
        if self.note:
            lines.append(Text(self.note, style="yellow"))
        with Vertical(classes="dialog dialog-wide"):
            yield Label(f"Run {run.run_id[:12]} of {self.process} — {run.state}",
                        classes="dialog-title")
            with VerticalScroll(id="run-steps"):
                yield Static(Group(*lines))
            with Horizontal(classes="dialog-buttons"):
                yield Button("Close", id="close")

    def on_mount(self) -> None:
        self.query_one("#close", Button).focus()

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        self.dismiss(None)
