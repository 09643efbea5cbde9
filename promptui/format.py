"""Text for people, in one place: clock times, dates, ages and durations, one-line previews. The
widgets, the screens and the CLI all write times through here, so a time reads the same in the
control room and in a terminal. Standard library only: the CLI imports it at start."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from typing import Any


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
