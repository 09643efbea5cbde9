"""The reference runtime's checkpoint state in our checkpoint's shape, and the small conversions
an import needs (times, the conversation a run added).

A reference checkpoint (``<process>.checkpoint.json``; in the JSONL file, a ``checkpoint``
entry whose data wraps it as ``{"state": ...}``, see ``checkpoint_body``) holds
``context_state, lifecycle_state, invocation_count, conversation`` and, when enabled,
``budget`` (``BudgetState.to_dict()``: ``daily_tool_calls, daily_runs, daily_cost,
last_daily_reset, run_*``) and ``mission`` (``MissionTracker.to_dict()``: ``state,
invocation_count, started_at_elapsed, evaluations``). The conversation is not kept in
our checkpoints: it travels with the runs (each run's end carries the messages it added)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

#: Reference checkpoint keys carried over (translated); the others are reported as dropped.
CARRIED = ("context_state", "lifecycle_state", "invocation_count", "conversation", "budget",
           "mission")
MISSION_STATES = {"active": "active", "completed": "completed", "failed": "failed",
                  "paused": "paused", "pending": "active", "in_progress": "active"}
LIFECYCLE_STATES = ("created", "starting", "running", "suspended", "stopping", "stopped",
                    "failed", "awaiting")


def parse_time(value: Any) -> float | None:
    """Seconds since the epoch from an ISO 8601 string (naive = UTC) or a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
        return number if math.isfinite(number) and 0 <= number < 1e11 else None
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        number = moment.timestamp()
    except (ValueError, OverflowError, OSError):
        return None
    return number if 0 <= number < 1e11 else None


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def budget_state(saved: dict[str, Any], at: float) -> dict[str, Any]:
    """Our Budget's saved form from the reference's BudgetState (today's counters carry over
    only if they are today's, as with our own checkpoints)."""
    if isinstance(saved.get("daily"), dict):  # already our shape
        return dict(saved)
    reset = parse_time(saved.get("last_daily_reset")) or at
    return {"day": datetime.fromtimestamp(reset, UTC).date().isoformat(),
            "daily": {"runs": _number(saved.get("daily_runs")),
                      "tool_calls": _number(saved.get("daily_tool_calls")),
                      "cost": _number(saved.get("daily_cost")),
                      "irreversible": 0.0},
            "warned": []}


def mission_state(saved: dict[str, Any], at: float) -> dict[str, Any]:
    """Our Mission's saved form from the reference's MissionTracker.to_dict()."""
    if "invocations" in saved and "started" in saved:  # already our shape
        return dict(saved)
    elapsed = _number(saved.get("started_at_elapsed"))
    evaluations = []
    for item in saved.get("evaluations") or []:
        if not isinstance(item, dict):
            continue
        evaluations.append({
            "achieved": bool(item.get("achieved")),
            "confidence": min(1.0, max(0.0, _number(item.get("confidence")))),
            "reasoning": str(item.get("reasoning") or ""),
            "progress_summary": str(item.get("progress_summary") or ""),
            "source": "programmatic" if item.get("source") == "programmatic" else "model",
            "invocation": int(_number(item.get("invocation_number")))})
    return {"state": MISSION_STATES.get(str(saved.get("state")), "active"),
            "invocations": int(_number(saved.get("invocation_count"))),
            "started": at - elapsed, "reason": str(saved.get("reason") or ""),
            "evaluations": evaluations}


def checkpoint_body(data: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint state a reference ``checkpoint`` entry's data holds. promptise's
    FileJournal writes it wrapped, ``{"state": {...}}`` (1.10.1); a state written bare (by
    hand, or by an older writer) is taken as it is."""
    inner = data.get("state")
    if isinstance(inner, dict) and not any(key in data for key in CARRIED):
        return inner
    return data


def checkpoint_state(saved: dict[str, Any], at: float) -> tuple[dict[str, Any], list[str]]:
    """Our checkpoint data from a reference checkpoint's, and what could not be carried
    (key names, or a note on a value of the wrong shape)."""
    dropped = sorted(str(k) for k in saved if k not in CARRIED)
    context = saved.get("context_state")
    if context is None:
        context = {}
    elif not isinstance(context, dict):
        dropped.append("context_state (not an object: kept empty)")
        context = {}
    state: dict[str, Any] = {"context_state": dict(context)}
    lifecycle = saved.get("lifecycle_state")
    state["lifecycle_state"] = lifecycle if lifecycle in LIFECYCLE_STATES else "running"
    state["invocation_count"] = max(0, int(_number(saved.get("invocation_count"))))
    for key, convert in (("budget", budget_state), ("mission", mission_state)):
        part = saved.get(key)
        if isinstance(part, dict):
            state[key] = convert(part, at)
        elif part is not None:
            dropped.append(f"{key} (not an object)")
    return state, dropped


def conversation_of(saved: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The conversation a reference checkpoint holds (messages with a role), or None."""
    messages = saved.get("conversation")
    if not isinstance(messages, list):
        return None
    return [m for m in messages if isinstance(m, dict) and isinstance(m.get("role"), str)]


def added_messages(before: list[dict[str, Any]], after: list[dict[str, Any]]
                   ) -> list[dict[str, Any]]:
    """The messages ``after`` added to ``before``. The reference's buffer keeps the newest N,
    so ``after`` may have lost some of ``before``'s oldest: the longest end of ``before``
    that ``after`` starts with is what the two share."""
    for drop in range(len(before) + 1):
        kept = before[drop:]
        if after[: len(kept)] == kept:
            return after[len(kept):]
    return list(after)
