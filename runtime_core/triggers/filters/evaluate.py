"""The filter compiler: every node of a parsed expression checked against the whitelist and
turned into a small Python closure over a TriggerEvent. Nothing is handed to ``eval``; no
attribute of a Python object is ever read (``payload.a`` is a key lookup, ``s.lower()`` one of
five string methods run on a ``str`` only)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any, Final

from runtime_core.triggers.base import TriggerEvent
from runtime_core.triggers.filters.parse import Source
from runtime_core.triggers.filters.values import (
    COMPARE,
    FUNCTIONS,
    METHODS,
    lookup,
    make_set,
    method,
)

Eval = Callable[[TriggerEvent], Any]

#: The event fields a filter can name; any other bare name is a key of the payload.
NAMES: Final[tuple[str, ...]] = ("payload", "metadata", "trigger_type", "trigger_id", "event_id")
CONSTANT_NAMES: Final[dict[str, object]] = {
    "true": True, "false": False, "null": None, "True": True, "False": False, "None": None,
}

_OPERATOR_TEXT: Final[dict[type[ast.AST], str]] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^",
    ast.BitAnd: "&", ast.MatMult: "@", ast.USub: "-", ast.UAdd: "+", ast.Invert: "~",
    ast.Is: "is", ast.IsNot: "is not",
}

NOT_ALLOWED: Final[dict[type[ast.AST], str]] = {
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
    ast.Starred: "unpacking (*) is not allowed",
    ast.Await: "await is not allowed",
    ast.Yield: "yield is not allowed",
    ast.YieldFrom: "yield is not allowed",
}

_NAMES_HELP: Final = ", ".join(NAMES)
_FUNCTIONS_HELP: Final = ", ".join(FUNCTIONS)
_METHODS_HELP: Final = ", ".join(METHODS)


def _singleton(node: ast.AST) -> bool:
    """``None``/``null``, ``True``/``true``, ``False``/``false``: what ``is`` may compare with."""
    if isinstance(node, ast.Constant):
        return node.value is None or isinstance(node.value, bool)
    return isinstance(node, ast.Name) and node.id in CONSTANT_NAMES


class Compiler:
    def __init__(self, source: Source, *, root: str | None = None,
                 bare_names: bool = True) -> None:
        self.src = source
        # Mission checks read the context state as ``state``, completion rules a tool's
        # ``result``: one root name, carried in the event's payload.
        self.root = root
        # The reference dialect: ``action == 'opened'`` reads ``payload.action``.
        self.bare_names = bare_names and root is None
        self.payload_names: list[str] = []  # the bare names read from the payload, in order

    def compile(self, node: ast.AST) -> Eval:
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
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
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
        reason = NOT_ALLOWED.get(type(node), f"{type(node).__name__} is not allowed")
        raise self.src.node_error(node, reason)

    def _constant(self, node: ast.Constant) -> Eval:
        value = node.value
        if value is not None and not isinstance(value, str | int | float):
            kind = "'...' is" if value is Ellipsis else f"{type(value).__name__} literals are"
            raise self.src.node_error(node, f"{kind} not allowed")
        return lambda _event: value

    def _name(self, node: ast.Name) -> Eval:
        name = node.id
        if name in CONSTANT_NAMES:
            constant = CONSTANT_NAMES[name]
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
        if name.startswith("_"):
            raise self.src.node_error(
                node, f"'{name}' is not allowed (names starting with '_' are private)")
        if not self.bare_names:
            raise self.src.node_error(node, f"unknown name '{name}' (use {_NAMES_HELP})")
        if name not in self.payload_names:
            self.payload_names.append(name)
        return lambda event: lookup(event.payload, name)

    def _attribute(self, node: ast.Attribute) -> Eval:
        if node.attr.startswith("_"):
            raise self.src.attribute_error(
                node, f"'{node.attr}' is not allowed (names starting with '_' are private)")
        base = self.compile(node.value)
        key = node.attr
        return lambda event: lookup(base(event), key)

    def _subscript(self, node: ast.Subscript) -> Eval:
        if isinstance(node.slice, ast.Slice):
            raise self.src.node_error(node.slice, NOT_ALLOWED[ast.Slice])
        base = self.compile(node.value)
        index = self.compile(node.slice)
        return lambda event: lookup(base(event), index(event))

    def _sequence(self, node: ast.List | ast.Tuple | ast.Set) -> Eval:
        items = [self.compile(item) for item in node.elts]
        if isinstance(node, ast.Tuple):
            return lambda event: tuple(item(event) for item in items)
        if isinstance(node, ast.Set):
            return lambda event: make_set([item(event) for item in items])
        return lambda event: [item(event) for item in items]

    def _compare(self, node: ast.Compare) -> Eval:
        left = self.compile(node.left)
        steps: list[tuple[Callable[[Any, Any], Any], Eval]] = []
        previous: ast.AST = node.left
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            token = _OPERATOR_TEXT.get(type(op), "?")
            if isinstance(op, ast.Is | ast.IsNot) and not (
                    _singleton(previous) or _singleton(comparator)):
                raise self.src.between_error(
                    previous, comparator, token.split()[0],
                    f"'{token}' only compares with None, True or False (null, true, false); "
                    "use == or != to compare values")
            steps.append((COMPARE[type(op)], self.compile(comparator)))
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

    def _boolop(self, node: ast.BoolOp) -> Eval:
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

    def _unary(self, node: ast.UnaryOp) -> Eval:
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

    def _arguments(self, node: ast.Call, label: str, fewest: int, most: int) -> list[Eval]:
        if node.keywords:
            raise self.src.node_error(node.keywords[0], "keyword arguments are not allowed")
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                raise self.src.node_error(arg, NOT_ALLOWED[ast.Starred])
        if not fewest <= len(node.args) <= most:
            wanted = str(fewest) if fewest == most else f"{fewest} or {most}"
            plural = "" if fewest == most == 1 else "s"
            raise self.src.node_error(
                node, f"{label} takes {wanted} argument{plural}, got {len(node.args)}")
        return [self.compile(arg) for arg in node.args]

    def _call(self, node: ast.Call) -> Eval:
        func = node.func
        if isinstance(func, ast.Attribute):
            return self._method_call(node, func)
        if not isinstance(func, ast.Name):
            raise self.src.node_error(
                node, "only functions and string methods can be called (len(x), "
                      "x.lower(), ...)")
        if func.id not in FUNCTIONS:
            raise self.src.node_error(
                func, f"unknown function '{func.id}' (use {_FUNCTIONS_HELP})")
        fewest, most, implementation = FUNCTIONS[func.id]
        args = self._arguments(node, f"{func.id}()", fewest, most)
        return lambda event: implementation(*(arg(event) for arg in args))

    def _method_call(self, node: ast.Call, func: ast.Attribute) -> Eval:
        name = func.attr
        if name.startswith("_"):
            raise self.src.attribute_error(
                func, f"'{name}' is not allowed (names starting with '_' are private)")
        if name not in METHODS:
            raise self.src.attribute_error(
                func, f"method '{name}' is not allowed (string methods: {_METHODS_HELP}; "
                      f"functions: {_FUNCTIONS_HELP})")
        fewest, most, _ = METHODS[name]
        target = self.compile(func.value)
        args = self._arguments(node, f".{name}()", fewest, most)
        call = method(name)
        return lambda event: call(target(event), *(arg(event) for arg in args))
