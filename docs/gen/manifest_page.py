"""``reference/manifest.md``: every key of a ``.agent`` manifest and every field of
``ProcessConfig`` and the models nested in it (triggers, journal, health, budget, ...), read
from the pydantic models themselves: name, type, limits, default and the field's
``description``. A field added to a model appears here by itself."""

from __future__ import annotations

import enum
import json
import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from .markdown import anchor, banner, cell, code, prose, table

INTRO = """\
# Manifest reference

A manifest is a YAML file ending in `.agent` that declares one process; `promptui ui DIR`,
`promptui serve DIR` and `promptui run DIR` load every manifest of a folder, and
`promptui validate` checks them. This page lists every key, read from the models the runtime
validates a manifest with: a key not listed here is an error, reported with its file, line and
column. `${VAR}` and `${VAR:-default}` anywhere in a value read the environment when the
manifest loads.

```yaml
version: "1.0"
name: alert-handler
model: scripted:scripts/alert-handler.yaml
instructions: Page on-call for high and critical alerts; summarise the others.
tools:
  - {path: "my_tools:page_oncall", effect: write}
triggers:
  - {type: webhook, webhook_port: 8787, webhook_path: /alerts}
journal: {retention: {keep_runs: 200}}
config:
  trigger_delivery: {max_retries: 1}
```
"""

PROCESS_INTRO = """\
## Process settings

Every setting of a process (`ProcessConfig`). Those named in the *In a manifest* column are
written at the top level of the manifest; the others go under `config:`. From Python, they are
the keyword arguments of `ProcessConfig(...)` (and of `AgentProcess(...)`).
"""


def process_config() -> type[BaseModel]:
    """The model a manifest becomes."""
    from runtime_core.config import ProcessConfig

    return ProcessConfig


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def nested_models(root: type[BaseModel] | None = None
                  ) -> list[tuple[str, type[BaseModel]]]:
    """(where, model) for every model reachable from ProcessConfig's fields, breadth first, in
    field order; ``where`` is the dotted path at which it is first met (``journal.retention``,
    ``triggers[]``)."""
    root = root or process_config()
    found: dict[type[BaseModel], str] = {root: ""}
    queue: list[tuple[str, type[BaseModel]]] = [("", root)]
    while queue:
        where, model = queue.pop(0)
        for name, field in model.model_fields.items():
            for sub in _models_in(field.annotation):
                if sub not in found:
                    origin = typing.get_origin(field.annotation)
                    path = f"{where}.{name}" if where else name
                    suffix = "[]" if _is_list_of_models(field.annotation) else (
                        ".NAME" if origin is dict else "")
                    found[sub] = path + suffix
                    queue.append((path + suffix, sub))
    return [(where, model) for model, where in found.items() if model is not root]


def _is_list_of_models(annotation: Any) -> bool:
    for option in _options(annotation):
        if typing.get_origin(option) is list and any(
                _models_in(a) for a in typing.get_args(option)):
            return True
    return False


def _options(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def type_text(annotation: Any) -> str:
    """A field's type in words, each nested model linked to its section."""
    if annotation is type(None):
        return "null"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin in (typing.Union, types.UnionType):
        shown = [type_text(a) for a in args if a is not type(None)]
        return " or ".join(dict.fromkeys(shown))
    if origin is typing.Literal:
        return "one of " + ", ".join(code(json.dumps(a) if isinstance(a, str) else a)
                                     for a in args)
    if origin in (list, tuple, set, frozenset):
        inner = [a for a in args if a is not Ellipsis]
        return "list of " + (type_text(inner[0]) if inner else "values")
    if origin is dict:
        return f"mapping of {type_text(args[0])} to {type_text(args[1])}" if args else "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{anchor(annotation.__name__)})"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(code(m.value) for m in annotation)
    if annotation is SecretStr:
        return "secret string"
    words = {str: "string", int: "integer", float: "number", bool: "boolean", Any: "any"}
    if annotation in words:
        return words[annotation]
    if isinstance(annotation, typing.TypeAliasType if hasattr(typing, "TypeAliasType")
                  else ()):
        return type_text(annotation.__value__)
    name = getattr(annotation, "__name__", None) or str(annotation)
    return f"a Python {name} object"


_LIMITS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "min_length": "length >=",
           "max_length": "length <=", "pattern": "matches"}


