"""``filter_expression``: a tiny, safe condition language deciding whether an event runs.

The text is parsed with :mod:`ast` (mode ``"eval"``) and every node is checked against a
whitelist, then turned into a tree of small Python closures. Nothing is ever handed to
``eval``/``exec``/``compile``, no attribute of a Python object is ever read (``payload.a`` is a
*key* lookup), and anything outside the language is refused when the config loads, with the
line/column of the offending part.

Language::

    names        payload, metadata, trigger_type, trigger_id, event_id,
                 true/false/null (and True/False/None)
    lookups      payload.a.b   payload["k"]   payload.items[0]      (missing -> null)
    literals     "text", 12, -3.5, [1, 2], (1, 2)
    comparisons  == != < <= > >= in, not in  (chains such as 1 < x < 5 work)
    logic        and, or, not, parentheses
    functions    len(x), lower(s), upper(s), startswith(s, p), endswith(s, p), contains(c, x)

An error while evaluating (``"a" < 1``, ``len(null)``, ...) means "no match"; ``matches`` never
raises.
"""

from __future__ import annotations

import ast
import logging
import operator
import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Final

from runtime_core.triggers.base import TriggerEvent

log = logging.getLogger(__name__)

MAX_LENGTH: Final = 2000
MAX_NODES: Final = 200

#: The event fields a filter can name.
NAMES: Final[tuple[str, ...]] = ("payload", "metadata", "trigger_type", "trigger_id", "event_id")
_CONSTANT_NAMES: Final[dict[str, object]] = {
    "true": True, "false": False, "null": None, "True": True, "False": False, "None": None,
}

_Eval = Callable[[TriggerEvent], Any]


class FilterError(ValueError):
    """A filter_expression that cannot be compiled. ``line``/``column`` are 1-based."""

    def __init__(self, expression: str, reason: str, line: int, column: int) -> None:
        where = f"column {column}" if line == 1 else f"line {line} column {column}"
        super().__init__(f"filter_expression {where}: {reason}")
        self.expression = expression
        self.reason = reason
        self.line = line
        self.column = column


class _EvalError(Exception):
    """A value of the wrong type reached a function or operator (means: no match)."""


# -- values ----------------------------------------------------------------------------------------
_CONTAINERS: Final = (str, list, tuple, set, frozenset, Mapping)


def _lookup(container: object, key: object) -> object:
    """``container[key]`` for event data, or None when it is missing or not indexable."""
    if isinstance(container, Mapping):
        try:
            return container.get(key)
        except Exception:  # unhashable key, odd Mapping: a lookup never raises
            return None
    if (isinstance(container, list | tuple | str) and isinstance(key, int)
            and not isinstance(key, bool) and -len(container) <= key < len(container)):
        return container[key]
    return None


def _contains(container: object, item: object) -> bool:
    # Only known container types: ``in`` on an arbitrary object could iterate forever.
    if isinstance(container, str):
        if not isinstance(item, str):
            raise _EvalError(f"'in <string>' needs a string, got {type(item).__name__}")
        return item in container
    if isinstance(container, _CONTAINERS):
        return item in container
    raise _EvalError(f"'in' needs a string, list or mapping, got {type(container).__name__}")


def _text(value: object, function: str) -> str:
    if not isinstance(value, str):
        raise _EvalError(f"{function}() needs a string, got {type(value).__name__}")
    return value


def _prefixes(value: object, function: str) -> str | tuple[str, ...]:
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return _text(value, function)


def _fn_len(value: object) -> int:
    if isinstance(value, _CONTAINERS):
        return len(value)
    raise _EvalError(f"len() needs a string, list or mapping, got {type(value).__name__}")


def _fn_lower(value: object) -> str:
    return _text(value, "lower").lower()


def _fn_upper(value: object) -> str:
    return _text(value, "upper").upper()


def _fn_startswith(value: object, prefix: object) -> bool:
    return _text(value, "startswith").startswith(_prefixes(prefix, "startswith"))


def _fn_endswith(value: object, suffix: object) -> bool:
    return _text(value, "endswith").endswith(_prefixes(suffix, "endswith"))


def _fn_contains(container: object, item: object) -> bool:
    return _contains(container, item)


#: name -> (number of arguments, implementation)
FUNCTIONS: Final[dict[str, tuple[int, Callable[..., object]]]] = {
    "len": (1, _fn_len),
    "lower": (1, _fn_lower),
    "upper": (1, _fn_upper),
    "startswith": (2, _fn_startswith),
    "endswith": (2, _fn_endswith),
    "contains": (2, _fn_contains),
}

_COMPARE: Final[dict[type[ast.cmpop], Callable[[Any, Any], Any]]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda left, right: _contains(right, left),
    ast.NotIn: lambda left, right: not _contains(right, left),
}

_OPERATOR_TEXT: Final[dict[type[ast.AST], str]] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^",
    ast.BitAnd: "&", ast.MatMult: "@", ast.USub: "-", ast.UAdd: "+", ast.Invert: "~",
    ast.Is: "is", ast.IsNot: "is not",
}

