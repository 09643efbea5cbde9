"""The webhook paths a process of this Python process will serve, whether or not it serves them
now, so a shared server answers 503 with Retry-After for them, never 404.

A webhook server on a fixed port is shared by every trigger on it (server.py) and starts with
the first of them: while a runtime starts its processes one by one, stops them, or restarts one,
the server listens while some paths have no trigger yet, or none any more. A sender that takes
404 for "this URL is wrong" drops the event; 503 says "try again". So a process's triggers
declare their webhook paths when the process is made (TriggerSet, for the life of the process
object) and withdraw one only when its trigger is removed; a path nobody declared is still 404.

Only the standard library: the process declares its paths at construction, before any web
server code is imported. Declarations are weak: a process object that is gone (removed from
its runtime and dropped) declares nothing.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime_core.triggers.config import TriggerConfig

__all__ = ["expect", "expected", "withdraw"]

_Where = tuple[str, int, str]  # host, port, path as configured

_EXPECTED: dict[_Where, weakref.WeakSet[Any]] = {}


def _where(config: TriggerConfig) -> _Where | None:
    """A webhook config's (host, port, path); None for another type or port 0 (a server of
    its own: nothing shares it)."""
    if config.type != "webhook" or not config.webhook_port:
        return None
    return config.webhook_host, config.webhook_port, config.webhook_path


def expect(owner: object, config: TriggerConfig) -> None:
    """``owner`` (a process's trigger set) will serve ``config``'s webhook path: until it is
    withdrawn or ``owner`` is gone, a server on its address answers 503 there, not 404."""
    where = _where(config)
    if where is not None:
        _EXPECTED.setdefault(where, weakref.WeakSet()).add(owner)


def withdraw(owner: object, config: TriggerConfig) -> None:
    """``owner`` no longer serves ``config``'s webhook path (its trigger was removed)."""
    where = _where(config)
    if where is None or where not in _EXPECTED:
        return
    owners = _EXPECTED[where]
    owners.discard(owner)
    if not owners:
        del _EXPECTED[where]


def expected(host: str, port: int, path: str) -> bool:
    """Whether a live process here declared ``path`` on ``host:port``."""
    owners = _EXPECTED.get((host, port, path))
    return bool(owners)
