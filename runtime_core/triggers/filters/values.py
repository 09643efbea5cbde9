"""What a filter expression can do to event data at evaluation time: lookups that never raise,
``in``, comparisons, the functions and the string methods. A value of the wrong type raises
``EvalError``, which the filter turns into "no match"."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any, Final

#: A numeric string longer than this is not converted (int() of a huge string is slow).
MAX_NUMBER_TEXT: Final = 64


class EvalError(Exception):
    """A value of the wrong type reached a function or operator (means: no match)."""


CONTAINERS: Final = (str, list, tuple, set, frozenset, Mapping)


def lookup(container: object, key: object) -> object:
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


def contains(container: object, item: object) -> bool:
    # Only known container types: ``in`` on an arbitrary object could iterate forever.
    if isinstance(container, str):
        if not isinstance(item, str):
            raise EvalError(f"'in <string>' needs a string, got {type(item).__name__}")
        return item in container
    if isinstance(container, set | frozenset):
        try:
            return item in container
        except TypeError:  # an unhashable item (a list) is in no set
            return False
    if isinstance(container, CONTAINERS):
        return item in container
    raise EvalError(f"'in' needs a string, list or mapping, got {type(container).__name__}")


def make_set(items: list[Any]) -> frozenset[Any]:
    try:
        return frozenset(items)
    except TypeError:
        raise EvalError("a set literal can only hold strings, numbers, true/false and null"
                        ) from None


def _text(value: object, function: str) -> str:
    if not isinstance(value, str):
        raise EvalError(f"{function}() needs a string, got {type(value).__name__}")
    return value


def _prefixes(value: object, function: str) -> str | tuple[str, ...]:
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return _text(value, function)


def _fn_len(value: object) -> int:
    if isinstance(value, CONTAINERS):
        return len(value)
    raise EvalError(f"len() needs a string, list or mapping, got {type(value).__name__}")


def _fn_lower(value: object) -> str:
    return _text(value, "lower").lower()


def _fn_upper(value: object) -> str:
    return _text(value, "upper").upper()


def _fn_strip(value: object, chars: object = None) -> str:
    if chars is not None:
        return _text(value, "strip").strip(_text(chars, "strip"))
    return _text(value, "strip").strip()


def _fn_startswith(value: object, prefix: object) -> bool:
    return _text(value, "startswith").startswith(_prefixes(prefix, "startswith"))


def _fn_endswith(value: object, suffix: object) -> bool:
    return _text(value, "endswith").endswith(_prefixes(suffix, "endswith"))


def _fn_contains(container: object, item: object) -> bool:
    return contains(container, item)


def _number_text(value: str, function: str) -> str:
    if len(value) > MAX_NUMBER_TEXT:
        raise EvalError(f"{function}() of a string longer than {MAX_NUMBER_TEXT} characters")
    return value


def _fn_int(value: object) -> int:
    if isinstance(value, bool | int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EvalError(f"int() of {value}")
        return int(value)
    if isinstance(value, str):
        try:
            return int(_number_text(value, "int"))
        except ValueError:
            raise EvalError(f"int() of {value[:40]!r}: not an integer") from None
    raise EvalError(f"int() needs a number or a string, got {type(value).__name__}")


def _fn_float(value: object) -> float:
    if isinstance(value, bool | int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(_number_text(value, "float"))
        except ValueError:
            raise EvalError(f"float() of {value[:40]!r}: not a number") from None
    raise EvalError(f"float() needs a number or a string, got {type(value).__name__}")


def _fn_str(value: object) -> str:
    if value is None or isinstance(value, str | int | float | bool):
        return str(value)
    raise EvalError(f"str() needs a string, number, true/false or null, got "
                    f"{type(value).__name__}")


def _fn_bool(value: object) -> bool:
    return bool(value)


#: name -> (fewest and most arguments, implementation)
FUNCTIONS: Final[dict[str, tuple[int, int, Callable[..., object]]]] = {
    "len": (1, 1, _fn_len),
    "lower": (1, 1, _fn_lower),
    "upper": (1, 1, _fn_upper),
    "startswith": (2, 2, _fn_startswith),
    "endswith": (2, 2, _fn_endswith),
    "contains": (2, 2, _fn_contains),
    "str": (1, 1, _fn_str),
    "int": (1, 1, _fn_int),
    "float": (1, 1, _fn_float),
    "bool": (1, 1, _fn_bool),
}

#: String methods: ``payload.title.lower()``. name -> (fewest and most arguments, after the
#: string itself, and the implementation taking the string first).
METHODS: Final[dict[str, tuple[int, int, Callable[..., object]]]] = {
    "lower": (0, 0, _fn_lower),
    "upper": (0, 0, _fn_upper),
    "strip": (0, 1, _fn_strip),
    "startswith": (1, 1, _fn_startswith),
    "endswith": (1, 1, _fn_endswith),
}


def method(name: str) -> Callable[..., object]:
    implementation = METHODS[name][2]

    def call(target: object, *args: object) -> object:
        if not isinstance(target, str):
            raise EvalError(f".{name}() needs a string, got {type(target).__name__}")
        return implementation(target, *args)

    return call


def _is(left: object, right: object) -> bool:
    return left is right


def _is_not(left: object, right: object) -> bool:
    return left is not right


COMPARE: Final[dict[type[ast.cmpop], Callable[[Any, Any], Any]]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda left, right: contains(right, left),
    ast.NotIn: lambda left, right: not contains(right, left),
    ast.Is: _is,  # only against null, true or false (checked when compiling)
    ast.IsNot: _is_not,
}
