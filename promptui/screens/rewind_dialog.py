"""The rewind preview: what a rewind to an entry would change, per mode, and above all what it
cannot undo. Nothing happens until the operator applies; an irreversible plan (writes to the
outside world after the target) asks for the process name first."""

from __future__ import annotations

import json

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, RadioButton, RadioSet, Static

from promptui.actions import REWIND, read_only_message
from promptui.format import clip, date_time, short
from promptui.screens.base import room_of
from runtime_core.control.plane import ControlError
from runtime_core.control.views import JournalEntryView, RewindPlan

# (mode, label): keys 1-5 pick them in this order.
MODES = (("both", "both"), ("conversation_only", "conversation"), ("code_only", "code"),
         ("summarize", "summarize"), ("cancel", "cancel"))
DROPPED_SHOWN = 5


def effects_view(plan: RewindPlan) -> Text:
    """The part that stays done, in the error colour: it is what an operator must know."""
    text = Text()
    if plan.outside_effects:
        n = len(plan.outside_effects)
        text.append(f"⚠ {n} outside effect{'s' if n != 1 else ''} will NOT be undone:\n",
                    style="bold")
        for fx in plan.outside_effects:
            args = json.dumps(fx.args, default=str, ensure_ascii=False, separators=(",", ":"))
            text.append(f"  {fx.tool}", style="bold")
            text.append(f"({clip(args, 60)}) → {clip(fx.result, 40) or 'outcome unknown'}\n")
    text.append(plan.not_rolled_back)
    return text


def plan_view(plan: RewindPlan) -> RenderableType:
    head = Text()
    head.append(f"Target #{plan.target_seq} {plan.target_type} at "
                f"{date_time(plan.target_timestamp)}\n", style="bold")
    head.append(f"Entries: {plan.entries_affected} of {plan.entries_total} affected "
                f"(conversation {plan.conversation_affected}, state {plan.state_affected}, "
                f"other {plan.other_affected})")
    parts: list[RenderableType] = [head]
    if plan.context_changes:
        table = Table(box=None, expand=True, padding=(0, 1), title_justify="left",
                      title=Text(f"Context: {len(plan.context_changes)} keys change",
                                 style="bold"))
        table.add_column("Key", no_wrap=True, ratio=2)
        table.add_column("Before", no_wrap=True, ratio=3)
        table.add_column("", width=1)
        table.add_column("After", no_wrap=True, ratio=3)
        table.add_column("Kind", no_wrap=True, width=7)
        for ch in plan.context_changes:
            table.add_row(ch.key, short(ch.before), "→", short(ch.after), ch.kind)
        parts.append(table)
    else:
        parts.append(Text("Context: no change", style="dim"))
    if plan.messages_dropped:
        dropped = Text(f"Conversation: {plan.messages_dropped} messages dropped\n",
                       style="bold")
        for line in plan.dropped_preview[:DROPPED_SHOWN]:
            dropped.append(f"  {clip(line, 100)}\n", style="dim")
        if plan.messages_dropped > DROPPED_SHOWN:
            dropped.append(f"  … {plan.messages_dropped - DROPPED_SHOWN} more\n", style="dim")
        dropped.rstrip()
        parts.append(dropped)
    else:
        parts.append(Text("Conversation: nothing dropped", style="dim"))
    if plan.summary:
        parts.append(Text(f"Summary added: {clip(plan.summary, 300)}", style="italic"))
    return Group(*parts)


