"""JournalConfig: whether a process journals, how much, and where."""

from __future__ import annotations

from typing import Literal

from runtime_core.strict import StrictModel


class JournalConfig(StrictModel):
    """Where and how much a process journals. ``none`` (the default) keeps no journal."""

    level: Literal["none", "checkpoint", "full"] = "none"
    backend: Literal["sqlite", "memory"] = "sqlite"
    path: str = ".promptui/journal.db"
    recover_on_start: bool | Literal["strict"] = True
