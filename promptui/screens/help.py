"""``?``: every binding of the screen underneath, with its id (for the keymap in config.toml)."""

from __future__ import annotations

import re

from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.screen import ModalScreen, Screen
from textual.widgets import Label, Static


def key_display(screen: Screen[object], key: str) -> str:
    return screen.app.get_key_display(Binding(key, ""))


def screen_name(screen: Screen[object]) -> str:
    """What an operator calls ``screen``: its ``HELP_NAME``, else its class name in words
    (ProcessDetailScreen: "Process detail")."""
    named = getattr(screen, "HELP_NAME", "")
    if named:
        return str(named)
    words = re.findall(r"[A-Z][a-z0-9]*", type(screen).__name__.removesuffix("Screen"))
    return " ".join([words[0], *(w.lower() for w in words[1:])]) if words else "this screen"


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss_help", "Close",
                        id="promptui.help.close")]

    def __init__(self, under: Screen[object]) -> None:
        super().__init__(classes="dialog-screen")
        self.under = under

    def rows(self) -> list[tuple[str, str, str]]:
        """(keys, description, binding id) for each action reachable on ``under``."""
        seen: dict[str, tuple[list[str], str]] = {}
        for key, active in self.under.active_bindings.items():
            binding = active.binding
            if not binding.description or binding.action in ("command_palette",):
                continue
            ident = binding.id or binding.action
            keys, _ = seen.setdefault(ident, ([], binding.description))
            display = key_display(self.under, key)
            if display not in keys:
                keys.append(display)
        # A focused widget can shadow one of our keys (the table's Enter is "Open" here):
        # list ours, and drop the widget's binding for that key.
        ours: set[str] = set()
        for binding in getattr(self.under, "BINDINGS", []):
            if isinstance(binding, Binding) and binding.id and binding.id not in seen:
                keys = [key_display(self.under, k) for k in binding.key.split(",")]
                seen[binding.id] = (keys, binding.description)
                ours.update(keys)
        for ident in [i for i, (keys, _) in seen.items()
                      if not i.startswith("promptui.") and set(keys) & ours]:
            del seen[ident]
        rows = [(" ".join(keys), desc, ident) for ident, (keys, desc) in seen.items()]
        # Our actions first, then the app's, then the widgets' own navigation keys.
        rows.sort(key=lambda row: (0 if row[2].startswith("promptui.") else
                                   1 if row[2].startswith("app.") else 2))
        rows.append((key_display(self.under, "ctrl+p"), "Command palette (every action)",
                     "command_palette"))
        return rows

    def compose(self) -> ComposeResult:
        table = Table(box=None, expand=True, show_header=True, header_style="bold")
        table.add_column("Key", no_wrap=True, style="bold")
        table.add_column("Action")
        table.add_column("Binding id (remap in config.toml)", style="dim", no_wrap=True)
        for keys, description, ident in self.rows():
            table.add_row(keys, description, ident)
        where = screen_name(self.under)
        with VerticalScroll(classes="dialog dialog-wide", id="help"):
            yield Label(f"Keys on this screen ({where})", classes="dialog-title")
            yield Static(table)
            yield Static(Text("Remap: [keymap] in the file `promptui locate config` prints. "
                              "Esc closes.", style="dim"))

    def action_dismiss_help(self) -> None:
        self.dismiss(None)


class TooSmallScreen(ModalScreen[None]):
    """Shown instead of a squashed layout; it goes away by itself once the terminal grows."""

    def __init__(self, need: tuple[int, int], size: Size) -> None:
        super().__init__(classes="too-small")
        self.need = need
        self.terminal = size  # the size it was pushed for: the app's may not be updated yet

    def compose(self) -> ComposeResult:
        yield Static(self._text(), id="too-small-text")

    def on_resize(self, event: events.Resize) -> None:
        self.show_size(event.size)

    def show_size(self, size: Size) -> None:
        self.terminal = size
        if self.is_mounted:
            self.query_one("#too-small-text", Static).update(self._text())

    def _text(self) -> str:
        size = self.terminal
        return (f"Terminal too small: {size.width}x{size.height}.\n"
                f"promptui needs at least {self.need[0]}x{self.need[1]}.\n"
                "Enlarge the window (or press q to quit).")
