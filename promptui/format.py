"""Text for people, in one place: clock times, dates, ages and durations, one-line previews. The
widgets, the screens and the CLI all write times through here, so a time reads the same in the
control room and in a terminal. Standard library only: the CLI imports it at start."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from typing import Any, Literal

TimeMode = Literal["iso", "relative"]
TIME_MODES: tuple[TimeMode, ...] = ("iso", "relative")
# Journal and view fields that hold a moment (epoch seconds): the pager prints them as times.
TIME_FIELDS = frozenset({
    "ts", "time", "timestamp", "at", "since", "created_at", "updated_at", "started_at",
    "finished_at", "opened_at", "closed_at", "last_seen", "first_seen", "last_run_at",
    "dead_lettered_at", "expires_at", "deadline", "heartbeat_at", "suspended_at",
    "acknowledged_at", "last_entry_at", "target_timestamp", "resolved_at", "queued_at",
    "received_at", "last_error_at", "last_attempt_at", "attempted_at", "failed_at",
})
_EPOCH_RANGE = (946_684_800.0, 4_102_444_800.0)  # 2000-01-01 .. 2100-01-01: a plausible moment


# -- clock times and dates (local time) --------------------------------------------------------
def clock(timestamp: float) -> str:
    """HH:MM:SS."""
    return time.strftime("%H:%M:%S", time.localtime(timestamp))


def clock_ms(timestamp: float) -> str:
    """HH:MM:SS.mmm, for journal lines."""
    return datetime.fromtimestamp(timestamp).strftime("%H:%M:%S.%f")[:-3]


def date_time(timestamp: float) -> str:
    """YYYY-MM-DD HH:MM:SS."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


def date_time_ms(timestamp: float) -> str:
    """YYYY-MM-DD HH:MM:SS.mmm, for journal lines."""
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def iso_short(text: str) -> str:
    """An ISO date-time as MM-DD HH:MM:SS in local time; the text itself when it is not one."""
    try:
        return datetime.fromisoformat(text).astimezone().strftime("%m-%d %H:%M:%S")
    except ValueError:
        return text


def log_time(created: float, msecs: float) -> str:
    """A log record's time: ISO 8601 with milliseconds and the UTC offset."""
    local = time.localtime(created)
    return (time.strftime("%Y-%m-%dT%H:%M:%S", local) + f".{int(msecs):03d}"
            + time.strftime("%z", local))


def parse_when(text: str, now: float) -> float | None:
    """HH:MM or HH:MM:SS today (yesterday when that is still to come), or an ISO date-time;
    None when it is neither."""
    text = text.strip()
    for fmt in ("%H:%M:%S", "%H:%M"):
        try:
            moment = datetime.strptime(text, fmt).time()
        except ValueError:
            continue
        today = datetime.fromtimestamp(now)
        when = datetime.combine(today.date(), moment)
        if when.timestamp() > now:
            when -= timedelta(days=1)
        return when.timestamp()
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


# -- one moment, as the operator asked to see times -------------------------------------------
def when(timestamp: float, mode: TimeMode, now: float, *, narrow: bool = False) -> str:
    """A moment as the room and the CLI show times: ``iso`` is the local date and time
    (``2026-12-06 22:14:03``; with ``narrow``, a moment of today is only ``22:14:03``), and
    ``relative`` is how far from ``now`` ("3 min ago", "in 2 s" for a deadline). ``narrow``
    (a table column, a log on a narrow terminal): today's moment is only ``22:14:03``, another
    day's ``12-05 22:14``, both at most 11 characters."""
    if mode == "relative":
        return relative(timestamp, now)
    if narrow:
        local = time.localtime(timestamp)
        today = local[:3] == time.localtime(now)[:3]
        return time.strftime("%H:%M:%S" if today else "%m-%d %H:%M", local)
    return date_time(timestamp)


def relative(timestamp: float, now: float) -> str:
    """How far ``timestamp`` is from ``now``: "now", "42 s ago", "3 min ago", "in 2 s"."""
    delta = now - timestamp
    size = abs(delta)
    if size < 1:
        return "now"
    if size < 60:
        amount = f"{int(size)} s"  # whole seconds gone by: 59.7 s is not yet "60 s"
    elif size < 3600:
        amount = f"{size // 60:.0f} min"
    elif size < 86400:
        amount = f"{size // 3600:.0f} h"
    else:
        amount = f"{size // 86400:.0f} d"
    return f"{amount} ago" if delta > 0 else f"in {amount}"


def when_text(text: str, mode: TimeMode, now: float, *, narrow: bool = False) -> str:
    """An ISO date-time (as views carry some times) shown like ``when``; the text itself
    when it is not one."""
    try:
        moment = datetime.fromisoformat(text).timestamp()
    except ValueError:
        return text
    return when(moment, mode, now, narrow=narrow)


def is_moment(key: str, value: Any) -> bool:
    """Whether ``key: value`` is a known time field holding epoch seconds."""
    return (key in TIME_FIELDS and isinstance(value, int | float) and not isinstance(value, bool)
            and _EPOCH_RANGE[0] <= value <= _EPOCH_RANGE[1])


def with_times(value: Any, mode: TimeMode, now: float) -> Any:
    """``value`` (dicts and lists, as JSON holds them) with every known time field that holds
    epoch seconds written as a time, the raw number kept after it in brackets for grep:
    ``"2026-12-06 22:14:03 [1796595243.1]"`` (relative: ``"3 min ago, 2026-12-06 ..."``)."""
    if isinstance(value, dict):
        shown: dict[Any, Any] = {}
        for key, item in value.items():
            if is_moment(str(key), item):
                stamp = date_time(item)
                if mode == "relative":
                    stamp = f"{relative(item, now)}, {stamp}"
                shown[key] = f"{stamp} [{item!r}]"
            else:
                shown[key] = with_times(item, mode, now)
        return shown
    if isinstance(value, list | tuple):
        return [with_times(item, mode, now) for item in value]
    return value


# -- ages and durations ----------------------------------------------------------------------
def age(seconds: float | None) -> str:
    """How long, in the largest whole unit: 42s, 5m, 3h, 9d ("-" when unknown)."""
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86400:.0f}d"


def ago(timestamp: float, now: float | None = None) -> str:
    """How long ago ``timestamp`` was: "5m ago"."""
    return f"{age((time.time() if now is None else now) - timestamp)} ago"


def iso_age(iso: str, now: float) -> str:
    """The age of an ISO date-time at ``now``; "?" when it is not one."""
    try:
        return age(now - datetime.fromisoformat(iso).timestamp())
    except ValueError:
        return "?"


def elapsed(seconds: float) -> str:
    """A short duration: 340ms, 2.5s."""
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:.1f}s"


# -- previews --------------------------------------------------------------------------------
def clip(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (newlines folded, an ellipsis when cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + "…"


def compact(value: Any) -> str:
    """JSON on one line, without spaces."""
    return json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))


def short(value: Any, limit: int = 40) -> str:
    """A value in at most ``limit`` characters: text as is, anything else as JSON; — for None."""
    if value is None:
        return "—"
    text = value if isinstance(value, str) else json.dumps(value, default=str,
                                                            ensure_ascii=False)
    return clip(text, limit)
