"""``promptui locate``: print where promptui keeps its config, themes and journal."""

from __future__ import annotations

import typer

TARGETS = ("config", "themes", "journal")


def locate(
    target: str = typer.Argument(..., help="What to locate: config, themes or journal."),
) -> None:
    """Print the path of the config file, the themes folders or the default journal."""
    # Plain echo, not Rich: paths must stay on one unwrapped line for use in scripts.
    from promptui.bundled import missing_message, themes_dir
    from promptui.settings import config_path, default_journal_path, user_themes_dir

    if target == "config":
        typer.echo(str(config_path()))
    elif target == "themes":
        typer.echo(str(user_themes_dir()))
        bundled = themes_dir()
        typer.echo(f"bundled: {bundled}")
        if not bundled.is_dir():
            typer.echo(f"warning: {missing_message('the bundled themes folder', bundled)}",
                       err=True)
    elif target == "journal":
        typer.echo(str(default_journal_path()))
    else:
        typer.echo(f"error: unknown target {target!r} (valid targets: {', '.join(TARGETS)})",
                   err=True)
        raise typer.Exit(2)
