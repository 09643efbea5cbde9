"""JournalConfig: whether a process journals, how much, and where."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import field_validator

from runtime_core.strict import StrictModel

#: The file a journal path that names a folder gets inside it.
JOURNAL_FILE_NAME = "journal.db"


def journal_file(path: str) -> str:
    """``path`` as the journal file: a folder (one that exists, or a path without a suffix, as
    the reference runtime's ``.promptise/journal``) gets ``journal.db`` inside it."""
    if not path or path == ":memory:":
        return path
    where = Path(path)
    if where.is_dir() or (where.suffix == "" and not where.exists()):
        return str(where / JOURNAL_FILE_NAME)
    return path


class JournalConfig(StrictModel):
    """Where and how much a process journals. A journal section journals at ``checkpoint``
    level unless it says otherwise (the spec's default); a process without one keeps no journal
    (ProcessConfig's default is ``level="none"``).

    ``backend="file"`` (the spec's name for the durable on-disk backend) means ``"sqlite"``,
    the on-disk journal here; a ``path`` that names a folder (the reference's
    ``.promptise/journal``) holds it as ``journal.db``."""

    level: Literal["none", "checkpoint", "full"] = "checkpoint"
    backend: Literal["sqlite", "memory"] = "sqlite"
    path: str = ".promptui/journal.db"
    recover_on_start: bool | Literal["strict"] = True

    @field_validator("backend", mode="before")
    @classmethod
    def _file_is_sqlite(cls, value: Any) -> Any:
        return "sqlite" if value == "file" else value

    @field_validator("path")
    @classmethod
    def _folder_holds_the_file(cls, value: str) -> str:
        return journal_file(value)