_NOT_ALLOWED: Final[dict[type[ast.AST], str]] = {
    ast.Lambda: "lambda is not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed",
    ast.JoinedStr: "f-strings are not allowed",
    ast.FormattedValue: "f-strings are not allowed",
    ast.NamedExpr: "assignment (:=) is not allowed",
    ast.IfExp: "conditional expressions ('x if c else y') are not allowed",
    ast.Slice: "slices are not allowed; use a single index such as [0]",
    ast.Dict: "dict literals are not allowed",
    ast.Set: "set literals are not allowed; use a list such as [1, 2]",
    ast.Starred: "unpacking (*) is not allowed",
    ast.Await: "await is not allowed",
    ast.Yield: "yield is not allowed",
    ast.YieldFrom: "yield is not allowed",
}

_NAMES_HELP: Final = ", ".join(NAMES)
_FUNCTIONS_HELP: Final = ", ".join(FUNCTIONS)


# -- source positions --------------------------------------------------------------------------
class _Source:
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


# -- compiler --------------------------------------------------------------------------------------
class _Compiler:
    def __init__(self, source: _Source, *, root: str | None = None) -> None:
        self.src = source
        # Mission checks read the context state as ``state``, completion rules a tool's
        # ``result``: one root name, carried in the event's payload.
        self.root = root

    def compile(self, node: ast.AST) -> _Eval:
        if isinstance(node, ast.Expression):
            return self.compile(node.body)
        if isinstance(node, ast.Constant):
            return self._constant(node)
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.Subscript):
            return self._subscript(node)
        if isinstance(node, ast.List | ast.Tuple):
            return self._sequence(node)
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.BoolOp):
            return self._boolop(node)
        if isinstance(node, ast.UnaryOp):
            return self._unary(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.BinOp):
            token = _OPERATOR_TEXT.get(type(node.op), "?")
            raise self.src.between_error(node.left, node.right, token,
                                         f"arithmetic ('{token}') is not allowed")
        reason = _NOT_ALLOWED.get(type(node), f"{type(node).__name__} is not allowed")
        raise self.src.node_error(node, reason)

    def _constant(self, node: ast.Constant) -> _Eval:
        value = node.value
        if value is not None and not isinstance(value, str | int | float):
            kind = "'...' is" if value is Ellipsis else f"{type(value).__name__} literals are"
            raise self.src.node_error(node, f"{kind} not allowed")
        return lambda _event: value

    def _name(self, node: ast.Name) -> _Eval:
        name = node.id
        if name in _CONSTANT_NAMES:
            constant = _CONSTANT_NAMES[name]
            return lambda _event: constant
        if self.root is not None:
            if name == self.root:
                return lambda event: event.payload
            example = "state.invoices_booked >= 10" if self.root == "state" else \
                f"{self.root}.status == 'success'"
            raise self.src.node_error(node, f"unknown name '{name}' (use {self.root}, e.g. "
                                            f"{example})")
        if name == "payload":
            return lambda event: event.payload
        if name == "metadata":
            return lambda event: event.metadata
        if name == "trigger_type":
            return lambda event: event.trigger_type
        if name == "trigger_id":
            return lambda event: event.trigger_id
        if name == "event_id":
            return lambda event: event.event_id
        if name in FUNCTIONS:
            raise self.src.node_error(
                node, f"'{name}' is a function: call it, e.g. {name}(payload.name)")
        raise self.src.node_error(node, f"unknown name '{name}' (use {_NAMES_HELP})")

    def _attribute(self, node: ast.Attribute) -> _Eval:
        if node.attr.startswith("_"):
            # Point at the attribute itself, which ends the node.
            line = node.end_lineno or node.lineno
            end = self.src.char_col(line, node.end_col_offset or 0)
            raise self.src.error(
                f"'{node.attr}' is not allowed (names starting with '_' are private)",
                line, max(0, end - len(node.attr)))
        base = self.compile(node.value)
        key = node.attr
        return lambda event: _lookup(base(event), key)

    def _subscript(self, node: ast.Subscript) -> _Eval:
        if isinstance(node.slice, ast.Slice):
            raise self.src.node_error(node.slice, _NOT_ALLOWED[ast.Slice])
        base = self.compile(node.value)
        index = self.compile(node.slice)
        return lambda event: _lookup(base(event), index(event))

    def _sequence(self, node: ast.List | ast.Tuple) -> _Eval:
        items = [self.compile(item) for item in node.elts]
        if isinstance(node, ast.Tuple):
            return lambda event: tuple(item(event) for item in items)
        return lambda event: [item(event) for item in items]

    def _compare(self, node: ast.Compare) -> _Eval:
        left = self.compile(node.left)
        steps: list[tuple[Callable[[Any, Any], Any], _Eval]] = []
        previous: ast.AST = node.left
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            compare = _COMPARE.get(type(op))
            if compare is None:
                token = _OPERATOR_TEXT.get(type(op), "?")
                raise self.src.between_error(previous, comparator, token.split()[0],
                                             f"'{token}' is not supported; use == or !=")
            steps.append((compare, self.compile(comparator)))
            previous = comparator

        def run(event: TriggerEvent) -> bool:
            current = left(event)
            for compare, operand in steps:  # a chain stops at the first false link
                following = operand(event)
                if not compare(current, following):
                    return False
                current = following
            return True

        return run

    def _boolop(self, node: ast.BoolOp) -> _Eval:
        values = [self.compile(value) for value in node.values]
        if isinstance(node.op, ast.And):
            def run_and(event: TriggerEvent) -> Any:
                result: Any = True
                for value in values:
                    result = value(event)
                    if not result:
                        return result
                return result

            return run_and

        def run_or(event: TriggerEvent) -> Any:
            result: Any = False
            for value in values:
                result = value(event)
                if result:
                    return result
            return result

        return run_or

    def _unary(self, node: ast.UnaryOp) -> _Eval:
        if isinstance(node.op, ast.Not):
            operand = self.compile(node.operand)
            return lambda event: not operand(event)
        inner = node.operand
        if (isinstance(node.op, ast.USub | ast.UAdd) and isinstance(inner, ast.Constant)
                and isinstance(inner.value, int | float) and not isinstance(inner.value, bool)):
            # A signed number literal (-3), not arithmetic.
            value = -inner.value if isinstance(node.op, ast.USub) else inner.value
            return lambda _event: value
        token = _OPERATOR_TEXT.get(type(node.op), "?")
        raise self.src.node_error(node, f"arithmetic ('{token}') is not allowed")

    def _call(self, node: ast.Call) -> _Eval:
        func = node.func
        if not isinstance(func, ast.Name):
            raise self.src.node_error(
                node, f"method calls are not allowed; use the functions {_FUNCTIONS_HELP}")
        if func.id not in FUNCTIONS:
            raise self.src.node_error(
                func, f"unknown function '{func.id}' (use {_FUNCTIONS_HELP})")
        if node.keywords:
            raise self.src.node_error(node.keywords[0], "keyword arguments are not allowed")
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                raise self.src.node_error(arg, _NOT_ALLOWED[ast.Starred])
        arity, implementation = FUNCTIONS[func.id]
        if len(node.args) != arity:
            plural = "" if arity == 1 else "s"
            raise self.src.node_error(
                node, f"{func.id}() takes {arity} argument{plural}, got {len(node.args)}")
        args = [self.compile(arg) for arg in node.args]
        return lambda event: implementation(*(arg(event) for arg in args))


