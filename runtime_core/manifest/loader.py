"""``.agent`` manifests: YAML that declares a process, turned into a ProcessConfig.

Every problem is reported with the file, line and column, the dotted path of the field
(``triggers[1].cron_expression``) and what to do; a directory is checked whole, so one run shows
every error, not just the first. The YAML itself is read by ``source`` (one safe pass,
with limits), ``${VAR}`` references by ``env``; what would fail only at start (tool
imports, script files, watch paths, ports) is checked by ``checks`` for ``validate``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from runtime_core.agent.mcp.config import (
    HttpServerConfig,
    ServerConfig,
    StdioServerConfig,
    check_server,
    missing_references,
    normalise_server_entries,
)
from runtime_core.config import ProcessConfig
from runtime_core.governance.redaction import is_reference
from runtime_core.manifest.checks import IMPORT_TIMEOUT as IMPORT_TIMEOUT
from runtime_core.manifest.checks import StartReport as StartReport
from runtime_core.manifest.checks import check_start as check_start
from runtime_core.manifest.compat import REFERENCE_CONFIG_SECTIONS, porting_notes, refusals
from runtime_core.manifest.env import ENV_PATTERN as ENV_PATTERN
from runtime_core.manifest.env import MANIFEST_DIR_VARIABLE as MANIFEST_DIR_VARIABLE
from runtime_core.manifest.env import substitute_env
from runtime_core.manifest.errors import FIELD_SOURCES as FIELD_SOURCES
from runtime_core.manifest.errors import validation_problems
from runtime_core.manifest.plugins import import_plugins
from runtime_core.manifest.save import manifest_data as manifest_data
from runtime_core.manifest.save import manifest_text as manifest_text
from runtime_core.manifest.save import save_manifest as save_manifest
from runtime_core.manifest.source import MAX_BYTES as MAX_BYTES
from runtime_core.manifest.source import MAX_DEPTH as MAX_DEPTH
from runtime_core.manifest.source import MAX_NODES as MAX_NODES
from runtime_core.manifest.source import ManifestError as ManifestError
from runtime_core.manifest.source import ManifestProblem as ManifestProblem
from runtime_core.manifest.source import Positions as Positions
from runtime_core.manifest.source import dotted, read_text, read_yaml

NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")

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
    "hooks": "hooks: [{event, command: [program, args]} or {event, callback: 'module:fn'}]",
    "memory": "long-term memory: {provider: in_memory|sqlite, path, auto_inject, ...}",
    "incidents": "incidents from webhook/event fingerprints: {fingerprint, reopen_window, ...}",
    "drain_timeout": "seconds a stop lets the runs in flight finish before cancelling them",
    "plugins": "modules imported first (beside the manifest), e.g. to register trigger types",
    "context": "context settings: writable_keys, conversation_max_messages... (config.context)",
}
NOT_YET_APPLIED: tuple[str, ...] = ()


@dataclass(slots=True)
class Manifest:
    name: str
    config: ProcessConfig
    path: Path
    base_dir: Path
    warnings: list[str] = field(default_factory=list)
    positions: Positions = field(default_factory=Positions)  # where each field was written
    #: How promptui reads what a manifest written for the reference runtime says (its field
    #: spellings, a journal folder...): ``file:line:col: path: note`` lines, never errors.
    notes: list[str] = field(default_factory=list)


def parse_manifest(text: str, path: Path) -> Manifest:
    """Parse one manifest's text; raise ManifestError listing every problem found."""
    file = str(path)
    problems: list[ManifestProblem] = []

    data, positions = read_yaml(text, file)  # ManifestError: not YAML, or over a limit

    def problem(where: tuple[Any, ...], message: str, *, key: bool = False,
                shown: str | None = None) -> None:
        line, column = positions.find(where, key=key)
        problems.append(ManifestProblem(file, line, column,
                                        dotted(where) if shown is None else shown, message))

    if not isinstance(data, dict):
        problem((), "a manifest is a mapping of keys such as name, model and triggers")
        raise ManifestError(problems)
    env_errors: list[tuple[tuple[Any, ...], str]] = []
    written = data  # before substitution: where the webhook secrets' references are
    data = substitute_env(data, (), env_errors, str(path.parent.resolve()))
    for where, message in env_errors:
        problem(where, message)
    for key in data:
        if not isinstance(key, str) or key not in MANIFEST_KEYS:
            valid = ", ".join(MANIFEST_KEYS)
            problem((key,), f"unknown key {key!r}; valid keys: {valid}", key=True,
                    shown=key if isinstance(key, str) else repr(key))
    version = data.get("version", "1.0")
    if str(version) not in ("1", "1.0"):
        problem(("version",), f"unsupported version {version!r}; use '1.0'")
    name = data.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        problem(("name",) if "name" in data else (),
                "name is required: a letter, then letters, digits, '-' or '_' (at most 64)")
    warnings = [f"{file}: '{key}' is accepted but not applied yet by this version"
                for key in NOT_YET_APPLIED if key in data]
    raw: dict[str, Any] = {}
    for key in ("model", "instructions", "tools", "triggers", "health", "budget", "secrets",
                "inbox", "hooks", "mission", "servers", "profile", "memory", "incidents",
                "execution_mode", "open_mode", "drain_timeout"):
        if key in data:
            raw[key] = data[key]
    raw["journal"] = data["journal"] if data.get("journal") is not None else {
        "level": "checkpoint"}
    if "world" in data:
        raw["context"] = {"initial_state": data["world"]}
    top_context = data.get("context")  # the reference runtime's place for context settings
    if isinstance(top_context, dict):
        raw.setdefault("context", {}).update(top_context)
    elif top_context is not None:
        problem(("context",), "context is a mapping of context settings (writable_keys, "
                              "conversation_max_messages, ...)")
    overrides = data.get("config") or {}
    if not isinstance(overrides, dict):
        problem(("config",), "config is a mapping of ProcessConfig fields")
        overrides = {}
    for key, value in overrides.items():
        if key in REFERENCE_CONFIG_SECTIONS and key not in data:
            raw[key] = value  # the reference runtime's place for it; a note says ours
        elif key in FIELD_SOURCES or key == "journal":
            problem(("config", key), f"set {key!r} at the top level, not under config", key=True)
        elif key == "context" and isinstance(value, dict):
            raw.setdefault("context", {}).update(value)
        else:
            raw[key] = value
    # before the triggers are checked: a plugin registers the custom trigger types they name
    import_plugins(data.get("plugins"), path.parent, lambda where, message: problem(
        where, message))
    refused = refusals(data)  # reference-only settings: said with what to write instead
    for where, message in refused.items():
        problem(where, message, key=True)
    config: ProcessConfig | None = None
    try:
        # strict_keys: an unknown key in a governance section is an error in a manifest
        config = ProcessConfig.model_validate(raw, context={"strict_keys": True})
    except ValidationError as exc:
        for where, message, at_key in validation_problems(exc, raw, overrides):
            if where[:2] == ("config", "context") and isinstance(top_context, dict) and \
                    len(where) > 2 and where[2] in top_context:
                where = ("context", *where[2:])  # written at the top level
            if where not in refused:
                problem(where, message, key=at_key)
    for server_name, server in _usable_entries(config, raw.get("servers")).items():
        try:
            check_server(server_name, server, path.parent)
        except ValueError as exc:
            problem(("servers", server_name), str(exc))
        warnings.extend(
            f"{file}: servers.{server_name} needs environment variable {variable}, which "
            "is not set (it is read when the server connects)"
            for variable in missing_references(server))
    if problems:
        raise ManifestError(problems)
    assert config is not None and isinstance(name, str)
    notes: list[str] = []

    def note(where: tuple[Any, ...], message: str, at_key: bool) -> None:
        line, column = positions.find(where, key=at_key)
        notes.append(str(ManifestProblem(file, line, column, dotted(where), message)))

    porting_notes(data, config, note)
    _keep_secret_references(written, config)
    return Manifest(name, config, path, path.parent, warnings, positions, notes)


