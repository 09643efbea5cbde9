"""The ``[keymap]`` of the config file checked against the binding ids the control room has.

Textual's ``set_keymap`` ignores an id no binding carries, so a typo'd id would do nothing
without a word. The valid ids are read from the room itself, never from a list kept here: every
``ActionSpec`` in ``promptui.actions`` and every ``Binding`` with an id on a screen, widget or
app class of promptui (and the Textual classes they build on), so a new binding is known the
moment it exists."""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any


def _subclasses(cls: type) -> Iterator[type]:
    sub: type
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _specs(module: ModuleType) -> Iterator[Any]:
    """Every ActionSpec the module holds, alone or in a tuple of them."""
    from promptui.actions import ActionSpec

    for value in vars(module).values():
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, ActionSpec):
                yield item


def known_binding_ids() -> set[str]:
    """Every binding id the control room can remap."""
    from textual.binding import Binding
    from textual.dom import DOMNode

    import promptui.actions
    import promptui.app  # the app class and what it imports
    import promptui.screens
    import promptui.widgets

    for package in (promptui.screens, promptui.widgets):  # the ones loaded on demand, too
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
    ids = {spec.binding_id for spec in _specs(promptui.actions)}
    ours = [cls for cls in _subclasses(DOMNode) if cls.__module__.startswith("promptui.")]
    for base in {base for cls in ours for base in cls.__mro__}:
        for binding in vars(base).get("BINDINGS", ()):
            if isinstance(binding, Binding) and binding.id:
                ids.add(binding.id)
    return ids


def keymap_warnings(keymap: dict[str, str], path: Path) -> list[str]:
    """A line per id of ``keymap`` (read from the config file at ``path``) the room does not
    have, at its line in the file, then one naming the valid ids."""
    from promptui.settings import display_path, find_key_line

    if not keymap:
        return []
    known = sorted(known_binding_ids())
    unknown = [key for key in keymap if key not in known]
    if not unknown:
        return []
    lines = []
    for key in unknown:
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        line = find_key_line(path, "keymap", key)
        where = display_path(path) + (f":{line}" if line is not None else "")
        lines.append(f"{where}: [keymap] {key!r} is not a binding id, so it is ignored{hint}")
    lines.append(f"valid binding ids (? in the room lists them with their keys): "
                 f"{', '.join(known)}")
    return lines
