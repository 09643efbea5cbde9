"""``:``, k9s style: a one-line prompt at the bottom that jumps to a process by name. The first
name (in the table's order) that starts with what is typed, case-insensitive, is the one;
Tab completes to what all the matching names share; Enter takes it, Esc cancels."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from promptui.screens.base import OpenProcess


def matching(names: Sequence[str], typed: str) -> list[str]:
    """The names that start with ``typed`` (case-insensitive), in the order given."""
    prefix = typed.strip().lower()
    return [name for name in names if name.lower().startswith(prefix)]


def completion(names: Sequence[str], typed: str) -> str:
    """What Tab makes of ``typed``: the longest beginning all its matches share (spelled as
    the first match spells it), or ``typed`` itself when nothing matches."""
    found = matching(names, typed)
    if not found:
        return typed
    first, *others = [name.lower() for name in found]
    length = len(first)
    for other in others:
        differ = (i for i, (a, b) in enumerate(zip(first, other, strict=False)) if a != b)
        length = min(length, next(differ, len(other)))
    return found[0][:length]


class JumpPrompt(ModalScreen[str | None]):
    """Dismissed with the chosen process name, or None."""

    DEFAULT_CSS = """
    JumpPrompt { align: left bottom; background: $background 0%; }
    #jump-line { height: 1; width: 100%; background: $panel; }
    #jump-colon { width: 1; color: $accent; text-style: bold; }
    #jump-input { width: 1fr; height: 1; border: none; padding: 0; background: $panel; }
    #jump-input:focus { border: none; }
    #jump-hint { width: auto; max-width: 50%; padding: 0 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="promptui.jump.cancel"),
                Binding("tab", "complete", "Complete", id="promptui.jump.complete",
                        priority=True)]

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__()
        self.names = list(names)  # in the table's order: the first match is the one
        self.chosen: str | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="jump-line"):
            yield Label(":", id="jump-colon")
            yield Input(placeholder="process name (tab completes, enter jumps, esc cancels)",
                        id="jump-input", compact=True)
            yield Static("", id="jump-hint")

    def on_mount(self) -> None:
        self.query_one("#jump-input", Input).focus()

    @property
    def typed(self) -> str:
        return self.query_one("#jump-input", Input).value

    def target(self) -> str | None:
        found = matching(self.names, self.typed)
        return found[0] if found and self.typed.strip() else None

    @on(Input.Changed, "#jump-input")
    def _typed(self) -> None:
        hint = self.query_one("#jump-hint", Static)
        if not self.typed.strip():
            hint.update("")
            return
        found = matching(self.names, self.typed)
        if not found:
            hint.update(Text(f"no process starts with {self.typed.strip()!r}", style="red"))
            return
        more = f" (+{len(found) - 1})" if len(found) > 1 else ""
        hint.update(Text.assemble(("→ ", "dim"), (found[0], "bold"), (more, "dim")))

    def action_complete(self) -> None:
        box = self.query_one("#jump-input", Input)
        box.value = completion(self.names, box.value)
        box.cursor_position = len(box.value)

    @on(Input.Submitted, "#jump-input")
    def _jump(self) -> None:
        if self.chosen is not None:
            # A second Enter typed before the prompt closed (`:inv` Enter Enter, fast or
            # pasted) reaches the prompt, not the table: it means the table's Enter, open it.
            self.app.post_message(OpenProcess(self.chosen))
            return
        if not self.typed.strip():
            self.dismiss(None)
            return
        name = self.target()
        if name is None:
            self.query_one("#jump-hint", Static).update(Text(
                f"no process starts with {self.typed.strip()!r}", style="bold red"))
            return
        self.chosen = name  # dismissed once: a second dismiss would pop the screen below
        self.dismiss(name)

    def action_cancel(self) -> None:
        self.dismiss(None)
