"""``.agent`` manifests: YAML that declares a process, turned into a ProcessConfig.

Every problem is reported with the file, line and column, the dotted path of the field
(``triggers[1].cron_expression``) and what to do; a directory is checked whole, so one run shows
every error, not just the first.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from runtime_core.agent.mcp_config import (
    HttpServerConfig,
    ServerConfig,
    StdioServerConfig,
    check_server,
    missing_references,
    normalise_server_entries,
)
from runtime_core.config import ProcessConfig

NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

#: Top-level keys and what they are for (the list an unknown key is told about).
MANIFEST_KEYS: dict[str, str] = {
    "version": "manifest format version ('1.0')",
    "name": "the process name",
    "model": "'echo', 'scripted:<file>' or an inline scripted model",
    "instructions": "the system prompt",
    "tools": "Python tools: 'module:function' or {path, effect, name, description}",
    "triggers": "what makes the agent run",
    "world": "the initial context state",
    "journal": "journal settings (default: checkpoint level in .promptui/journal.db)",
    "config": "any other ProcessConfig field (concurrency, restart_policy, ...)",
    "servers": "MCP servers: {name: {type: stdio, command, args, env, cwd}} or {type: http, url}",
    "budget": "autonomy budget: limits per run and per day",
    "health": "behavioral health: stuck, loop, empty replies, error rate",
    "mission": "a goal with a success check over the context state",
    "profile": "{name, version, completion: {evaluator, actions, verifications}}",
    "execution_mode": "'strict' (default) or 'open': the agent may change its own triggers",
    "open_mode": "open-mode limits: max_dynamic_triggers, allow_process_spawn, ...",
    "secrets": "secrets for tools: {name: '${ENV_VAR}'}, never written anywhere",
    "inbox": "operator messages and questions (send_message, ask)",
    "memory": "long-term memory: {provider: in_memory|sqlite, path, auto_inject, ...}",
    "incidents": "incidents from webhook/event fingerprints: {fingerprint, reopen_window, ...}",
    "drain_timeout": "seconds a stop lets the runs in flight finish before cancelling them",
}
NOT_YET_APPLIED: tuple[str, ...] = ()
#: Always the absolute folder of the manifest being read (e.g. a server script beside it).
MANIFEST_DIR_VARIABLE = "MANIFEST_DIR"
#: Where a ProcessConfig field comes from in a manifest.
FIELD_SOURCES = {"model": "model", "instructions": "instructions", "tools": "tools",
                 "triggers": "triggers", "journal": "journal", "health": "health",
                 "budget": "budget", "secrets": "secrets", "inbox": "inbox",
                 "mission": "mission", "servers": "servers", "profile": "profile",
                 "memory": "memory",
                 "execution_mode": "execution_mode", "open_mode": "open_mode",
                 "incidents": "incidents", "drain_timeout": "drain_timeout"}


@dataclass(frozen=True, slots=True)
class ManifestProblem:
    file: str
    line: int
    column: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class ManifestError(ValueError):
    """One or more manifests are invalid; ``problems`` lists each with its place."""

    def __init__(self, problems: list[ManifestProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


@dataclass(slots=True)
class Manifest:
    name: str
    config: ProcessConfig
    path: Path
    base_dir: Path
    warnings: list[str] = field(default_factory=list)


def _dotted(parts: tuple[Any, ...] | list[Any]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


class _Positions:
    """Line and column (1-based) of every node, by its path in the document."""

    def __init__(self, root: yaml.Node | None) -> None:
        self.marks: dict[tuple[Any, ...], tuple[int, int]] = {}
        if root is not None:
            self._walk(root, ())

    def _walk(self, node: yaml.Node, path: tuple[Any, ...]) -> None:
        self.marks[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                self.marks[(*path, key, "<key>")] = (key_node.start_mark.line + 1,
                                                     key_node.start_mark.column + 1)
                self._walk(value_node, (*path, key))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self._walk(item, (*path, index))

    def find(self, path: tuple[Any, ...], *, key: bool = False) -> tuple[int, int]:
        """The closest known position: the node itself, else its nearest parent."""
        if key and (*path, "<key>") in self.marks:
            return self.marks[(*path, "<key>")]
        probe = tuple(path)
        while probe:
            if probe in self.marks:
                return self.marks[probe]
            probe = probe[:-1]
        return self.marks.get((), (1, 1))


def _keeps_references(path: tuple[Any, ...]) -> bool:
    """Credentials stay ``${VAR}`` in the config and are resolved when used, so their values
    never sit in config, journal or screen: secrets, and MCP server env, headers and tokens."""
    if path[:2] == ("secrets", "secrets"):
        return True
    return len(path) >= 3 and path[0] == "servers" and path[2] in (
        "env", "headers", "bearer_token")


def _substitute_env(value: Any, path: tuple[Any, ...], errors: list[tuple[tuple[Any, ...], str]],
                    manifest_dir: str = "") -> Any:
    if _keeps_references(path):
        return value
    if isinstance(value, str):
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
        return {k: _substitute_env(v, (*path, k), errors, manifest_dir) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_env(v, (*path, i), errors, manifest_dir) for i, v in enumerate(value)]
    return value


def parse_manifest(text: str, path: Path) -> Manifest:
    """Parse one manifest's text; raise ManifestError listing every problem found."""
    file = str(path)
    problems: list[ManifestProblem] = []

    def problem(where: tuple[Any, ...], message: str, positions: _Positions | None = None, *,
                key: bool = False) -> None:
        line, column = positions.find(where, key=key) if positions else (1, 1)
        problems.append(ManifestProblem(file, line, column, _dotted(where), message))

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        reason = getattr(exc, "problem", None) or str(exc)
        raise ManifestError([ManifestProblem(file, line, column, "",
                                             f"not valid YAML: {reason}")]) from None
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. odd scalars, deep nesting
        raise ManifestError([ManifestProblem(file, 1, 1, "", f"not valid YAML: {exc}")]) from None
    positions = _Positions(root)
    if not isinstance(data, dict):
        problem((), "a manifest is a mapping of keys such as name, model and triggers", positions)
        raise ManifestError(problems)
    env_errors: list[tuple[tuple[Any, ...], str]] = []
    data = _substitute_env(data, (), env_errors, str(path.parent.resolve()))
    for where, message in env_errors:
        problem(where, message, positions)
    for key in data:
        if not isinstance(key, str) or key not in MANIFEST_KEYS:
            valid = ", ".join(MANIFEST_KEYS)
            problem((key,), f"unknown key {key!r}; valid keys: {valid}", positions, key=True)
    version = data.get("version", "1.0")
    if str(version) not in ("1", "1.0"):
        problem(("version",), f"unsupported version {version!r}; use '1.0'", positions)
    name = data.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        problem(("name",) if "name" in data else (),
                "name is required: a letter, then letters, digits, '-' or '_' (at most 64)",
                positions)
    warnings = [f"{file}: '{key}' is accepted but not applied yet by this version"
                for key in NOT_YET_APPLIED if key in data]
    raw: dict[str, Any] = {}
    for key in ("model", "instructions", "tools", "triggers", "health", "budget", "secrets",
                "inbox", "mission", "servers", "profile", "memory", "incidents", "execution_mode",
                "open_mode", "drain_timeout"):
        if key in data:
            raw[key] = data[key]
    raw["journal"] = data["journal"] if data.get("journal") is not None else {
        "level": "checkpoint"}
    if "world" in data:
        raw["context"] = {"initial_state": data["world"]}
    overrides = data.get("config") or {}
    if not isinstance(overrides, dict):
        problem(("config",), "config is a mapping of ProcessConfig fields", positions)
        overrides = {}
    for key, value in overrides.items():
        if key in FIELD_SOURCES or key == "journal":
            problem(("config", key), f"set {key!r} at the top level, not under config",
                    positions, key=True)
        elif key == "context" and isinstance(value, dict):
            raw.setdefault("context", {}).update(value)
        else:
            raw[key] = value
    config: ProcessConfig | None = None
    try:
        # strict_keys: an unknown key in a governance section is an error in a manifest
        config = ProcessConfig.model_validate(raw, context={"strict_keys": True})
    except ValidationError as exc:
        for error in exc.errors():
            loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and (
                p.startswith("function-") or p in ("str", "ScriptedModelSpec",
                                                   "RemoteModelSpec"))))
            if len(loc) > 2 and loc[0] == "servers" and loc[2] in ("stdio", "http"):
                loc = (*loc[:2], *loc[3:])  # the union's tag is not a key the author wrote
            where = _manifest_path(loc, overrides)
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = f"unknown key {loc[-1]!r}" + _valid_keys_hint(loc, raw)
            problem(where, message, positions, key=error["type"] == "extra_forbidden")
    for server_name, server in _usable_entries(config, raw.get("servers")).items():
        try:
            check_server(server_name, server, path.parent)
        except ValueError as exc:
            problem(("servers", server_name), str(exc), positions)
        warnings.extend(
            f"{file}: servers.{server_name} needs environment variable {variable}, which "
            "is not set (it is read when the server connects)"
            for variable in missing_references(server))
    if problems:
        raise ManifestError(problems)
    assert config is not None and isinstance(name, str)
    return Manifest(name, config, path, path.parent, warnings)


