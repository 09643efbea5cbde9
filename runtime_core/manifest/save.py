"""A ProcessConfig written back as a manifest (``save_manifest``): a config patched live or forked
in the control room, or built in Python, as a ``.agent`` file that loads to the same config.

Credentials are never written: a value that was a ``${VAR}`` reference stays one (secrets, MCP
server env/headers/tokens, and webhook secrets read from a manifest), and a literal credential is
written as a reference to a variable named after its place, with a note saying which to set. The
notes head the file as comments. A model given as a Python object cannot be written."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml

from runtime_core.agent.config import is_model_object
from runtime_core.config import ProcessConfig
from runtime_core.governance.redaction import is_credential_name, is_reference, mask_url
from runtime_core.triggers.config import TriggerConfig
from runtime_core.triggers.custom import custom_trigger_type

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
#: ProcessConfig fields a manifest writes at its top level, in the order written.
TOP_LEVEL = ("model", "instructions", "tools", "servers", "triggers", "journal", "health",
             "budget", "secrets", "inbox", "hooks", "mission", "profile", "memory", "incidents",
             "execution_mode", "open_mode", "drain_timeout")


class _Dumper(yaml.SafeDumper):
    """Safe YAML, with text of several lines as a literal block (``|``), as a person writes
    instructions."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not any(line != line.rstrip() for line in
                                              value.split("\n")) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


class _Writer:
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.variables: set[str] = set()

    def variable(self, where: tuple[Any, ...]) -> str:
        base = re.sub(r"[^A-Za-z0-9]+", "_", "_".join(str(p) for p in where)).strip("_")
        name = (base or "SECRET").upper()
        if name[0].isdigit():
            name = f"V_{name}"
        unique, n = name, 2
        while unique in self.variables:
            unique, n = f"{name}_{n}", n + 1
        self.variables.add(unique)
        return unique

    def reference(self, where: tuple[Any, ...], what: str) -> str:
        name = self.variable(where)
        self.notes.append(f"{_dotted(where)}: {what} is written as ${{{name}}}; set {name} "
                          "before loading this file")
        return f"${{{name}}}"

    def credentials(self, data: Any, where: tuple[Any, ...], sensitive: bool = False) -> Any:
        """``data`` with every literal credential replaced by a ``${VAR}`` reference."""
        if isinstance(data, dict):
            return {key: self.credentials(value, (*where, key),
                                          sensitive or is_credential_name(str(key)))
                    for key, value in data.items()}
        if isinstance(data, list):
            return [self.credentials(item, (*where, i), sensitive)
                    for i, item in enumerate(data)]
        if isinstance(data, str) and data and not is_reference(data):
            if sensitive:
                return self.reference(where, "a literal credential")
            if "://" in data and mask_url(data, set()) != data:
                return self.reference(where, "a URL holding a credential")
        return data


def _dotted(where: tuple[Any, ...]) -> str:
    out = ""
    for part in where:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out


def _trigger(trigger: TriggerConfig, index: int, writer: _Writer) -> dict[str, Any]:
    data: dict[str, Any] = trigger.model_dump(mode="json", exclude_defaults=True)
    data.pop("type", None)
    data = {"type": trigger.type, **data}
    secrets = trigger.secrets()
    if secrets:
        references = trigger.secret_references()
        if references is None:
            where = ("triggers", index, "hmac_secret")
            references = tuple(
                writer.reference(where if len(secrets) == 1 else (*where, i), "the secret")
                for i in range(len(secrets)))
        data["hmac_secret"] = list(references) if isinstance(trigger.hmac_secret, list) \
            else references[0]
    return data


def _plugins(config: ProcessConfig, writer: _Writer) -> list[str]:
    modules: list[str] = []
    for index, trigger in enumerate(config.triggers):
        registered = custom_trigger_type(trigger.type)
        if registered is None:
            continue
        if registered.module is None:
            writer.notes.append(f"triggers[{index}]: trigger type {trigger.type!r} was "
                                "registered by a script; list the module that registers it "
                                "under plugins:")
        elif registered.module not in modules:
            modules.append(registered.module)
    return modules


def manifest_data(config: ProcessConfig, name: str) -> tuple[dict[str, Any], list[str]]:
    """The manifest mapping ``config`` loads back from, and the notes about it (credentials
    written as references). ValueError for a config a manifest cannot hold."""
    if not NAME.match(name):
        raise ValueError(f"process name {name!r} cannot name a manifest: a letter, then "
                         "letters, digits, '-' or '_' (at most 64)")
    if is_model_object(config.model):
        raise ValueError("the model is a Python object (ProcessConfig(model=obj)), which a "
                         "manifest cannot hold; set a model setting ('openai:<model>', "
                         "'scripted:<file>', ...) first")
    writer = _Writer()
    dumped: dict[str, Any] = config.model_dump(mode="json", exclude_defaults=True,
                                               by_alias=True)
    data: dict[str, Any] = {"version": "1.0", "name": name}
    plugins = _plugins(config, writer)
    if plugins:
        data["plugins"] = plugins
    journal = config.journal.model_dump(mode="json", exclude_defaults=True)
    dumped["journal"] = {"level": config.journal.level, **journal}  # no section: checkpoint
    if config.triggers:
        dumped["triggers"] = [_trigger(t, i, writer) for i, t in enumerate(config.triggers)]
    context = dumped.pop("context", {})
    for key in TOP_LEVEL:
        if key in dumped:
            data[key] = dumped.pop(key)
    if "initial_state" in context:
        data["world"] = context.pop("initial_state")
    if context:
        dumped["context"] = context
    if dumped:
        data["config"] = dumped
    clean: dict[str, Any] = writer.credentials(
        {k: v for k, v in data.items() if k != "triggers"}, ())
    if "triggers" in data:  # their secrets are references already; other fields are checked
        clean["triggers"] = [
            {**writer.credentials({k: v for k, v in t.items() if k != "hmac_secret"},
                                  ("triggers", i)),
             **({"hmac_secret": t["hmac_secret"]} if "hmac_secret" in t else {})}
            for i, t in enumerate(data["triggers"])]
        clean = {key: clean[key] for key in data}  # the order written above
    return clean, writer.notes


def _render(config: ProcessConfig, name: str) -> tuple[str, list[str]]:
    data, notes = manifest_data(config, name)
    head = [f"# The configuration of process {name!r}, written by promptui. Validate it with:",
            "#   promptui validate <this file>"]
    head += [f"# note: {note}" for note in notes]
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=False, width=100)
    return "\n".join(head) + "\n" + body, notes


def manifest_text(config: ProcessConfig, name: str) -> str:
    """``config`` as a manifest's YAML text, headed by its notes as comments."""
    return _render(config, name)[0]


def save_manifest(config: ProcessConfig, path: str | Path, *, name: str | None = None
                  ) -> list[str]:
    """Write ``config`` as a manifest at ``path`` (atomically); the notes (which ``${VAR}``
    references to set). ``name``: the process name, by default the file's stem."""
    target = Path(path)
    text, notes = _render(config, name if name is not None else target.stem)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return notes