# -- public API --------------------------------------------------------------------------------
class EventFilter:
    """A compiled filter_expression. ``matches`` is safe to call on any event."""

    def __init__(self, expression: str, evaluate: _Eval) -> None:
        self.expression = expression
        self._evaluate = evaluate
        self.error_count = 0
        self.last_error: str | None = None

    def matches(self, event: TriggerEvent) -> bool:
        try:
            return bool(self._evaluate(event))
        except Exception as exc:  # a type mismatch in event data is "no match", never a crash
            self._count_error(exc, "no match")
            return False

    def value(self, event: TriggerEvent) -> Any:
        """The expression's value for ``event`` rather than a yes/no (an incident fingerprint
        such as ``payload.labels.alertname``); None when it cannot be evaluated."""
        try:
            return self._evaluate(event)
        except Exception as exc:  # as in matches(): event data never crashes the caller
            self._count_error(exc, "null")
            return None

    def _count_error(self, exc: Exception, meaning: str) -> None:
        self.error_count += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        # Warn once per filter so a mismatched payload shape cannot flood the log.
        level = logging.WARNING if self.error_count == 1 else logging.DEBUG
        log.log(level, "filter_expression %r could not be evaluated (%s): %s",
                self.expression, meaning, self.last_error)

    def __repr__(self) -> str:
        return f"EventFilter({self.expression!r})"


def compile_state_check(expression: str) -> EventFilter:
    """The same language over a context state named ``state``; match with
    ``check.matches(TriggerEvent("state", "state", context_state))``."""
    return compile_filter(expression, over_state=True)


def compile_filter(expression: str, *, over_state: bool = False, root: str | None = None
                   ) -> EventFilter:
    """Check and compile ``expression``; raises :class:`FilterError` saying what and where."""
    src = _Source(expression)
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
    root = "state" if over_state else root
    return EventFilter(expression, _Compiler(src, root=root).compile(tree))


def _syntax_error(src: _Source, exc: SyntaxError) -> FilterError:
    line = exc.lineno or 1
    text = src.lines[line - 1] if 1 <= line <= len(src.lines) else ""
    offset = exc.offset
    # Python's offset is 1-based characters; 0/None (e.g. "payload ==") means "at the end".
    col = len(text) if offset is None or offset < 1 else min(offset - 1, len(text))
    message = exc.msg or "invalid syntax"
    reason = message if message.startswith("invalid syntax") else f"invalid syntax: {message}"
    return src.error(reason, line, col)
