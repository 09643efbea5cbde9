"""``promptui ui``: the control room over an embedded runtime."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from promptui.headless import load_or_exit

if TYPE_CHECKING:
    from promptui.settings import Settings
    from runtime_core.control import ControlPlane

err = Console(stderr=True, soft_wrap=True, highlight=False)
# The room's own options, the same for 'ui' and 'attach'.
THEME_OPTION = typer.Option(None, "--theme", help="Theme name (t cycles them).")
NO_MOUSE_OPTION = typer.Option(False, "--no-mouse", help="Leave the mouse to the terminal "
                               "(native text selection).")
REFRESH_OPTION = typer.Option(None, "--refresh", min=1, max=30,
                              help="UI refresh rate in Hz (default 10).")
LOW_BANDWIDTH_OPTION = typer.Option(False, "--low-bandwidth", help="For SSH: a 3 Hz pump, no "
                                    "animations, a 256-colour-safe theme.")


def ui(
    paths: list[Path] = typer.Argument(None, help="Manifest files or folders of .agent files "
                                       "(default: the bundled demo)."),
    journal: Path | None = typer.Option(None, "--journal", help="Journal file for every "
                                        "journaling process (default: .promptui/journal.db)."),
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
    runtime = load_or_exit(paths, err, journal=journal)
    from runtime_core.control import LocalControl

    name = "demo" if not paths else ", ".join(p.name for p in paths)[:24]
    control = LocalControl(runtime, name=name,
                           read_only=settings.read_only if read_only is None else read_only)
    open_room(control, theme=theme, no_mouse=no_mouse, refresh=refresh, low_bandwidth=low)
    err.print("Stopped cleanly; queued events and dead letters are kept in the journal.")


def _settings() -> Settings:
    from promptui.settings import SettingsError, load_settings

    try:
        return load_settings()
    except SettingsError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None


def open_room(control: ControlPlane, *, theme: str | None, no_mouse: bool,
              refresh: float | None, low_bandwidth: bool) -> None:
    """Run the control room on ``control`` (embedded or attached) until the operator quits."""
    from promptui.settings import user_themes_dir
    from promptui.themes import LOW_BANDWIDTH_THEME, load_themes

    settings = _settings()
    low = low_bandwidth or settings.low_bandwidth
    if low:
        os.environ.setdefault("TEXTUAL_FPS", "10")  # read when the app starts drawing
        os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    themes, theme_warnings = load_themes(user_themes_dir())
    for warning in theme_warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    chosen = theme or (LOW_BANDWIDTH_THEME if low else settings.theme)
    if chosen not in {t.name for t in themes} and chosen not in _builtin_theme_names():
        err.print(f"[red]error:[/red] unknown theme {chosen!r}; choose one of: "
                  + ", ".join(t.name for t in themes))
        raise typer.Exit(2)
    from promptui.app import ControlRoom, tune_gc

    # The runtime's log lines would scribble over the screen: keep them in a file.
    log_dir = Path(".promptui")
    log_dir.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=log_dir / "promptui.log", level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = ControlRoom(control, themes=themes, theme=chosen,
                      refresh_hz=refresh or settings.refresh_hz, low_bandwidth=low,
                      keymap=settings.keymap)
    tune_gc()
    app.run(mouse=not no_mouse and settings.mouse)  # quitting closes the control plane


def _builtin_theme_names() -> set[str]:
    from textual.theme import BUILTIN_THEMES

    return set(BUILTIN_THEMES)
