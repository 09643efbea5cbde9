"""A tick that cuts a lost lease's calls before they take another step.

A node paused past its leases (SIGSTOP, a debugger, a frozen VM) must not let a tool call in
flight finish a write when it runs again: another node has taken the process over and parked
that run for an operator. The node's round notices only when its own task gets its turn, and
by then a tool's timer or socket, come due during the pause, may already have woken it.

So every node of an event loop is looked at by one timer, every TICK_S: a timer's callback runs
in the order of the times it was due, ahead of the tasks that timers due later wake, and ahead
of the tasks woken by the sockets read in the same pass (they resume only in the next one). A
tool waiting on anything due more than TICK_S after the pause began is cut before it runs on.
The look is a few comparisons per lease held (ClusterNode.check_deadlines).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

__all__ = ["TICK_S", "Watched", "unwatch", "watch"]

TICK_S = 0.1


class Watched(Protocol):
    def check_deadlines(self) -> None: ...


_watching: dict[asyncio.AbstractEventLoop, list[Watched]] = {}


def _tick(loop: asyncio.AbstractEventLoop) -> None:
    nodes = _watching.get(loop)
    if not nodes:
        return  # the last node left: the tick ends
    for node in list(nodes):
        node.check_deadlines()
    loop.call_later(TICK_S, _tick, loop)


def watch(node: Watched) -> None:
    """Call ``node.check_deadlines()`` every TICK_S from now on (from its running loop)."""
    loop = asyncio.get_running_loop()
    nodes = _watching.setdefault(loop, [])
    if not nodes:
        loop.call_later(TICK_S, _tick, loop)
    nodes.append(node)


def unwatch(node: Watched) -> None:
    """Stop looking at ``node``; the tick ends once no node of its loop is watched."""
    for loop, nodes in list(_watching.items()):
        if node in nodes:
            nodes.remove(node)
        if not nodes:
            del _watching[loop]
