"""``promptui ui``: the control room over an embedded runtime; ``promptui attach``: the same room
on a runtime that ``promptui serve`` runs elsewhere (or here, in the background). Quitting
detaches; the server's processes keep running."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from promptui.cli.options import (
    PATHS_ARGUMENT,
    RUNTIME_JOURNAL_OPTION,
    URL_ENV,
    TargetError,
    err,
    fail,
    find_server,
    load_or_exit,
)

if TYPE_CHECKING:
    from promptui.app import ControlRoom
    from promptui.settings import Settings
    from runtime_core.control.plane import ControlPlane
    from runtime_core.runtime import AgentRuntime

# The room's own options, the same for 'ui' and 'attach'.
THEME_OPTION = typer.Option(None, "--theme", help="Theme name (t cycles them).")
NO_MOUSE_OPTION = typer.Option(False, "--no-mouse", help="Leave the mouse to the terminal "
                               "(native text selection).")
REFRESH_OPTION = typer.Option(None, "--refresh", min=1, max=30, metavar="HZ",
                              help="UI refresh rate in Hz (default 10).")
LOW_BANDWIDTH_OPTION = typer.Option(False, "--low-bandwidth", help="For SSH: a 3 Hz pump, no "
                                    "animations, a 256-colour-safe theme.")


def ui(
    paths: list[Path] = PATHS_ARGUMENT,
    journal: Path | None = RUNTIME_JOURNAL_OPTION,
    theme: str | None = THEME_OPTION,
    read_only: bool | None = typer.Option(None, "--read-only/--read-write",
                                          help="Watch only: every mutating action is off."),
    no_mouse: bool = NO_MOUSE_OPTION,
    refresh: float | None = REFRESH_OPTION,
    low_bandwidth: bool = LOW_BANDWIDTH_OPTION,
) -> None:
    """Open the control room on manifests (or the bundled demo)."""
    settings = _settings()
    low = low_bandwidth or settings.low_bandwidth
    runtime = load_or_exit(paths, journal=journal)
    from runtime_core.control.local import LocalControl

    name = "demo" if not paths else ", ".join(p.name for p in paths)[:24]
    control = LocalControl(runtime, name=name,
                           read_only=settings.read_only if read_only is None else read_only)
    room = open_room(control, theme=theme, no_mouse=no_mouse, refresh=refresh,
                     low_bandwidth=low, runtime=runtime)
    err.print(room_closing_line(room.kept))


def room_closing_line(kept: dict[str, dict[str, int]] | None) -> str:
    """What ``promptui ui`` (and ``demo``'s room) say once the room has stopped the runtime:
    how many queued events the journal keeps for the next start, and the dead letters."""
    if kept is None:
        return ("The runtime did not stop cleanly (see .promptui/promptui.log); the next start "
                "takes back what the journal holds.")
    queued = sum(c["pending"] for c in kept.values())
    dead = sum(c["dead_letters"] for c in kept.values())
    return (f"Stopped cleanly. {queued} queued event(s) kept in the journal for the next "
            f"start; {dead} dead letter(s) kept for redelivery.")


def attach(
    url: str | None = typer.Argument(None, help=f"The server, e.g. http://127.0.0.1:8765 "
                                     f"(default: {URL_ENV}, or the server running here)."),
    token: str | None = typer.Option(None, "--token", help="The bearer token (default: "
                                     "PROMPTUI_TOKEN, or the token file of the server here)."),
    theme: str | None = THEME_OPTION,
    read_only: bool = typer.Option(False, "--read-only", help="Watch only: every mutating "
                                   "action is off in this room."),
    no_mouse: bool = NO_MOUSE_OPTION,
    refresh: float | None = REFRESH_OPTION,
    low_bandwidth: bool = LOW_BANDWIDTH_OPTION,
) -> None:
    """Open the control room on a served runtime (promptui serve)."""
    import asyncio

    from runtime_core.control.plane import ControlError
    from runtime_core.control.remote import RemoteControl

    try:
        target = find_server(url, token)
    except TargetError as exc:
        raise fail(str(exc)) from None
    if target is None:
        raise fail(f"no server to attach to: give its URL, set {URL_ENV}, or start one here "
                   "with 'promptui serve'")
    try:
        control = RemoteControl(target.url, token=target.token, read_only=read_only)
    except ValueError as exc:
        raise fail(str(exc)) from None
    try:  # fail before the screen opens when the server is not there or refuses the token
        asyncio.run(_check(target.url, target.token))
    except ControlError as exc:
        raise fail(str(exc), 1) from None
    open_room(control, theme=theme, no_mouse=no_mouse, refresh=refresh,
              low_bandwidth=low_bandwidth)
    err.print(f"Detached from {target.url}; its processes keep running.")


async def _check(url: str, token: str) -> None:
    from runtime_core.control.remote import RemoteControl

    probe = RemoteControl(url, token=token)
    try:
        await probe.runtime_info()
    finally:
        await probe.close()


def _settings() -> Settings:
    from promptui.settings import SettingsError, load_settings

    try:
        return load_settings()
    except SettingsError as exc:
        raise fail(str(exc)) from None


def open_room(control: ControlPlane, *, theme: str | None, no_mouse: bool,
              refresh: float | None, low_bandwidth: bool,
              runtime: AgentRuntime | None = None) -> ControlRoom:
    """Run the control room on ``control`` (embedded or attached) until the operator quits;
    returns the closed room (its ``kept`` counts, embedded). ``runtime`` (embedded): the
    secrets its processes hold are hidden from the log file."""
    from promptui.cli.keymap import keymap_warnings
    from promptui.settings import config_path, user_themes_dir
    from promptui.themes import LOW_BANDWIDTH_THEME, load_themes

    settings = _settings()
    for warning in keymap_warnings(settings.keymap, config_path()):
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    low = low_bandwidth or settings.low_bandwidth
    if low:
        os.environ.setdefault("TEXTUAL_FPS", "10")  # read when the app starts drawing
        os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    themes, theme_warnings = load_themes(user_themes_dir())
    for warning in theme_warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    chosen = theme or (LOW_BANDWIDTH_THEME if low else settings.theme)
    if chosen not in {t.name for t in themes} and chosen not in _builtin_theme_names():
        raise fail(f"unknown theme {chosen!r}; choose one of: "
                   + ", ".join(t.name for t in themes))
    from promptui.app import ControlRoom, tune_gc

    # The runtime's log lines would scribble over the screen: keep them in a file.
    log_dir = Path(".promptui")
    log_dir.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=log_dir / "promptui.log", level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if runtime is not None:  # a tool may log a secret: not in this file
        from runtime_core.log_redaction import redact_handler

        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.FileHandler):
                redact_handler(handler, lambda: runtime.processes.values())
    app = ControlRoom(control, themes=themes, theme=chosen,
                      refresh_hz=refresh or settings.refresh_hz, low_bandwidth=low,
                      keymap=settings.keymap, time_format=settings.time_format,
                      settings_path=config_path(), bell=settings.bell)
    tune_gc()
    app.run(mouse=not no_mouse and settings.mouse)  # quitting closes the control plane
    return app


def _builtin_theme_names() -> set[str]:
    from textual.theme import BUILTIN_THEMES

    return set(BUILTIN_THEMES)