def _usable_entries(config: ProcessConfig | None, raw: Any
                    ) -> dict[str, StdioServerConfig | HttpServerConfig]:
    """The server entries that parse, even when another part of the manifest did not, so
    every server problem is reported in one pass."""
    if config is not None:
        return dict(config.servers)
    if not isinstance(raw, dict):
        return {}
    adapter: TypeAdapter[StdioServerConfig | HttpServerConfig] = TypeAdapter(ServerConfig)
    entries: dict[str, StdioServerConfig | HttpServerConfig] = {}
    normalised = normalise_server_entries(raw)
    assert isinstance(normalised, dict)
    for name, entry in normalised.items():
        try:
            entries[str(name)] = adapter.validate_python(entry)
        except ValidationError:
            continue  # already reported with the rest of the config
    return entries


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
    from pydantic import BaseModel

    from runtime_core.triggers.config import TRIGGER_FIELDS, TriggerConfig

    if len(loc) == 3 and loc[0] == "servers":
        from runtime_core.agent.mcp_config import HttpServerConfig, StdioServerConfig

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
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def load_manifest(path: str | Path) -> Manifest:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError([ManifestProblem(str(file), 1, 1, "",
                                             f"cannot read: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError as exc:
        raise ManifestError([ManifestProblem(str(file), 1, 1, "",
                                             f"not UTF-8 text: {exc.reason}")]) from None
    return parse_manifest(text, file)


def load_directory(directory: str | Path) -> list[Manifest]:
    """Load every ``*.agent`` file (sorted); report every file's problems together."""
    folder = Path(directory)
    if not folder.is_dir():
        raise ManifestError([ManifestProblem(str(folder), 1, 1, "",
                                             "not a directory of .agent files")])
    manifests: list[Manifest] = []
    problems: list[ManifestProblem] = []
    for file in sorted(folder.glob("*.agent")):
        try:
            manifests.append(load_manifest(file))
        except ManifestError as exc:
            problems.extend(exc.problems)
    names: dict[str, Path] = {}
    for manifest in manifests:
        if manifest.name in names:
            problems.append(ManifestProblem(str(manifest.path), 1, 1, "name",
                                            f"process name {manifest.name!r} is already used "
                                            f"by {names[manifest.name]}"))
        names[manifest.name] = manifest.path
    if not manifests and not problems:
        problems.append(ManifestProblem(str(folder), 1, 1, "", "no .agent files here"))
    if problems:
        raise ManifestError(problems)
    return manifests
