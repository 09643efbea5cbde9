"""``python -m promptui.cli``: the same as the ``promptui`` command."""

from promptui.cli.main import main

main()
