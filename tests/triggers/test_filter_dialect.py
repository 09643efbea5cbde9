"""The reference runtime's filter dialect: bare payload names, ``is None``, chained comparisons,
``len``/``int``/``float``/``str``/``bool``, string methods and ``in`` on strings, set literals;
``compile_filter()`` returns a callable. Still a whitelist interpreter."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_core.triggers.base import TriggerEvent
from runtime_core.triggers.filters.expression import (
    EventFilter,
    FilterExpressionError,
    compile_filter,
)

PR = {"action": "opened", "number": 7, "title": "  Fix: crash on start  ", "labels": ["bug"],
      "draft": None, "merged": False, "count": "42", "ratio": "0.75", "branch": "release/1.2",
      "event": "push", "payload": {"nested": 1}}


def event(payload: Any = None, **fields: Any) -> TriggerEvent:
    fields.setdefault("trigger_type", "webhook")
    return TriggerEvent("webhook-1", payload=PR if payload is None else payload, **fields)


# (expression, matching event, non-matching event)
DIALECT: list[tuple[str, TriggerEvent, TriggerEvent]] = [
    ("action == 'opened'", event(), event({"action": "closed"})),
    ("action == 'opened' and 'bug' in labels", event(), event({**PR, "labels": []})),
    ("number > 5 and payload.number < 10", event(), event({"number": 3})),
    ("draft is None", event(), event({"draft": True})),
    ("draft is null and merged is False", event(), event({**PR, "merged": True})),
    ("missing is None", event(), event({"missing": 0})),
    ("merged is not None", event(), event({"merged": None})),
    ("payload.merged is not True", event(), event({"merged": True})),
    ("1 < number <= 7", event(), event({"number": 8})),
    ("0 <= number < 10 != 11", event(), event({"number": 10})),
    ("len(labels) == 1 and len(title) > 3", event(), event({"labels": [], "title": "x"})),
    ("int(count) == 42 and int(number) == 7 and int(3.9) == 3", event(),
     event({"count": "41", "number": 7})),
    ("float(ratio) > 0.5 and float(number) == 7.0", event(), event({"ratio": "0.25"})),
    ("str(number) == '7' and str(merged) == 'False' and str(draft) == 'None'", event(),
     event({"number": 8})),
    ("bool(labels) and not bool(draft)", event(), event({"labels": []})),
    ("title.strip() == 'Fix: crash on start'", event(), event({"title": "other"})),
    ("title.strip(' F') == 'ix: crash on start'", event(), event({"title": "x"})),
    ("title.lower().strip().startswith('fix')", event(), event({"title": "Feat"})),
    ("action.upper() == 'OPENED' and title.lower() != title", event(),
     event({"action": "closed", "title": "t"})),
    ("branch.startswith('release/') and branch.endswith(('.2', '.3'))", event(),
     event({"branch": "release/1.4"})),
    ("branch.startswith(['main', 'release/'])", event(), event({"branch": "dev"})),
    ("'crash' in title and 'Crash' not in title", event(), event({"title": "Crash"})),
    ("action in {'opened', 'reopened'}", event(), event({"action": "closed"})),
    ("labels[0].upper() == 'BUG'", event(), event({"labels": ["x"]})),
    # the event's own names win over payload keys of the same name
    ("event_id == 'e-1' and trigger_type == 'webhook'", event(event_id="e-1"),
     event(event_id="e-2")),
    ("payload.event == 'push' and payload.payload.nested == 1", event(), event({"event": 1})),
]


@pytest.mark.parametrize(("expression", "yes", "no"), DIALECT,
                         ids=[case[0][:40] for case in DIALECT])
def test_the_reference_dialect(expression: str, yes: TriggerEvent, no: TriggerEvent) -> None:
    check = compile_filter(expression)
    assert check(yes) is True
    assert check(no) is False
    assert check.error_count == 0, check.last_error


@pytest.mark.parametrize("expression", [
    "title.lower() == 'x'",  # with title a number below
    "int(count) == 1",  # count not a number
    "float(count) > 1",
    "int(huge) > 0",  # a huge numeric string is refused, not parsed
    "str(labels) == '[]'",  # str of a list: not in the language's values
    "number.strip() == '7'",
    "action in {labels}",  # an unhashable member
    "int(ratio) == 0",  # "0.75" is not an integer
])
def test_type_mismatches_are_no_match(expression: str) -> None:
    check = compile_filter(expression)
    assert check(event({**PR, "title": 3, "count": "many", "number": 7, "huge": "1" * 65})) \
        is False
    assert check.error_count == 1


def test_bare_names_are_reported_so_validate_can_name_them() -> None:
    check = compile_filter("action == 'opened' and payload.x == 1 and 'bug' in labels and "
                           "action != 'closed' and trigger_type == 'webhook'")
    assert check.payload_names == ("action", "labels")


def test_compile_filter_returns_a_callable_and_takes_one() -> None:
    check = compile_filter("action == 'opened'")
    assert isinstance(check, EventFilter) and callable(check)
    wrapped = compile_filter(lambda e: e.payload["number"] > 5)
    assert wrapped(event()) is True
    assert wrapped(event({})) is False  # KeyError: no match
    assert wrapped.error_count == 1
    assert FilterExpressionError is type(_error("1 +"))


def _error(text: str) -> Exception:
    try:
        compile_filter(text)
    except FilterExpressionError as exc:
        return exc
    raise AssertionError("compiled")


# -- properties ------------------------------------------------------------------------------------
json_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=12) \
    | st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(st.integers(-20, 20), st.integers(-20, 20), st.integers(-20, 20))
def test_chained_comparisons_agree_with_python(low: int, n: int, high: int) -> None:
    check = compile_filter(f"{low} < n <= {high}")
    assert check(event({"n": n})) is (low < n <= high)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["action", "n", "x"]), json_scalars, max_size=3))
def test_a_bare_name_reads_the_payload_key(payload: dict[str, Any]) -> None:
    assert compile_filter("action == 'opened'")(event(payload)) is \
        (payload.get("action") == "opened")
    assert compile_filter("x is None")(event(payload)) is (payload.get("x") is None)
    assert compile_filter("x is not None")(event(payload)) is (payload.get("x") is not None)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20), st.text(max_size=4))
def test_string_methods_agree_with_python(text: str, part: str) -> None:
    payload = {"s": text, "p": part}
    expected = {
        "s.lower() == p": text.lower() == part,
        "s.upper() == p": text.upper() == part,
        "s.strip() == p": text.strip() == part,
        "s.strip(p) == ''": text.strip(part) == "",
        "s.startswith(p)": text.startswith(part),
        "s.endswith(p)": text.endswith(part),
        "p in s": part in text,
        "len(s) == len(p)": len(text) == len(part),
    }
    for expression, value in expected.items():
        assert compile_filter(expression)(event(payload)) is value, expression


@settings(max_examples=200, deadline=None)
@given(json_scalars)
def test_int_float_str_agree_with_python_or_mean_no_match(value: Any) -> None:
    for name, function in (("int", int), ("float", float), ("str", str)):
        try:
            python = function(value)
            expected = python == python  # NaN equals nothing
        except (ValueError, TypeError, OverflowError):
            expected = False
        assert compile_filter(f"{name}(v) == {name}(v)")(event({"v": value})) is expected, \
            (name, value)
