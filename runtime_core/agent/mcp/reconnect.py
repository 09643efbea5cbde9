"""How an MCP link comes back: the backoff between reconnection attempts, and the link's status
as the Config tab shows it (``connected``, ``reconnecting (attempt N, next in S s)``,
``down: reason``).

The first attempt after a loss is immediate (a server that restarted is usually back, and a lost
HTTP session only needs a new one); then 0.5 s, doubling up to 30 s, each jittered so that many
processes do not knock on a recovering server at the same instant.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Any

FIRST_DELAY = 0.5
MAX_DELAY = 30.0
JITTER = 0.2  # each delay is drawn within +-20 %


@dataclass(frozen=True, slots=True)
class Backoff:
    first: float = FIRST_DELAY
    cap: float = MAX_DELAY
    jitter: float = JITTER

    def delay(self, attempt: int, rand: random.Random | None = None) -> float:
        """Seconds to wait before reconnection attempt ``attempt`` (1 is immediate)."""
        if attempt <= 1:
            return 0.0
        base = min(self.cap, self.first * float(2 ** min(attempt - 2, 32)))
        spread = float((rand or random).uniform(1 - self.jitter, 1 + self.jitter))
        return min(self.cap, base * spread)


@dataclass(frozen=True, slots=True)
class LinkStatus:
    """``state``: connecting (the first time), connected, reconnecting or down. ``next_at`` is
    the monotonic time of the next attempt while one waits (None while one is under way)."""

    state: str = "down"
    attempt: int = 0
    next_at: float | None = None
    reason: str = "not connected yet"

    def text(self, now: float | None = None) -> str:
        if self.state == "reconnecting":
            if self.next_at is None:
                return f"reconnecting (attempt {self.attempt}, connecting now)"
            left = max(0, math.ceil(self.next_at - (time.monotonic() if now is None else now)))
            return f"reconnecting (attempt {self.attempt}, next in {left} s)"
        if self.state == "down":
            return f"down: {self.reason}"
        return self.state

    def row(self, now: float | None = None) -> dict[str, Any]:
        """For a status row: the text, and the last error while the link is not up."""
        row: dict[str, Any] = {"link": self.text(now)}
        if self.state == "reconnecting":
            row["link_attempt"] = self.attempt
            row["link_error"] = self.reason
        return row


CONNECTING = LinkStatus("connecting", reason="")
CONNECTED = LinkStatus("connected", reason="")
CLOSED = LinkStatus("down", reason="closed (the process is not running)")


def reconnecting(attempt: int, delay: float, reason: str) -> LinkStatus:
    return LinkStatus("reconnecting", attempt, time.monotonic() + delay if delay > 0 else None,
                      reason)
