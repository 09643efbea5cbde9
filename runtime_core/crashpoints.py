"""Named crash points for the SIGKILL tests.

``PROMPTUI_CRASH_AT=<point>:<n>`` kills the process with SIGKILL the n-th time it reaches
``<point>``. Unset (always, outside the crash tests) a check costs one comparison.
"""

from __future__ import annotations

import os
import signal

POINTS = ("event_acknowledged", "tool_intent", "tool_result", "run_end", "group_commit",
          "model_turn", "run_end_submitted", "tool_returned")

_spec = os.environ.get("PROMPTUI_CRASH_AT")
_target: str | None = None
_remaining = 0
if _spec:
    name, _, count = _spec.partition(":")
    if name not in POINTS:
        raise ValueError(f"PROMPTUI_CRASH_AT names unknown point {name!r}; use one of {POINTS}")
    _target, _remaining = name, int(count or "1")


def armed(point: str) -> bool:
    return _target == point


def reached(point: str) -> None:
    """Count a pass through ``point`` and die here if it is the chosen one."""
    global _remaining
    if _target != point:
        return
    _remaining -= 1
    if _remaining <= 0:
        os.kill(os.getpid(), signal.SIGKILL)
