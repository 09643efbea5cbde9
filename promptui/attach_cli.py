"""``promptui attach``: the control room on a runtime that ``promptui serve`` runs elsewhere
(or here, in the background). Quitting detaches; the server's processes keep running."""

from __future__ import annotations

import asyncio

import typer
from rich.console import Console
from rich.markup import escape

from promptui.server_target import URL_ENV, TargetError, find_server
from promptui.ui_cli import LOW_BANDWIDTH_OPTION, NO_MOUSE_OPTION, REFRESH_OPTION, THEME_OPTION

err = Console(stderr=True, soft_wrap=True, highlight=False)


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
    from promptui.ui_cli import open_room  # the room and Textual load only when it opens
    from runtime_core.api.client import RemoteControl
    from runtime_core.control import ControlError

    try:
        target = find_server(url, token)
    except TargetError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    if target is None:
        err.print(f"[red]error:[/red] no server to attach to: give its URL, set {URL_ENV}, "
                  "or start one here with 'promptui serve'")
        raise typer.Exit(2)
    try:
        control = RemoteControl(target.url, token=target.token, read_only=read_only)
    except ValueError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    try:  # fail before the screen opens when the server is not there or refuses the token
        asyncio.run(_check(target.url, target.token))
    except ControlError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None
    open_room(control, theme=theme, no_mouse=no_mouse, refresh=refresh,
              low_bandwidth=low_bandwidth)
    err.print(f"Detached from {target.url}; its processes keep running.")


async def _check(url: str, token: str) -> None:
    from runtime_core.api.client import RemoteControl

    probe = RemoteControl(url, token=token)
    try:
        await probe.runtime_info()
    finally:
        await probe.close()