def _keep_secret_references(written: dict[str, Any], config: ProcessConfig) -> None:
    """Each webhook trigger remembers the ``${VAR}`` text its hmac_secret was written as."""
    triggers = written.get("triggers")
    if not isinstance(triggers, list) or len(triggers) != len(config.triggers):
        return
    for raw, trigger in zip(triggers, config.triggers, strict=True):
        secret = raw.get("hmac_secret") if isinstance(raw, dict) else None
        texts = secret if isinstance(secret, list) else [secret]
        if secret is not None and all(isinstance(t, str) and is_reference(t) for t in texts):
            trigger.remember_secret_references([str(t) for t in texts])


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


def manifest_to_process_config(data: Mapping[str, Any] | Manifest, *,
                               base_dir: str | Path = ".") -> ProcessConfig:
    """A manifest's mapping (as YAML reads it; a Manifest: its config) -> its ProcessConfig,
    checked as a file is (plugins imported from ``base_dir``); ManifestError otherwise."""
    if isinstance(data, Manifest):
        return data.config
    text = yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True)
    return parse_manifest(text, Path(base_dir) / "<manifest>.agent").config


def load_manifest(path: str | Path) -> Manifest:
    file = Path(path)
    return parse_manifest(read_text(file), file)  # ManifestError: unreadable, too large, not UTF-8


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
