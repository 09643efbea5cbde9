"""Small Markdown writers the reference pages share: tables, cells, code spans."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

GENERATED = ("<!-- Generated from the code by docs/gen/{module}.py when the site is built: "
             "edit the code, not this page. -->\n")


def banner(module: str) -> str:
    """The comment every generated page opens with, naming its generator."""
    return GENERATED.format(module=module)


def cell(text: object) -> str:
    """``text`` fit for one table cell: one line; outside code spans, pipes escaped (a code
    span keeps its own) and angle brackets shown as written."""
    flat = " ".join(str(text).split())
    return _outside_code(flat, lambda piece: piece.replace("|", "\\|").replace(
        "<", "&lt;").replace(">", "&gt;"))


def code(text: object) -> str:
    """``text`` as an inline code span (a backtick inside it lengthens the fence)."""
    value = str(text)
    if not value:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"  # a table leaves a pipe in a code span alone


def prose(text: str) -> str:
    """Help or docstring text as Markdown: paragraphs kept, lines inside one joined, and a
    bare ``<word>`` (a placeholder, not HTML) shown as written."""
    paragraphs = [" ".join(part.split()) for part in re.split(r"\n\s*\n", text.strip())]
    return "\n\n".join(_escape_angles(p) for p in paragraphs if p)


def _escape_angles(text: str) -> str:
    return _outside_code(text, lambda piece: piece.replace("<", "&lt;").replace(">", "&gt;"))


def _outside_code(text: str, change: Callable[[str], str]) -> str:
    """``change`` applied to the parts of ``text`` outside its code spans (shown literally)."""
    pieces = re.split(r"(`+[^`]*`+)", text)
    return "".join(piece if piece.startswith("`") else change(piece) for piece in pieces)


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table; the cells are written as given (use ``cell`` or ``code`` first)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def anchor(text: str) -> str:
    """The id MkDocs' toc extension gives a heading ``text`` (for links within a page)."""
    slug = re.sub(r"[^\w\s-]", "", text.lower()).strip()
    return re.sub(r"[\s]+", "-", slug)
