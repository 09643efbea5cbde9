"""What a rewind will do, as plain data: shown to the operator before anything changes."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class RewindMode(str, Enum):
    BOTH = "both"  # context state and conversation
    CONVERSATION_ONLY = "conversation_only"
    CODE_ONLY = "code_only"  # context state only
    SUMMARIZE = "summarize"  # keep everything, add a summary message of the skipped interval
    CANCEL = "cancel"  # preview only


NOT_ROLLED_BACK = ("Not rolled back: outside effects of tool calls, long-term memory, budget "
                   "counters, the mission and secrets.")


@dataclass(frozen=True, slots=True)
class ContextChange:
    key: str
    kind: str  # "changed", "added" (appears again), "removed" (goes away)
    before: Any  # the value now (absent: None)
    after: Any  # the value after the rewind (absent: None)


@dataclass(frozen=True, slots=True)
class OutsideEffect:
    """A write tool call after the target: it happened in the world and stays done."""

    entry_id: str
    run_id: str
    tool: str
    args: dict[str, Any]
    result: str  # "" when its outcome was never recorded
    timestamp: float


@dataclass(frozen=True, slots=True)
class RewindPlan:
    process: str
    target_entry_id: str
    target_seq: int
    target_type: str
    target_timestamp: float
    mode: RewindMode
    entries_total: int
    entries_affected: int  # the target and everything after it
    conversation_affected: int
    state_affected: int
    other_affected: int
    context_changes: tuple[ContextChange, ...] = ()
    messages_dropped: int = 0
    dropped_preview: tuple[str, ...] = ()  # first line of each dropped message (up to 20)
    outside_effects: tuple[OutsideEffect, ...] = ()
    not_rolled_back: str = NOT_ROLLED_BACK
    summary: str = ""

    @property
    def irreversible(self) -> bool:
        """True when writes to the outside world happened after the target."""
        return bool(self.outside_effects)


@dataclass(frozen=True, slots=True)
class RewindResult:
    plan: RewindPlan
    rewind_entry_id: str  # "" for mode cancel (nothing applied)
    applied_at: float
    context_state: dict[str, Any] = field(default_factory=dict)
    conversation: tuple[dict[str, Any], ...] = ()
