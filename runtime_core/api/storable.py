"""What a request body may carry. Python's JSON parser accepts more than the journal can keep:
a lone UTF-16 surrogate (``"\\ud800"``) cannot be encoded as UTF-8, so a journal write with it
fails (and fails the journal); ``NaN`` and ``Infinity`` are not JSON at all; an integer beyond
64 bits overflows SQLite and Python's sizes. Such a body is refused with 422 before any route
runs its command."""

from __future__ import annotations

import math
from typing import Any

MAX_INT = 2**63 - 1
MIN_INT = -(2**63)


def problem(value: Any, where: str = "") -> str | None:
    """Why ``value`` (parsed JSON) cannot be stored, naming the dotted path; None when it can."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        shown = path or "(body)"
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return (f"{shown}: the text holds a lone UTF-16 surrogate (\\ud800-\\udfff), "
                        "which is not valid Unicode; send UTF-8 text")
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not MIN_INT <= item <= MAX_INT:
                return f"{shown}: the integer is outside the 64-bit range (±2**63)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{shown}: NaN and Infinity are not JSON numbers"
        elif isinstance(item, dict):
            for key, inner in item.items():
                name = _printable(str(key))
                stack.append((key, f"{path}.{name}" if path else name))
                stack.append((inner, f"{path}.{name}" if path else name))
        elif isinstance(item, list | tuple):
            stack.extend((inner, f"{path}[{index}]") for index, inner in enumerate(item))
    return None


def _printable(text: str) -> str:
    """``text`` safe to put in an answer: a lone surrogate is shown as its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def checked(value: Any) -> Any:
    """``value`` itself, or ValueError saying what cannot be stored (a pydantic validator)."""
    found = problem(value)
    if found is not None:
        raise ValueError(found)
    return value
