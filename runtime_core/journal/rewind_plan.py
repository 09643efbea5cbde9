"""What a rewind will do, as plain data: shown to the operator before anything changes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

#: A JSON-like value -> the same value with every secret in its texts hidden.
RedactValue = Callable[[Any], Any]


class RewindMode(str, Enum):
    """What a rewind rolls back to just before the chosen entry: ``both`` (context state and
    conversation), ``conversation_only``, ``code_only`` (the context state only),
    ``summarize`` (keeps everything and adds a summary message of the skipped interval) or
    ``cancel`` (a preview: nothing changes)."""

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
    """What rewinding a process to just before an entry would change, computed without changing
    anything: the entries affected, the context keys before and after, the conversation
    messages dropped (with a preview), and the writes to the outside world after the target,
    which stay done. ``not_rolled_back`` says what a rewind never touches."""

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
    """A rewind applied: its plan, the id of the ``rewind`` entry that records it (empty for
    ``cancel``), when, and the context state and conversation it restored."""

    plan: RewindPlan
    rewind_entry_id: str  # "" for mode cancel (nothing applied)
    applied_at: float
    context_state: dict[str, Any] = field(default_factory=dict)
    conversation: tuple[dict[str, Any], ...] = ()


def redacted_plan(plan: RewindPlan, redact: RedactValue) -> RewindPlan:
    """The plan with ``redact`` applied to every value it shows: the context before and after,
    the dropped messages' first lines, the outside effects' arguments and results."""
    return replace(
        plan,
        context_changes=tuple(replace(c, before=redact(c.before), after=redact(c.after))
                              for c in plan.context_changes),
        dropped_preview=tuple(redact(line) for line in plan.dropped_preview),
        outside_effects=tuple(replace(e, args=redact(e.args), result=redact(e.result))
                              for e in plan.outside_effects),
        summary=redact(plan.summary))


def redacted_result(result: RewindResult, redact: RedactValue) -> RewindResult:
    """The result with its plan, context and conversation redacted."""
    return replace(result, plan=redacted_plan(result.plan, redact),
                   context_state=redact(result.context_state),
                   conversation=tuple(redact(m) for m in result.conversation))
