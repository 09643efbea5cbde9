"""``${VAR}`` and ``${VAR:-default}`` in a manifest's values, and which values keep them."""

from __future__ import annotations

import os
import re
from typing import Any

ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: Always the absolute folder of the manifest being read (e.g. a server script beside it).
MANIFEST_DIR_VARIABLE = "MANIFEST_DIR"

Errors = list[tuple[tuple[Any, ...], str]]


def _keeps_references(path: tuple[Any, ...]) -> bool:
    """Credentials stay ``${VAR}`` in the config and are resolved when used, so their values
    never sit in config, journal or screen: secrets, and MCP server env, headers and tokens."""
    if path[:2] == ("secrets", "secrets"):
        return True
    return len(path) >= 3 and path[0] == "servers" and path[2] in (
        "env", "headers", "bearer_token")


def _malformed(value: str, path: tuple[Any, ...], errors: Errors) -> None:
    """A ``${`` that starts no reference: it would stay in the value as literal text, which is
    never what the author meant (``${PORT``, ``${1X}``, ``${A-b}``)."""
    start = value.find("${")
    while start != -1:
        if not ENV_PATTERN.match(value, start):
            end = value.find("}", start)
            shown = value[start:end + 1] if end != -1 else value[start:start + 40]
            errors.append((path, f"{shown!r} is not an environment reference; write ${{NAME}} "
                                 "or ${NAME:-default} (NAME: letters, digits, '_')"))
            return
        start = value.find("${", start + 2)


def substitute_env(value: Any, path: tuple[Any, ...], errors: Errors,
                   manifest_dir: str = "") -> Any:
    """``value`` with its references replaced (except in credentials); each unset variable
    without a default, and each malformed reference, appended to ``errors`` with its path."""
    if isinstance(value, str):
        _malformed(value, path, errors)
        if _keeps_references(path):
            return value

        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name == MANIFEST_DIR_VARIABLE and manifest_dir:
                return manifest_dir
            if name in os.environ:
                return os.environ[name]
            if default is not None:
                return default
            errors.append((path, f"environment variable {name} is not set (set it, or write "
                                 f"${{{name}:-default}})"))
            return match.group(0)
        return ENV_PATTERN.sub(replace, value)
    if isinstance(value, dict):
        return {k: substitute_env(v, (*path, k), errors, manifest_dir) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_env(v, (*path, i), errors, manifest_dir) for i, v in enumerate(value)]
    return value
