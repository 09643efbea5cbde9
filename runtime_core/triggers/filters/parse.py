"""Reading a filter expression: the limits, the parse, and 1-based line/column positions of what
the user wrote (for every error the compiler raises)."""

from __future__ import annotations

import ast
import re
import warnings
from typing import Final

MAX_LENGTH: Final = 2000
MAX_NODES: Final = 200


class FilterError(ValueError):
    """A filter_expression that cannot be compiled. ``line``/``column`` are 1-based."""

    def __init__(self, expression: str, reason: str, line: int, column: int) -> None:
        where = f"column {column}" if line == 1 else f"line {line} column {column}"
        super().__init__(f"filter_expression {where}: {reason}")
        self.expression = expression
        self.reason = reason
        self.line = line
        self.column = column


class Source:
    """Maps positions in the parsed text back to 1-based line/column of what the user wrote.

    Leading whitespace is stripped before parsing (``ast`` would call it an indent), and ``ast``
    reports columns in UTF-8 bytes, so both are undone here."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        normalized = expression.replace("\r\n", "\n").replace("\r", "\n")
        self.body = normalized.lstrip(" \t\f\n")
        prefix = normalized[: len(normalized) - len(self.body)]
        self._line_shift = prefix.count("\n")
        self._col_shift = len(prefix) - (prefix.rfind("\n") + 1)
        self.normalized = normalized
        self.lines = self.body.split("\n")

    def error(self, reason: str, line: int = 1, char_col: int = 0) -> FilterError:
        """``line``/``char_col`` are in the parsed body: line 1-based, column 0-based chars."""
        column = char_col + 1 + (self._col_shift if line == 1 else 0)
        return FilterError(self.expression, reason, line + self._line_shift, column)

    def error_at_index(self, reason: str, index: int) -> FilterError:
        """An error at a character index of the (newline-normalized) original text."""
        before = self.normalized[:index]
        line = before.count("\n") + 1
        column = index - (before.rfind("\n") + 1) + 1
        return FilterError(self.expression, reason, line, column)

    def char_col(self, line: int, byte_col: int) -> int:
        if not 1 <= line <= len(self.lines):
            return 0
        raw = self.lines[line - 1].encode("utf-8")[:byte_col]
        return len(raw.decode("utf-8", errors="ignore"))

    def node_error(self, node: ast.AST, reason: str) -> FilterError:
        line = getattr(node, "lineno", 1)
        return self.error(reason, line, self.char_col(line, getattr(node, "col_offset", 0)))

    def attribute_error(self, node: ast.Attribute, reason: str) -> FilterError:
        """Point at the attribute's name, which ends the node (``payload.keys``: ``keys``)."""
        line = node.end_lineno or node.lineno
        end = self.char_col(line, node.end_col_offset or 0)
        return self.error(reason, line, max(0, end - len(node.attr)))

    def between_error(self, left: ast.AST, right: ast.AST, token: str,
                      reason: str) -> FilterError:
        """Point at ``token`` (an operator, which has no position in the AST) between two
        operands; fall back to the left operand."""
        line = getattr(left, "end_lineno", None)
        end = getattr(left, "end_col_offset", None)
        if line is not None and end is not None and line == getattr(right, "lineno", None):
            start = self.char_col(line, end)
            stop = self.char_col(line, getattr(right, "col_offset", 0))
            segment = self.lines[line - 1][start:stop]
            found = re.search(r"\b" + re.escape(token) + r"\b" if token[0].isalpha()
                              else re.escape(token), segment)
            if found:
                return self.error(reason, line, start + found.start())
        return self.node_error(left, reason)


def parse(expression: str) -> tuple[Source, ast.Expression]:
    """Check the limits and parse ``expression``; FilterError saying what and where."""
    src = Source(expression)
    if len(expression) > MAX_LENGTH:
        raise src.error_at_index(
            f"too long ({len(expression)} characters; the limit is {MAX_LENGTH})",
            MAX_LENGTH)
    for index, char in enumerate(src.normalized):
        # Found here so the column is right: ast reports neither with a position.
        if char == "\0":
            raise src.error_at_index("invalid character (NUL)", index)
        if "\ud800" <= char <= "\udfff":
            raise src.error_at_index("invalid character (a lone surrogate)", index)
    if not src.body.strip():
        raise src.error_at_index("empty expression", 0)
    try:
        # The parser warns about things like invalid escapes; those are not ours to print.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(src.body, mode="eval")
    except SyntaxError as exc:
        raise _syntax_error(src, exc) from None
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        raise src.error(f"cannot be parsed ({type(exc).__name__}: {exc})") from None
    count = sum(1 for _ in ast.walk(tree))
    if count > MAX_NODES:
        raise src.error(f"too complex ({count} syntax nodes; the limit is {MAX_NODES})")
    return src, tree


def _syntax_error(src: Source, exc: SyntaxError) -> FilterError:
    line = exc.lineno or 1
    text = src.lines[line - 1] if 1 <= line <= len(src.lines) else ""
    offset = exc.offset
    # Python's offset is 1-based characters; 0/None (e.g. "payload ==") means "at the end".
    col = len(text) if offset is None or offset < 1 else min(offset - 1, len(text))
    message = exc.msg or "invalid syntax"
    reason = message if message.startswith("invalid syntax") else f"invalid syntax: {message}"
    return src.error(reason, line, col)
