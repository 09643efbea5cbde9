"""The pager's text: a value as the text to read (pretty JSON, or a string as it is), cut into
screen rows at a width, and searched (a regex, or plain text when it is not a valid one).
Plain Python, no widgets: the pager view draws from it and the tests read it directly."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len, chop_cells

_WORD = re.compile(r"\s*\S+\s*|\s+")
MAX_MATCHES = 10_000  # enough to step through; a search never stalls the screen
TAB = "    "
# C0 controls but newline, and DEL: shown as their control pictures (one cell each), so an
# escape sequence in a payload cannot drive the terminal and offsets stay one per character.
_CONTROLS = {c: chr(0x2400 + c) for c in range(32) if c != 10}
_CONTROLS[127] = "\u2421"


def value_text(value: Any) -> str:
    """What the pager shows and ``y`` copies: a string as it is; anything else as JSON,
    indented by 2, keys in their order (a dataclass view as its fields)."""
    if isinstance(value, str):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def display_lines(text: str) -> list[str]:
    """The text's lines, safe to draw: tabs expanded, control characters made visible."""
    return [line.replace("\t", TAB).translate(_CONTROLS)
            for line in text.replace("\r\n", "\n").split("\n")]


@dataclass(frozen=True, slots=True)
class Row:
    """One screen row: characters ``start:end`` of line ``line``."""

    line: int
    start: int
    end: int


def wrap(lines: Sequence[str], width: int) -> list[Row]:
    """Cut each line into rows of at most ``width`` cells, between words where it can (a
    word wider than a row is cut where the row ends)."""
    width = max(1, width)
    rows: list[Row] = []
    for index, line in enumerate(lines):
        if len(line) <= width and cell_len(line) <= width:
            rows.append(Row(index, 0, len(line)))
            continue
        start, used = 0, 0  # the row being filled: where it starts, cells used
        for word in _WORD.finditer(line):
            at, text = word.start(), word.group()
            size = cell_len(text.rstrip())
            if used + size <= width:
                used += cell_len(text)
                continue
            if used:  # the word goes on the next row
                rows.append(Row(index, start, at))
                start, used = at, 0
            if size > width:  # too long for any row: cut it
                for piece in chop_cells(text, width)[:-1]:
                    rows.append(Row(index, start, start + len(piece)))
                    start += len(piece)
            used = cell_len(line[start:word.end()])
        rows.append(Row(index, start, len(line)))
    return rows


@dataclass(frozen=True, slots=True)
class Match:
    """Characters ``start:end`` of line ``line`` matched the search."""

    line: int
    start: int
    end: int


def compile_query(query: str) -> re.Pattern[str]:
    """A case-insensitive regex; text that is not a valid regex is searched as it is."""
    try:
        return re.compile(query, re.IGNORECASE)
    except re.error:
        return re.compile(re.escape(query), re.IGNORECASE)


def find(lines: Sequence[str], query: str) -> list[Match]:
    """Every match of ``query`` in ``lines``, in reading order (empty matches skipped)."""
    if not query:
        return []
    pattern = compile_query(query)
    found: list[Match] = []
    for index, line in enumerate(lines):
        for hit in pattern.finditer(line):
            if hit.end() > hit.start():
                found.append(Match(index, hit.start(), hit.end()))
                if len(found) >= MAX_MATCHES:
                    return found
    return found
