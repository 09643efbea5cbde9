"""``reference/keys.md``: every key of the control room, from the action registry
(``promptui.actions``) that the bindings, the command palette and the ``?`` help screen are
built from. A list added there appears here by itself."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

from .markdown import banner, cell, code, table

#: Where each list of the registry applies, in the order the page shows them. A list not
#: named here still appears, after these, under a title made from its name.
SCREENS: dict[str, tuple[str, str]] = {
    "GLOBAL_ACTIONS": ("Everywhere", "On every screen of the room; they act on the process the "
                       "screen is about (the selected row on the dashboard)."),
    "DASHBOARD_ACTIONS": ("Dashboard", "The process table and the feeds: the first screen."),
    "DETAIL_ACTIONS": ("Process detail", "One process (Enter on the dashboard), its tabs 1-9."),
    "RECONCILE": ("Process detail: a waiting run", "Enter on a run that waits (a write whose "
                  "outcome is unknown, or evidence to answer) reconciles it."),
    "TIMELINE_ACTIONS": ("Timeline", "A process's journal, entry by entry (w on the detail "
                         "screen)."),
    "REWIND": ("Timeline: the rewind preview", "The preview of a rewind plan (p on an "
               "entry): apply it."),
    "INCIDENT_ACTIONS": ("Incidents", "The incidents of the processes (I on the dashboard)."),
    "NODE_ACTIONS": ("Cluster nodes", "The nodes of a scale-out cluster (N on the dashboard)."),
    "TAIL_ACTIONS": ("Live tail", "Every event of the runtime as it comes (L on the "
                     "dashboard)."),
    "PAGER_ACTIONS": ("Pager", "One value whole (v or Enter on a row, a dead letter, a run, a "
                      "step, an entry or a feed line); the moving keys are less's too."),
}

INTRO = """\
# Keys

Every key of the control room, screen by screen. `?` (or F1) shows the keys of the screen you
are on; `Ctrl+P` opens the command palette, which lists the same actions by name.

- **Binding id**: the name to remap the key by, in the `[keymap]` table of the config file
  (`promptui locate config` prints where it is), e.g. `"promptui.quit" = "ctrl+q"`.
- **Changes the runtime**: refused in a read-only room (`promptui ui --read-only`, or attached
  to a server started with `--read-only`); the room says so instead of acting.
- **Footer** and **Palette**: whether the action is shown in the footer and offered by the
  command palette. Every action, shown or not, works by its key.
"""


def registry() -> ModuleType:
    """The module that holds the room's action lists."""
    from promptui import actions

    return actions


def action_lists(module: ModuleType | None = None) -> list[tuple[str, tuple[Any, ...]]]:
    """(name, actions) for each list of the registry, and each lone action (as a list of one),
    in the page's order."""
    module = module or registry()
    found: dict[str, tuple[Any, ...]] = {}
    for name, value in vars(module).items():
        items = value if isinstance(value, tuple) else (value,)
        if items and all(isinstance(item, module.ActionSpec) for item in items):
            found[name] = items
    order = list(SCREENS)
    return sorted(found.items(), key=lambda pair: (
        order.index(pair[0]) if pair[0] in order else len(order), pair[0]))


def all_actions() -> Iterator[Any]:
    """Every ActionSpec of the registry."""
    for _, specs in action_lists():
        yield from specs


def key_display(keys: str) -> str:
    """``question_mark,f1`` as the room shows it: ``?`` ``f1`` (Textual's own formatting)."""
    from textual.binding import Binding
    from textual.keys import format_key

    shown = []
    for key in keys.split(","):
        modifiers, name = Binding(key.strip(), "").parse_key()
        name = format_key(name)
        if "ctrl" in modifiers:
            modifiers.remove("ctrl")
            name = f"^{name}"
        text = code("+".join([*modifiers, name]))
        # A glyph (⏎, ⌫) gets its name too: a reader may search the page for "enter".
        shown.append(text if name.isascii() else f"{text} ({key.strip()})")
    return " ".join(shown)


def _title(name: str) -> tuple[str, str]:
    if name in SCREENS:
        return SCREENS[name]
    words = name.removesuffix("_ACTIONS").replace("_", " ").capitalize()
    return words, ""


def _yes(flag: bool) -> str:
    return "yes" if flag else ""


def render() -> str:
    """The whole keys page."""
    parts = [banner("keys_page"), INTRO]
    for name, specs in action_lists():
        title, about = _title(name)
        parts.append(f"## {title}\n")
        if about:
            parts.append(about + "\n")
        rows = [(key_display(spec.keys), cell(spec.description), code(spec.binding_id),
                 _yes(spec.mutating), _yes(spec.show), _yes(spec.palette)) for spec in specs]
        parts.append(table(("Key", "Action", "Binding id", "Changes the runtime", "Footer",
                            "Palette"), rows))
    return "\n".join(parts)
