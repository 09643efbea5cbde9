"""A run's steps, for any run picked in the Runs tab: what it executed, each step (a line each,
cut to fit; Enter goes on to the journal entry that recorded the step, on the timeline, and v
shows its args and result whole in the pager), how it ended, and a note (a read-only room says
why it does not reconcile)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, OptionList, Static
from textual.widgets.option_list import Option

from promptui.screens.base import OpenTimeline
from promptui.widgets.runs import identity_lines, run_end, run_header, step_line
from promptui.widgets.show_value import ShowValue
from promptui.widgets.view_values import step_value
from runtime_core.control.views import RunView


class RunStepsDialog(ModalScreen[None]):
    BINDINGS = [Binding("escape", "close", "Close", id="promptui.dialog.close"),
                Binding("v", "view_step", "View step", id="promptui.run_steps.view")]
    DEFAULT_CSS = """
    RunStepsDialog #run-steps {
        height: auto; max-height: 35vh; border: none; padding: 0;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    RunStepsDialog .run-lines { height: auto; }
    RunStepsDialog .dialog { overflow-y: auto; }
    """

    def __init__(self, process: str, run: RunView, note: str = "") -> None:
        super().__init__(classes="dialog-screen")
        self.process = process
        self.run_view = run
        self.note = note

    def compose(self) -> ComposeResult:
        run = self.run_view
        head: list[RenderableType] = [run_header(run)]
        if run.identity or run.config_changed:
            head.append(identity_lines(run))
        tail: list[RenderableType] = []
        if run.state != "running":
            tail.append(run_end(run))
        if self.note:
            tail.append(Text(self.note, style="yellow"))
        with Vertical(classes="dialog dialog-wide"):
            yield Label(f"Run {run.run_id[:12]} of {self.process} — {run.state}",
                        classes="dialog-title")
            if run.steps:
                yield Static(Text("enter: the step's journal entry · v: the step whole · "
                                  "esc: back", style="dim"), classes="run-lines")
            yield Static(Group(*head), classes="run-lines")
            if run.steps:
                yield OptionList(*(Option(step_line(s), id=str(i))
                                   for i, s in enumerate(run.steps)), id="run-steps")
            else:
                yield Static(Text("  (no steps)", style="dim"))
            if tail:
                yield Static(Group(*tail), classes="run-lines")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Close", id="close")

    def on_mount(self) -> None:
        steps = self.query("#run-steps")
        (steps.first() if steps else self.query_one("#close", Button)).focus()

    @on(OptionList.OptionSelected, "#run-steps")
    def _step_chosen(self, event: OptionList.OptionSelected) -> None:
        """The drill-down's next step: the step's journal entry, on the timeline."""
        event.stop()
        step = self.run_view.steps[event.option_index]
        self.post_message(OpenTimeline(self.process, self.run_view.run_id, step.index))

    def action_view_step(self) -> None:
        steps = self.query("#run-steps")
        if steps:
            index = steps.first(OptionList).highlighted
            if index is not None:
                self._show_step(index)

    def _show_step(self, index: int) -> None:
        step = self.run_view.steps[index]
        run_id = self.run_view.run_id
        self.post_message(ShowValue(f"Step {step.index} ({step.kind} {step.name}) of run "
                                    f"{run_id[:8]} of {self.process}", step_value(step),
                                    f"{run_id}:{step.index}"))

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        self.dismiss(None)
