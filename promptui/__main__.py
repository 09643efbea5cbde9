"""``python -m promptui``: the same as the ``promptui`` command."""

from __future__ import annotations

from promptui.cli.main import main

if __name__ == "__main__":
    main()
