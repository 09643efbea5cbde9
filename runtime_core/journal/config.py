"""JournalConfig: whether a process journals, how much, and where."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from runtime_core.journal.retention_config import RetentionConfig
from runtime_core.strict import StrictModel

#: The file a journal path that names a folder gets inside it.
JOURNAL_FILE_NAME = "journal.db"
#: Where a postgres journal's DSN comes from when the config gives none.
DSN_VARIABLE = "PROMPTUI_DSN"


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
    ``.promptise/journal``) holds it as ``journal.db``.

    ``backend="postgres"`` journals to the PostgreSQL database ``dsn`` names (the scale-out
    backend; ``path`` is not used), or ``$PROMPTUI_DSN`` when ``dsn`` is not given: read when
    the journal is made, so a DSN from the environment is never copied into a saved config."""

    level: Literal["none", "checkpoint", "full"] = Field(default="checkpoint", description=(
        "none: no journal; checkpoint: events, runs, their steps and state checkpoints, "
        "enough to recover, replay and rewind; full: also each event's payload, every step "
        "as its own entry and the prompts the model was shown (an audit trail)."))
    backend: Literal["sqlite", "memory", "postgres"] = Field(default="sqlite", description=(
        "sqlite (also written 'file'): a file on disk, the default; memory: lost when the "
        "program ends (tests); postgres: the scale-out database dsn names."))
    path: str = Field(default=".promptui/journal.db", description=(
        "sqlite: the journal file, relative to the folder the runtime runs in; a folder "
        "holds it as journal.db. Processes may share one file."))
    # Kept out of repr: it may hold a password.
    dsn: str | None = Field(default=None, repr=False, description=(
        "postgres: a libpq DSN, 'postgresql://user@host/db' or 'host=... dbname=...'; "
        "default: $PROMPTUI_DSN. Prefer a ${VAR} reference to a password in the file."))
    recover_on_start: bool | Literal["strict"] = Field(default=True, description=(
        "Take back at start what the journal holds for this process: its context state, "
        "conversation, counters and queued events. 'strict' is kept from earlier versions: "
        "the same as true, and it overrides on_damage."))
    on_damage: Literal["refuse", "start_fresh"] = Field(default="refuse", description=(
        "A damaged SQLite journal at start: refuse (the file stays untouched and the start "
        "fails, naming 'promptui journal salvage PATH') or start_fresh (the file is moved "
        "aside, never deleted, a fresh journal starts, and the room, status, /health and the "
        "log say what was left behind). Processes sharing a file start fresh only if all of "
        "them say so."))
    checkpoint_every: int = Field(default=50, ge=1, description=(
        "A checkpoint after this many runs (recovery reads the last checkpoint and what "
        "followed it: this bounds its cost)."))
    checkpoint_entries: int = Field(default=400, ge=1, description=(
        "A checkpoint once this many entries followed the last one."))
    retention: RetentionConfig | None = Field(default=None, description=(
        "How long finished runs' entries are kept, e.g. {max_age: 7d, keep_runs: 1000}; "
        "not set: everything is kept. SQLite only for now."))

    @field_validator("backend", mode="before")
    @classmethod
    def _file_is_sqlite(cls, value: Any) -> Any:
        return "sqlite" if value == "file" else value

    @field_validator("path")
    @classmethod
    def _folder_holds_the_file(cls, value: str) -> str:
        return journal_file(value)

    @model_validator(mode="after")
    def _postgres_needs_a_dsn(self) -> JournalConfig:
        if self.backend == "postgres" and not self.resolved_dsn():
            raise ValueError(f"the postgres journal backend needs a DSN: set journal.dsn "
                             f"(e.g. postgresql://user@host/db) or the {DSN_VARIABLE} "
                             "environment variable")
        return self

    @model_validator(mode="after")
    def _retention_is_sqlite_only(self) -> JournalConfig:
        if self.retention is not None and self.backend == "postgres":
            raise ValueError("retention is SQLite-only for now (a postgres journal keeps "
                             "everything): remove journal.retention, or use backend: sqlite")
        return self

    def resolved_dsn(self) -> str | None:
        """The DSN a postgres journal connects to: ``dsn``, else $PROMPTUI_DSN, else None."""
        return self.dsn or os.environ.get(DSN_VARIABLE) or None