def limits_text(field: FieldInfo) -> str:
    """The field's bounds (``>= 1, <= 100``), from its Field constraints, or ""."""
    found = []
    for item in field.metadata:
        for attr, word in _LIMITS.items():
            value = getattr(item, attr, None)
            if value is not None:
                found.append(f"{word} {value}")
    # Constraints on one member of an optional type (``Annotated[int, Field(ge=0)] | None``).
    for option in _options(field.annotation):
        if typing.get_origin(option) is typing.Annotated:
            for item in typing.get_args(option)[1:]:
                for inner in getattr(item, "metadata", [item]):
                    for attr, word in _LIMITS.items():
                        value = getattr(inner, attr, None)
                        if value is not None:
                            found.append(f"{word} {value}")
    return ", ".join(dict.fromkeys(found))


def default_text(field: FieldInfo) -> str:
    """The field's default as a manifest would write it; **required** when it has none."""
    if field.default is PydanticUndefined and field.default_factory is None:
        return "**required**"
    factory = field.default_factory
    value = factory() if factory is not None else field.default  # type: ignore[call-arg]
    if value is None:
        return "not set"
    if isinstance(value, BaseModel):
        changed = value.model_dump(mode="json", exclude_defaults=True)
        return code(_flow(changed)) if changed else "defaults"
    if isinstance(value, enum.Enum):
        value = value.value
    return code(_flow(value))


def _flow(value: Any) -> str:
    """``value`` in YAML's flow style, as one would write it in a manifest."""
    if isinstance(value, str):
        return value if value and value.strip() == value and value[0] not in "[{*&!|>'\"%@`" \
            else json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return json.dumps(value)


def _description(field: FieldInfo) -> str:
    return cell(prose(field.description or ""))


def _type_cell(field: FieldInfo) -> str:
    limits = limits_text(field)
    return cell(type_text(field.annotation)) + (f" ({cell(limits)})" if limits else "")


def field_rows(model: type[BaseModel]) -> list[tuple[str, ...]]:
    """(name, type, default, description) for each field of ``model``."""
    return [(code(field.alias or name), _type_cell(field), default_text(field),
             _description(field)) for name, field in model.model_fields.items()]


def _process_table() -> str:
    from runtime_core.manifest.errors import FIELD_SOURCES

    model = process_config()
    rows = []
    for name, field in model.model_fields.items():
        if name in FIELD_SOURCES:
            where = code(FIELD_SOURCES[name])
        elif name == "context":
            where = f"{code('context')} ({code('world')}: its initial_state)"
        else:
            where = code(f"config.{name}")
        rows.append((code(name), where, _type_cell(field), default_text(field),
                     _description(field)))
    return table(("Field", "In a manifest", "Type", "Default", "Description"), rows)


def _top_level_table() -> str:
    from runtime_core.manifest.loader import MANIFEST_KEYS

    rows = [(code(key), cell(what)) for key, what in MANIFEST_KEYS.items()]
    return table(("Key", "What it holds"), rows)


def _trigger_types() -> str:
    from runtime_core.triggers.config import CUSTOM_FIELDS, TRIGGER_ALIASES, TRIGGER_FIELDS

    rows = [(code(kind), ", ".join(code(f) for f in fields) or "none")
            for kind, fields in TRIGGER_FIELDS.items()]
    rows.append(("a registered custom type", ", ".join(code(f) for f in CUSTOM_FIELDS)))
    spelled = ", ".join(f"{code(old)} for {code(new)}" for old, new in TRIGGER_ALIASES.items())
    return ("### Fields by trigger type\n\nBesides `type` and `filter_expression`, a trigger "
            "may set only the fields of its type:\n\n"
            + table(("Type", "Its fields"), rows)
            + f"\nThe reference runtime's spellings are read too: {spelled}.\n")


def model_section(where: str, model: type[BaseModel]) -> str:
    """One nested model: its heading, docstring and field table."""
    doc = model.__dict__.get("__doc__") or ""
    parts = [f"## {model.__name__}\n", f"At `{where}`.\n"]
    if doc.strip():
        parts.append(prose(doc) + "\n")
    parts.append(table(("Field", "Type", "Default", "Description"), field_rows(model)))
    if model.__name__ == "TriggerConfig":
        parts.append(_trigger_types())
    return "\n".join(parts)


def all_field_names() -> dict[str, list[str]]:
    """Model name -> its field names, for ProcessConfig and every model nested in it."""
    models = [("", process_config()), *nested_models()]
    return {model.__name__: list(model.model_fields) for _, model in models}


def render() -> str:
    """The whole manifest reference page."""
    parts = [banner("manifest_page"), INTRO, "## Top-level keys\n", _top_level_table(),
             PROCESS_INTRO, _process_table()]
    parts += [model_section(where, model) for where, model in nested_models()]
    return "\n".join(parts)
