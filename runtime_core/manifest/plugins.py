"""A manifest's ``plugins:``: modules imported before its triggers are checked, so the custom
trigger types they register (``register_trigger_type``) are known. Like a tool's module, a plugin
imports with the manifest's folder on ``sys.path``. Each failure is reported at its entry."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

MODULE_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")

Report = Callable[[tuple[Any, ...], str], None]


def import_plugins(entries: Any, base_dir: Path, report: Report) -> list[str]:
    """Import each module named in ``entries`` (the manifest's ``plugins`` value); the ones
    imported. ``report(where, message)`` is told of each one that cannot be."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        report(("plugins",), "plugins is a list of module paths (my_triggers, "
                             "pkg.triggers) whose import registers trigger types")
        return []
    folder = str(base_dir.resolve())
    if entries and folder not in sys.path:  # a plugin beside the manifest imports from here
        sys.path.insert(0, folder)
    imported: list[str] = []
    for index, entry in enumerate(entries):
        where = ("plugins", index)
        hint = ""
        if isinstance(entry, str) and entry.endswith(".py"):
            hint = f" (write the module's name, {Path(entry).stem!r}, not its file)"
        if not isinstance(entry, str) or not MODULE_PATH.match(entry):
            report(where, f"{entry!r} is not a module path (e.g. my_triggers or "
                          f"pkg.triggers){hint}")
            continue
        try:
            importlib.import_module(entry)
        except SystemExit as exc:
            report(where, f"importing plugin {entry!r} called sys.exit({exc.code!r})")
        except Exception as exc:  # a plugin's own error, whatever it is, is reported here
            report(where, f"cannot import plugin {entry!r}: {type(exc).__name__}: {exc}{hint}")
        else:
            imported.append(entry)
    return imported
