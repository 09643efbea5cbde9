"""JournalConfig: whether a process journals, how much, and where."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from runtime_core.strict import StrictModel


class JournalConfig(StrictModel):
    """Where and how much a process journals. A journal section journals at ``checkpoint``
    level unless it says otherwise (the spec's default); a process without one keeps no journal
    (ProcessConfig's default is ``level="none"``).

    ``backend="file"`` (the spec's name for the durable on-disk backend) means ``"sqlite"``,
    the on-disk journal here."""

    level: Literal["none", "checkpoint", "full"] = "checkpoint"
    backend: Literal["sqlite", "memory"] = "sqlite"
    path: str = ".promptui/journal.db"
    recover_on_start: bool | Literal["strict"] = True

    @field_validator("backend", mode="before")
    @classmethod
    def _file_is_sqlite(cls, value: Any) -> Any:
        return "sqlite" if value == "file" else value
