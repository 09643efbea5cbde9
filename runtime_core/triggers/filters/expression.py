"""``filter_expression``: a tiny, safe condition language deciding whether an event runs.

The text is parsed with :mod:`ast` (mode ``"eval"``) and every node is checked against a
whitelist, then turned into a tree of small Python closures (``parse`` reads and locates,
``evaluate`` compiles, ``values`` evaluates). Nothing is ever handed to
``eval``/``exec``/``compile``, no attribute of a Python object is ever read (``payload.a`` is a
*key* lookup), and anything outside the language is refused when the config loads, with the
line/column of the offending part.

Language (the reference runtime's dialect, and more)::

    names        payload, metadata, trigger_type, trigger_id, event_id,
                 true/false/null (and True/False/None);
                 any other name is a payload key: action == 'opened' reads payload.action
    lookups      payload.a.b   payload["k"]   payload.items[0]      (missing -> null)
    literals     "text", 12, -3.5, [1, 2], (1, 2), {1, 2}
    comparisons  == != < <= > >= in, not in, is None, is not None (chains: 1 < x <= 5)
    logic        and, or, not, parentheses
    functions    len(x), str(x), int(x), float(x), bool(x), lower(s), upper(s),
                 startswith(s, p), endswith(s, p), contains(c, x)
    methods      s.lower(), s.upper(), s.strip(), s.startswith(p), s.endswith(p)  (strings)

An error while evaluating (``"a" < 1``, ``len(null)``, ``int("x")``...) means "no match";
``matches`` (and calling the filter) never raises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from runtime_core.triggers.base import TriggerEvent
from runtime_core.triggers.filters.evaluate import NAMES, Compiler, Eval
from runtime_core.triggers.filters.parse import MAX_LENGTH, MAX_NODES, FilterError, parse
from runtime_core.triggers.filters.values import FUNCTIONS, METHODS

__all__ = ["FUNCTIONS", "MAX_LENGTH", "MAX_NODES", "METHODS", "NAMES", "EventFilter",
           "FilterError", "FilterExpressionError", "compile_filter", "compile_state_check"]

log = logging.getLogger(__name__)

#: The reference runtime's name for the error.
FilterExpressionError = FilterError


class EventFilter:
    """A compiled filter_expression. ``matches(event)`` (or calling it) is safe on any event."""

    def __init__(self, expression: str, evaluate: Eval,
                 payload_names: tuple[str, ...] = ()) -> None:
        self.expression = expression
        self._evaluate = evaluate
        #: Bare names read as payload keys (``action`` in ``action == 'opened'``).
        self.payload_names = payload_names
        self.error_count = 0
        self.last_error: str | None = None

    def matches(self, event: TriggerEvent) -> bool:
        try:
            return bool(self._evaluate(event))
        except Exception as exc:  # a type mismatch in event data is "no match", never a crash
            self._count_error(exc, "no match")
            return False

    def __call__(self, event: TriggerEvent) -> bool:
        return self.matches(event)

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


def compile_filter(expression: str | Callable[[TriggerEvent], Any], *,
                   over_state: bool = False, root: str | None = None,
                   bare_names: bool = True) -> EventFilter:
    """Check and compile ``expression``; raises :class:`FilterError` saying what and where.

    A callable (``lambda event: ...``) is wrapped as it is: an exception it raises is "no
    match". ``bare_names=False`` refuses names other than the event's fields (incident
    fingerprints, where a typo should not silently read a payload key)."""
    if callable(expression):
        function = expression
        name = getattr(function, "__qualname__", type(function).__name__)
        return EventFilter(f"<callable {name}>", function)
    src, tree = parse(expression)
    root = "state" if over_state else root
    compiler = Compiler(src, root=root, bare_names=bare_names)
    evaluate = compiler.compile(tree)
    return EventFilter(expression, evaluate, tuple(compiler.payload_names))
