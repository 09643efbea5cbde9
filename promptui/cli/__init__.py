"""The ``promptui`` command (``promptui.cli:main``): ``main.py`` builds the typer app from one
module per command group; ``options.py`` holds what they share."""

from promptui.cli.main import app, main

__all__ = ["app", "main"]
