""""Save as manifest" (``m`` on a process's Config tab): the process's configuration now (patched
live, or a fork's) written as a ``.agent`` file where the operator says, through the control plane
(``manifest_text``: the same from a served runtime). Credentials come as ``${VAR}`` references;
the file's head lists the variables to set. An existing file is replaced only once confirmed."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from textual.screen import Screen

from promptui.screens.base import room_of
from promptui.screens.dialogs import AskDialog, ConfirmDialog
from runtime_core.control.plane import ControlError


def _check(text: str) -> str:
    """What is wrong with ``text`` as the file to write ("" when it will do)."""
    if not text.strip():
        return "a file path is needed, e.g. ./my-process.agent"
    path = Path(text.strip()).expanduser()
    if path.is_dir():
        return "that is a folder: name the file in it, e.g. folder/my-process.agent"
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        return f"{parent} is not a folder"
    return ""


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _variables(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.startswith("# note: "))


def save_as_manifest(screen: Screen[Any], process: str) -> None:
    """Ask where, then write ``process``'s configuration there as a manifest."""
    app = screen.app

    async def save(path: Path) -> None:
        try:
            text = await room_of(screen).control.manifest_text(process)
        except ControlError as exc:
            app.notify(f"cannot save {process} as a manifest: {exc}", severity="error",
                       timeout=8)
            return
        try:
            write_text(path, text)
        except OSError as exc:
            app.notify(f"cannot write {path}: {exc.strerror or exc}", severity="error",
                       timeout=8)
            return
        notes = _variables(text)
        more = f"; set the {notes} variable(s) its head lists before loading it" if notes \
            else ""
        app.notify(f"{process} saved as {path}{more}", timeout=6)

    def chosen(value: str | None) -> None:
        if value is None:
            return
        path = Path(value.strip()).expanduser()
        if not path.exists():
            screen.run_worker(save(path), group="save-manifest", exclusive=True)
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                screen.run_worker(save(path), group="save-manifest", exclusive=True)

        app.push_screen(ConfirmDialog(f"Replace {path}?", "The file is overwritten with "
                                      f"{process}'s configuration.", "Replace"), confirmed)

    app.push_screen(AskDialog(f"Save {process} as a manifest", "file to write",
                              f"./{process}.agent", _check), chosen)
