"""Waiting for a condition with a timeout instead of sleeping: one async wait (``wait_for``,
and ``until`` for a Pilot-driven app) and one sync wait (``poll``). Each fails the test with a
message naming what it waited for."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # the runtime's tests need no Textual
    from textual.pilot import Pilot


async def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "", *,
                   interval: float = 0.002,
                   pause: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> Any:
    """``predicate()``'s first truthy value (awaited when it is awaitable), letting the loop run
    ``pause(interval)`` between tries; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what or predicate}")
        await pause(interval)


async def until(pilot: Pilot[Any], predicate: Callable[[], Any], timeout: float = 10.0,
                what: str = "") -> Any:
    """``wait_for`` in a Pilot-driven app: the app runs (``pilot.pause``) between tries."""
    return await wait_for(predicate, timeout, what, interval=0.02, pause=pilot.pause)


def poll(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "", *,
         interval: float = 0.02) -> Any:
    """``predicate()``'s first truthy value, sleeping ``interval`` between tries; fail the test
    after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


async def settle(rounds: int = 20) -> None:
    """Let already-scheduled callbacks and tasks run (no wall-clock waiting)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