class RewindPreview(ModalScreen[str | None]):
    """Dismissed with the mode to apply, or None. ``y`` applies whenever Apply is enabled;
    for an irreversible plan that is once the process name is typed, and then the focus moves
    from the name box (which would take the ``y`` as text) to Apply. While Apply is off, ``y``
    is not this screen's (``check_action``): it types, or starts the name."""

    CSS_PATH = "timeline.tcss"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="promptui.rewind.cancel"),
                Binding("y", "apply", "Apply", id="promptui.rewind.apply"),
                *(Binding(str(i), f"mode('{mode}')", label, show=False,
                          id=f"promptui.rewind.mode_{mode}")
                  for i, (mode, label) in enumerate(MODES, 1))]

    def __init__(self, process: str, entry: JournalEntryView, *, read_only: bool = False,
                 mode: str = "both") -> None:
        super().__init__(classes="dialog-screen")
        self.process = process
        self.entry = entry
        self.read_only = read_only
        self.mode = mode
        self.plan: RewindPlan | None = None  # the plan of ``mode``, once read
        self.error = ""
        self.can_apply = False  # Apply is enabled: the plan is read, allowed and confirmed

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide", id="rewind-dialog"):
            yield Label(f"Rewind {self.process} to just before #{self.entry.seq} "
                        f"({self.entry.entry_type})", classes="dialog-title")
            with RadioSet(id="rewind-mode"):
                for i, (mode, label) in enumerate(MODES, 1):
                    yield RadioButton(f"{i} {label}", value=mode == self.mode, id=f"mode-{mode}")
            yield Static("", id="rewind-effects")
            with VerticalScroll(id="rewind-body"):
                yield Static(Text("reading the plan…", style="dim"), id="rewind-plan")
            yield Static("", id="rewind-status")
            with Horizontal(classes="dialog-buttons"):
                yield Input(placeholder=f"type {self.process} to apply", id="rewind-confirm",
                            select_on_focus=False)  # typing continues what was typed
                yield Button("Cancel", id="cancel")
                yield Button("Apply", id="apply", variant="error", disabled=True)

    def on_mount(self) -> None:
        self.query_one("#rewind-confirm", Input).display = False
        self.query_one("#cancel", Button).focus()
        self._load(self.mode)

    # -- the plan ------------------------------------------------------------------------------
    def _load(self, mode: str) -> None:
        self.mode, self.plan, self.error = mode, None, ""
        self._draw()
        self.run_worker(self._fetch(mode), group="rewind-plan", exclusive=True)

    async def _fetch(self, mode: str) -> None:
        try:
            plan = await room_of(self).control.rewind_plan(self.process, self.entry.entry_id, mode)
        except ControlError as exc:
            plan, error = None, str(exc)
        except Exception as exc:  # a remote that went away: say so, keep the dialog up
            plan, error = None, f"cannot read the plan: {exc}"
        else:
            error = ""
        if mode != self.mode:
            return  # the operator picked another mode meanwhile
        self.plan, self.error = plan, error
        self._draw()

    def _draw(self) -> None:
        plan = self.plan
        effects = self.query_one("#rewind-effects", Static)
        body = self.query_one("#rewind-plan", Static)
        if self.error:
            body.update(Text(self.error, style="bold red"))
        elif plan is None:
            body.update(Text("reading the plan…", style="dim"))
        else:
            body.update(plan_view(plan))
        effects.display = plan is not None
        if plan is not None:
            effects.update(effects_view(plan))
            effects.set_class(plan.irreversible, "irreversible")
        confirm = self.query_one("#rewind-confirm", Input)
        confirm.display = self._needs_name and not self.read_only and self.mode != "cancel"
        self._update_apply()

    @property
    def _needs_name(self) -> bool:
        return self.plan is not None and self.plan.irreversible

    def _update_apply(self) -> None:
        status = self.query_one("#rewind-status", Static)
        typed = self.query_one("#rewind-confirm", Input).value.strip() == self.process
        if self.read_only:
            why = read_only_message(f"preview only, {REWIND.refused_as}")
        elif self.mode == "cancel":
            why = "cancel: preview only — pick a mode with 1-4 to apply"
        elif self.plan is None:
            why = self.error and "no plan: nothing to apply"
        elif self._needs_name and not typed:
            why = f"type {self.process} to enable Apply: outside effects stay done"
        else:
            why = ""
        status.update(Text(why or "y or Apply rewinds", style="yellow" if why else "green"))
        self.query_one("#apply", Button).disabled = bool(why)
        self.can_apply = not why

    # -- events and actions --------------------------------------------------------------------
    @on(RadioSet.Changed, "#rewind-mode")
    def _mode_picked(self, event: RadioSet.Changed) -> None:
        mode = str(event.pressed.id or "").removeprefix("mode-")
        if mode != self.mode:
            self._load(mode)

    def action_mode(self, mode: str) -> None:
        self.query_one(f"#mode-{mode}", RadioButton).value = True  # RadioSet.Changed follows

    def on_key(self, event: events.Key) -> None:
        """Typing the process name works with Cancel focused: its first letter moves into the
        confirmation box. Other keys keep their meaning (1-5 modes, y, escape)."""
        confirm = self.query_one("#rewind-confirm", Input)
        char = event.character
        if confirm.display and not confirm.has_focus and char and char.isprintable() \
                and self.process.startswith(confirm.value + char):
            confirm.focus()
            confirm.insert_text_at_cursor(char)
            event.stop()
            event.prevent_default()

    @on(Input.Changed, "#rewind-confirm")
    def _typed(self, event: Input.Changed) -> None:
        self._update_apply()
        if self.can_apply and event.input.has_focus:
            self.query_one("#apply", Button).focus()  # y or Enter applies from here

    @on(Input.Submitted, "#rewind-confirm")
    def _typed_enter(self) -> None:
        self._apply()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # While Apply is off, `y` is not this screen's: it goes on to the name box.
        return self.can_apply if action == "apply" else True

    def action_apply(self) -> None:
        self._apply()

    @on(Button.Pressed, "#apply")
    def _apply(self) -> None:
        if not self.query_one("#apply", Button).disabled:
            self.dismiss(self.mode)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
