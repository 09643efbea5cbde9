"""The form an MCP server's question (``elicitation/create``) asks for, and the checks on an
answer to it.

The MCP spec restricts ``requestedSchema`` to a flat object whose properties are strings
(optionally with a ``format``, a length range or an ``enum`` / ``oneOf`` of choices), numbers,
integers, booleans, or arrays of choices (a multi-select). ``form_fields`` reads such a schema
into fields a screen or a prompt can show; ``check_content`` checks an accepted answer against
it; ``parse_value`` turns what an operator typed into the field's type. Pure functions: the
control room and the CLI use them (through the control plane) to validate before sending, the
runtime checks again before anything reaches the server.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal

Kind = Literal["string", "number", "integer", "boolean", "enum", "multi"]
ACTIONS = ("accept", "decline", "cancel")
MAX_FIELDS = 100
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
TRUE_WORDS = frozenset({"true", "yes", "y", "1", "on"})
FALSE_WORDS = frozenset({"false", "no", "n", "0", "off"})


class FormError(ValueError):
    """An answer that does not fit the form: ``problems`` maps each field to what is wrong
    (the key ``""`` for the answer as a whole)."""

    def __init__(self, problems: dict[str, str]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{name}: {why}" if name else why
                                   for name, why in problems.items()))


@dataclass(frozen=True, slots=True)
class FormField:
    name: str
    kind: Kind
    title: str
    description: str = ""
    required: bool = False
    choices: tuple[tuple[str, str], ...] = ()  # (value, label) for enum and multi
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    format: str = ""  # email, uri, date, date-time

    @property
    def label(self) -> str:
        return self.title or self.name

    def hint(self) -> str:
        """A few words on what the field takes (for a prompt or a placeholder)."""
        if self.kind in ("enum", "multi"):
            values = ", ".join(value for value, _ in self.choices)
            return f"one of {values}" if self.kind == "enum" else f"any of {values}, by commas"
        if self.kind == "boolean":
            return "yes or no"
        parts = [self.format or self.kind]
        if self.minimum is not None or self.maximum is not None:
            low = "" if self.minimum is None else f"{self.minimum:g}"
            high = "" if self.maximum is None else f"{self.maximum:g}"
            parts.append(f"{low}..{high}")
        if self.min_length is not None or self.max_length is not None:
            parts.append(f"{self.min_length or 0}..{self.max_length or ''} chars")
        return ", ".join(parts)


def _choices(spec: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Choices from ``enum`` (with the legacy ``enumNames``), ``oneOf`` or ``anyOf``
    (``const`` + ``title``)."""
    if isinstance(spec.get("enum"), list):
        names = spec.get("enumNames")
        labels = names if isinstance(names, list) and len(names) == len(spec["enum"]) else None
        return tuple((str(v), str(labels[i]) if labels else str(v))
                     for i, v in enumerate(spec["enum"]))
    for key in ("oneOf", "anyOf"):
        options = spec.get(key)
        if isinstance(options, list) and all(isinstance(o, dict) and "const" in o
                                             for o in options):
            return tuple((str(o["const"]), str(o.get("title") or o["const"])) for o in options)
    return ()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _field(name: str, spec: Any, required: bool) -> FormField:
    if not isinstance(spec, Mapping):
        raise FormError({name: "the schema of this field is not an object"})
    kind = spec.get("type")
    title = str(spec.get("title") or "")
    description = str(spec.get("description") or "")
    common: dict[str, Any] = {"name": name, "title": title, "description": description,
                              "required": required, "default": spec.get("default")}
    if kind == "string":
        choices = _choices(spec)
        if choices:
            return FormField(kind="enum", choices=choices, **common)
        fmt = spec.get("format")
        return FormField(kind="string", format=str(fmt) if isinstance(fmt, str) else "",
                         min_length=spec.get("minLength") if isinstance(
                             spec.get("minLength"), int) else None,
                         max_length=spec.get("maxLength") if isinstance(
                             spec.get("maxLength"), int) else None, **common)
    if kind in ("number", "integer"):
        return FormField(kind=kind, minimum=_number(spec.get("minimum")),
                         maximum=_number(spec.get("maximum")), **common)
    if kind == "boolean":
        return FormField(kind="boolean", **common)
    if kind == "array" and isinstance(spec.get("items"), Mapping):
        choices = _choices(spec["items"])
        if choices:
            return FormField(kind="multi", choices=choices,
                             min_length=spec.get("minItems") if isinstance(
                                 spec.get("minItems"), int) else None,
                             max_length=spec.get("maxItems") if isinstance(
                                 spec.get("maxItems"), int) else None, **common)
    raise FormError({name: f"type {kind!r} is not one a form can ask for (string, number, "
                           "integer, boolean, or a list of choices)"})


