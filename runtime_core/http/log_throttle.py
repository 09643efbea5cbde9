"""Repeated warnings and errors logged once per interval, with a count.

A server out of file descriptors has asyncio log ``socket.accept() out of system resource`` on
every accept attempt, thousands a second with a traceback each: 80 MB of log in 10 s. This
filter lets the first record of a kind through, holds back the same kind for ``interval``
seconds, then lets the next one through with "(N more in the last 10 s)" appended. A kind is
the logger, the level, the first line of the message template and the exception type, so
records that differ only in a file descriptor or an address count as one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["THROTTLED_LOGGERS", "RepeatFilter", "install_log_throttle"]

#: asyncio's accept errors and uvicorn's protocol warnings; our connection-limit lines from INFO.
THROTTLED_LOGGERS = {"asyncio": logging.WARNING, "uvicorn.error": logging.WARNING,
                     "runtime_core.http": logging.INFO}
DEFAULT_INTERVAL = 10.0
_MAX_KINDS = 512  # a flood of distinct messages must not grow the table without end

Kind = tuple[str, int, str, str]


@dataclass(slots=True)
class _Window:
    since: float  # when the record that opened this window went out
    held: int = 0


class RepeatFilter(logging.Filter):
    """Passes records below ``level`` untouched; of the rest, one per kind per ``interval``."""

    def __init__(self, interval: float = DEFAULT_INTERVAL, *, level: int = logging.WARNING,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval = interval
        self.level = level
        self._clock = clock
        self._windows: dict[Kind, _Window] = {}
        self._lock = threading.Lock()  # loggers are called from any thread

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < self.level:
            return True
        kind = _kind_of(record)
        now = self._clock()
        with self._lock:
            window = self._windows.get(kind)
            if window is not None and now - window.since < self.interval:
                window.held += 1
                return False
            if window is None and len(self._windows) >= _MAX_KINDS:
                self._forget_oldest()
            self._windows[kind] = _Window(now)
        if window is not None and window.held:
            # Format now, so the count is added to the text whatever the handler's format.
            record.msg = (f"{record.getMessage()} ({window.held} more in the last "
                          f"{now - window.since:.0f} s)")
            record.args = None
        return True

    def _forget_oldest(self) -> None:
        oldest = min(self._windows, key=lambda k: self._windows[k].since)
        del self._windows[oldest]


def _kind_of(record: logging.LogRecord) -> Kind:
    first_line = str(record.msg).split("\n", 1)[0]
    error = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
    return record.name, record.levelno, first_line, error


_FILTERS: dict[str, RepeatFilter] = {}


def install_log_throttle(loggers: Mapping[str, int] | None = None) -> None:
    """Put a throttle on each logger, from its level up (once: a logger keeps its filter)."""
    for name, level in (THROTTLED_LOGGERS if loggers is None else loggers).items():
        if name not in _FILTERS:
            _FILTERS[name] = RepeatFilter(level=level)
        logging.getLogger(name).addFilter(_FILTERS[name])
