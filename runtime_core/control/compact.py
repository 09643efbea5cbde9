"""The control plane's offline road for ``promptui journal compact``: retention applied to a
journal file now, from the command line's limits and the manifests' own settings.

The file is taken like a runtime takes it (refused while a runtime holds it: that runtime
applies its processes' retention itself, in the background), never through a server.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from runtime_core.journal.compact import CompactReport, compact
from runtime_core.journal.provider import JournalError
from runtime_core.journal.retention import (
    DEFAULT_CONVERSATION_RUNS,
    conversation_runs,
    policy_of,
)
from runtime_core.journal.retention_config import RetentionConfig
from runtime_core.journal.sqlite.lock import JournalLocked
from runtime_core.journal.sqlite.retention import RetentionPolicy
from runtime_core.manifest.loader import Manifest

__all__ = ["DEFAULT_CONVERSATION_RUNS", "CompactReport", "JournalError", "JournalLocked",
           "compact_journal", "default_policy"]


def default_policy(max_age: str | None, keep_runs: int | None) -> RetentionPolicy | None:
    """The command line's limits as a policy for every process no manifest sets one for
    (None when neither is given); a ValueError saying what is wrong with them. A restart's
    conversation is kept as the default context reads it (the newest 50 runs)."""
    if max_age is None and keep_runs is None:
        return None
    try:
        config = RetentionConfig.model_validate({"max_age": max_age, "keep_runs": keep_runs})
    except ValidationError as exc:
        said = "; ".join(f"--{'-'.join(str(p) for p in e['loc']).replace('_', '-')}: "
                         f"{str(e['msg']).removeprefix('Value error, ')}"
                         if e["loc"] else str(e["msg"]).removeprefix("Value error, ")
                         for e in exc.errors())
        raise ValueError(said) from None
    return policy_of(config, DEFAULT_CONVERSATION_RUNS)


def compact_journal(path: Path, default: RetentionPolicy | None,
                    manifests: Iterable[Manifest] = ()) -> CompactReport:
    """Compact the journal at ``path``: each manifest's process by its own ``journal.retention``
    (and conversation), every other process by ``default`` (None: kept whole)."""
    policies = {m.name: policy_of(m.config.journal.retention,
                                  conversation_runs(m.config.context))
                for m in manifests if m.config.journal.retention is not None}
    return compact(path, policies, default)