def form_fields(schema: Mapping[str, Any]) -> list[FormField]:
    """The fields of a requested schema, in the server's order; FormError when the schema is
    not the flat object the MCP spec allows."""
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        raise FormError({"": "the requested schema is not an object"})
    properties = schema.get("properties") or {}
    if not isinstance(properties, Mapping) or len(properties) > MAX_FIELDS:
        raise FormError({"": f"the requested schema's properties are not an object of at "
                             f"most {MAX_FIELDS} fields"})
    required = schema.get("required") or []
    wanted = {str(r) for r in required} if isinstance(required, list) else set()
    return [_field(str(name), spec, str(name) in wanted) for name, spec in properties.items()]


def _check_string(f: FormField, value: Any) -> str | None:
    if not isinstance(value, str):
        return "expected text"
    if f.min_length is not None and len(value) < f.min_length:
        return f"at least {f.min_length} characters"
    if f.max_length is not None and len(value) > f.max_length:
        return f"at most {f.max_length} characters"
    if f.format == "email" and not EMAIL.match(value):
        return "not an email address"
    if f.format == "uri" and not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$", value):
        return "not a URI (e.g. https://example.com)"
    try:
        if f.format == "date":
            date.fromisoformat(value)
        elif f.format == "date-time":
            datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return f"not a {f.format} (ISO 8601, e.g. 2026-01-31" + \
            ("T09:30:00Z)" if f.format == "date-time" else ")")
    return None


def _check_number(f: FormField, value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            isinstance(value, float) and not math.isfinite(value)):
        return "expected a number"
    if f.kind == "integer" and not float(value).is_integer():
        return "expected a whole number"
    if f.minimum is not None and value < f.minimum:
        return f"at least {f.minimum:g}"
    if f.maximum is not None and value > f.maximum:
        return f"at most {f.maximum:g}"
    return None


def field_problem(f: FormField, value: Any) -> str | None:
    """What is wrong with ``value`` for field ``f`` (None: nothing), as check_content says it."""
    if f.kind == "string":
        return _check_string(f, value)
    if f.kind in ("number", "integer"):
        return _check_number(f, value)
    if f.kind == "boolean":
        return None if isinstance(value, bool) else "expected true or false"
    allowed = [v for v, _ in f.choices]
    if f.kind == "enum":
        return None if value in allowed else f"one of {', '.join(allowed)}"
    if not isinstance(value, list) or any(v not in allowed for v in value):
        return f"a list of {', '.join(allowed)}"
    if f.min_length is not None and len(value) < f.min_length:
        return f"at least {f.min_length} choices"
    if f.max_length is not None and len(value) > f.max_length:
        return f"at most {f.max_length} choices"
    return None


def check_content(schema: Mapping[str, Any], content: Any) -> dict[str, Any]:
    """An accepted answer checked against the requested schema: every required field given,
    no field the schema does not name, each value of its field's type and range. Returns the
    content (integers of an integer field as ``int``); FormError naming each bad field."""
    fields = form_fields(schema)
    if not isinstance(content, Mapping):
        raise FormError({"": "accept needs the answer's values as an object"})
    problems: dict[str, str] = {}
    known = {f.name for f in fields}
    for name in content:
        if name not in known:
            problems[str(name)] = f"the form has no such field (fields: {', '.join(known)})"
    checked: dict[str, Any] = {}
    for f in fields:
        if f.name not in content or content[f.name] is None:
            if f.required:
                problems[f.name] = "required"
            continue
        value = content[f.name]
        why = field_problem(f, value)
        if why is not None:
            problems[f.name] = why
            continue
        checked[f.name] = int(value) if f.kind == "integer" else value
    if problems:
        raise FormError(problems)
    return checked


def parse_value(f: FormField, text: str) -> Any:
    """What an operator typed, as the field's type (``None`` for nothing typed); ValueError
    saying what the field takes. The result is checked by ``check_content`` afterwards."""
    text = text.strip()
    if not text:
        return None
    if f.kind == "boolean":
        word = text.lower()
        if word in TRUE_WORDS or word in FALSE_WORDS:
            return word in TRUE_WORDS
        raise ValueError("yes or no")
    if f.kind in ("number", "integer"):
        try:
            number = float(text)
        except ValueError:
            raise ValueError("expected a number") from None
        if f.kind == "integer":
            if not number.is_integer():
                raise ValueError("expected a whole number")
            return int(number)
        return int(number) if number.is_integer() and "." not in text else number
    if f.kind == "multi":
        return [part.strip() for part in text.split(",") if part.strip()]
    if f.kind == "enum":  # a label picks its value too
        for value, label in f.choices:
            if text in (value, label):
                return value
    return text


__all__ = ["ACTIONS", "FormError", "FormField", "check_content", "field_problem",
           "form_fields", "parse_value"]
