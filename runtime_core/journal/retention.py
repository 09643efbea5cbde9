"""A process's retention setting, handed to its journal.

A process that sets ``journal.retention`` registers it with its journal when it starts
(``retain``); the SQLite journal then removes, in the background, what that setting lets go
of that process's entries (``sqlite.retention`` says what goes and what never does). Processes
sharing one file each keep their own setting; one without a setting keeps everything. Other
backends keep everything (PostgreSQL refuses the setting: ``JournalConfig``).
"""

from __future__ import annotations

from runtime_core.context import ContextConfig
from runtime_core.journal.provider import JournalProvider
from runtime_core.journal.retention_config import RetentionConfig
from runtime_core.journal.sqlite.journal import SQLiteJournal
from runtime_core.journal.sqlite.retention import RetentionPolicy

#: What a restart's conversation reads back with the default context (100 messages: the
#: newest 50 runs' ends), for a compaction that knows no process config.
DEFAULT_CONVERSATION_RUNS = (ContextConfig().conversation_max_messages + 1) // 2


def conversation_runs(context: ContextConfig) -> int:
    """How many of the newest finished runs a restart's conversation reads (replay reads the
    newest ``(max + 1) // 2`` run ends and keeps the last ``max`` messages)."""
    if not context.conversation_history or context.conversation_max_messages == 0:
        return 0
    return (context.conversation_max_messages + 1) // 2


def policy_of(config: RetentionConfig, conversation: int) -> RetentionPolicy:
    """The journal's form of a retention setting, with the runs the conversation needs."""
    return RetentionPolicy(max_age=config.max_age, keep_runs=config.keep_runs,
                           conversation_runs=conversation, every=config.every)


def retain(journal: JournalProvider, process: str, config: RetentionConfig | None,
           context: ContextConfig) -> None:
    """Apply ``config`` to ``process``'s entries in ``journal`` (None: keep everything)."""
    if isinstance(journal, SQLiteJournal):
        journal.retain(process, None if config is None
                       else policy_of(config, conversation_runs(context)))
