"""Pydantic's errors about a manifest's config, as the author would say them: the path as it
is written in the manifest (``world.x``, ``config.concurrency``), one error per field rather
than one per branch of a union, and the keys a section takes when one is unknown."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ValidationError

from runtime_core.config import ProcessConfig

#: Where a ProcessConfig field comes from in a manifest.
FIELD_SOURCES = {"model": "model", "instructions": "instructions", "tools": "tools",
                 "triggers": "triggers", "journal": "journal", "health": "health",
                 "budget": "budget", "secrets": "secrets", "inbox": "inbox", "hooks": "hooks",
                 "mission": "mission", "servers": "servers", "profile": "profile",
                 "memory": "memory",
                 "execution_mode": "execution_mode", "open_mode": "open_mode",
                 "incidents": "incidents", "drain_timeout": "drain_timeout"}
#: The members of the config's unions, as pydantic names them in an error's location.
_BRANCHES = ("str", "ScriptedModelSpec", "RemoteModelSpec", "ToolDeclaration")
#: What a union field takes, for a value that is neither a string nor a mapping.
_SHAPES = {
    "model": "a model is 'echo', 'scripted:<file>', 'openai:<model>' or 'ollama:<model>', or "
             "a mapping with provider: scripted, openai or ollama",
    "tools": "a tool is 'module:function', or a mapping with path and effect (read or "
             "write), and optionally name and description",
}

Problem = tuple[tuple[Any, ...], str, bool]  # (path in the manifest, message, at the key)


def validation_problems(exc: ValidationError, raw: dict[str, Any],
                        overrides: dict[str, Any]) -> Iterator[Problem]:
    """Each of ``exc``'s errors once, located in the manifest (``raw``: what was validated)."""
    shaped: set[tuple[Any, ...]] = set()
    for error in exc.errors():
        loc = tuple(_branch_name(p) or p for p in error["loc"])
        loc = tuple(p for p in loc if not (isinstance(p, str) and p.startswith("function-")))
        branch = next((i for i, p in enumerate(loc) if p in _BRANCHES), None)
        if branch is not None:
            prefix, tag = loc[:branch], loc[branch]
            value = _lookup(raw, prefix)
            if not isinstance(value, str | dict):  # no branch fits: say what does, once
                if prefix not in shaped:
                    shaped.add(prefix)
                    yield (_manifest_path(prefix, overrides),
                           _SHAPES.get(str(prefix[0]), "Input should be a string or a mapping"),
                           False)
                continue
            if tag != _branch_for(prefix, value):
                continue  # the error of a branch the value was not written for
            loc = (*prefix, *loc[branch + 1:])
        if len(loc) > 2 and loc[0] == "servers" and loc[2] in ("stdio", "http"):
            loc = (*loc[:2], *loc[3:])  # the union's tag is not a key the author wrote
        loc = _as_written(loc, raw)
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = f"unknown key {loc[-1]!r}" + _valid_keys_hint(loc, raw)
        yield _manifest_path(loc, overrides), message, error["type"] == "extra_forbidden"


def _as_written(loc: tuple[Any, ...], raw: dict[str, Any]) -> tuple[Any, ...]:
    """A trigger's or memory's field path under the spelling the author wrote
    (``watch_patterns`` for ``patterns``: the reference runtime's names are accepted)."""
    from runtime_core.memory.config import MEMORY_ALIASES
    from runtime_core.triggers.config import TRIGGER_ALIASES

    if len(loc) >= 3 and loc[0] == "triggers" and isinstance(loc[1], int):
        at, aliases = 2, TRIGGER_ALIASES
    elif len(loc) >= 2 and loc[0] == "memory":
        at, aliases = 1, MEMORY_ALIASES
    else:
        return loc
    section = _lookup(raw, loc[:at])
    if not isinstance(section, dict) or loc[at] in section:
        return loc
    for alias, canonical in aliases.items():
        if canonical == loc[at] and alias in section:
            return (*loc[:at], alias, *loc[at + 1:])
    return loc


def _branch_name(part: Any) -> str | None:
    """The union member in a location part: ``str``, or the class in pydantic's
    ``function-after[_check(), ScriptedModelSpec]``."""
    if not isinstance(part, str):
        return None
    name = part.rpartition(", ")[2].rstrip("]") if part.startswith("function-") else part
    return name if name in _BRANCHES else None


def _branch_for(prefix: tuple[Any, ...], value: str | dict[Any, Any]) -> str:
    """The member of the union the author wrote ``value`` for."""
    if prefix[:1] == ("tools",):
        return "ToolDeclaration"  # a string is read as {path: ...} before the union
    if isinstance(value, str):
        return "str"
    return "RemoteModelSpec" if value.get("provider") in ("openai", "ollama") \
        else "ScriptedModelSpec"


def _lookup(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _manifest_path(loc: tuple[Any, ...], overrides: dict[str, Any]) -> tuple[Any, ...]:
    if not loc:
        return ()
    head = loc[0]
    if head in FIELD_SOURCES:
        return (FIELD_SOURCES[head], *loc[1:])
    if head == "context" and len(loc) > 1 and loc[1] == "initial_state":
        return ("world", *loc[2:])
    return ("config", *loc)


def _valid_keys_hint(loc: tuple[Any, ...], raw: dict[str, Any]) -> str:
    from runtime_core.triggers.config import TRIGGER_FIELDS, TriggerConfig
    from runtime_core.triggers.custom import custom_trigger_type

    if len(loc) == 3 and loc[0] == "servers":
        from runtime_core.agent.mcp.config import HttpServerConfig, StdioServerConfig

        entry = (raw.get("servers") or {}).get(loc[1])
        kind = entry.get("type") if isinstance(entry, dict) else None
        server_model = HttpServerConfig if kind == "http" else StdioServerConfig
        label = "an http" if kind == "http" else "a stdio"
        return f"; {label} server takes: {', '.join(server_model.model_fields)}"
    if len(loc) == 3 and loc[0] == "triggers" and isinstance(loc[1], int):
        try:
            kind = raw["triggers"][loc[1]].get("type")
        except (KeyError, IndexError, AttributeError, TypeError):
            kind = None
        if kind in TRIGGER_FIELDS:
            fields = ["type", "filter_expression", *TRIGGER_FIELDS[kind]]
            return f"; a '{kind}' trigger takes: {', '.join(fields)}"
        if isinstance(kind, str) and custom_trigger_type(kind) is not None:
            return f"; a custom '{kind}' trigger takes: type, filter_expression, custom_config"
    if len(loc) == 2 and loc[0] == "model" and isinstance(raw.get("model"), dict):
        from runtime_core.agent.script import RemoteModelSpec, ScriptedModelSpec

        spec = RemoteModelSpec if _branch_for(("model",), raw["model"]) == "RemoteModelSpec" \
            else ScriptedModelSpec
        return f"; valid keys: {', '.join(spec.model_fields)}"
    if len(loc) == 3 and loc[0] == "tools":
        from runtime_core.agent.config import ToolDeclaration

        return f"; a tool takes: {', '.join(ToolDeclaration.model_fields)}"

    model: type[BaseModel] | None = ProcessConfig
    for part in loc[:-1]:
        if model is None or isinstance(part, int):
            continue
        info = model.model_fields.get(str(part))
        annotation = getattr(info, "annotation", None) if info else None
        model = _model_in(annotation)
    if loc and loc[0] == "triggers":
        model = TriggerConfig
    if model is None:
        return ""
    return f"; valid keys: {', '.join(model.model_fields)}"


def _model_in(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None
