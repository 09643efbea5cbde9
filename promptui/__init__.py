"""promptui: the terminal control room for runtime_core agent processes."""

__version__ = "0.1.0"
