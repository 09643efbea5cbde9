"""The redaction every view of a process goes through, whichever transport carries it: the
values of its secret scope become ``[secret:name]`` (the process's own redaction), and the
credentials its configuration holds (escalation and MCP headers, URL passwords and tokens,
webhook signing secrets, literal secrets) become ``[redacted]``, in the configuration and in
any text they turn up in. A configuration is shown with ``${VAR}`` references, never values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime_core.agent.mcp.config import redacted_server
from runtime_core.config import ProcessConfig
from runtime_core.events import RuntimeEvent
from runtime_core.governance.redaction import hide_credentials, literal_redactor
from runtime_core.journal.postgres.dsn import dsn_secrets
from runtime_core.journal.rewind_plan import RewindPlan, RewindResult, redacted_plan
from runtime_core.journal.rewind_plan import redacted_result as _redacted_result
from runtime_core.process.process import AgentProcess

Redact = Callable[[str], str]
_Literals = tuple[ProcessConfig, tuple[int, ...], Redact | None]
#: id(config) -> (the config, what of it was looked at, its literal redactor): the views are
#: read many times a second and a configuration changes seldom. Holding the config keeps its
#: id from being reused by another.
_CACHE: dict[int, _Literals] = {}
_CACHE_MAX = 1024


def redact_any(value: Any, redact: Redact) -> Any:
    """Every string inside a JSON-like value through ``redact`` (tuples become lists)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_any(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_any(v, redact) for v in value]
    return value


def _shown(config: ProcessConfig) -> tuple[dict[str, Any], set[str]]:
    """The configuration as it may be displayed, and the credential values it hid."""
    hidden: set[str] = set()
    data: dict[str, Any] = hide_credentials(
        config.model_dump(mode="json", exclude_defaults=True, by_alias=True), hidden)
    if config.journal.level != "none":  # where and how much, even when those are defaults
        data["journal"] = hide_credentials(config.journal.model_dump(mode="json"), hidden)
    if config.servers:  # a literal credential of any name is hidden there
        data["servers"] = {name: hide_credentials(redacted_server(server), hidden)
                           for name, server in config.servers.items()}
    for trigger in config.triggers:  # SecretStr dumps as stars: its value is read here
        hidden.update(secret.get_secret_value() for secret in trigger.secrets())
    if config.journal.backend == "postgres":  # the DSN's password alone, where a text quotes it
        hidden.update(dsn_secrets(config.journal.resolved_dsn() or ""))
    return data, hidden


def shown_config(config: ProcessConfig, redact: Redact | None = None) -> dict[str, Any]:
    """The configuration as it may be displayed: credentials are ``${VAR}`` references or
    ``[redacted]``, never values, and ``redact`` (a process's secret scope) is applied to
    every other value. Fields are spelled as in a manifest (their aliases: a scripted turn's
    ``raise``, not the Python name ``raise_``)."""
    data, hidden = _shown(config)
    literal = literal_redactor(hidden)
    if redact is not None or literal is not None:
        data = redact_any(data, _compose(redact, literal))
    return data


def _fingerprint(config: ProcessConfig) -> tuple[int, ...]:
    """What changes when a running process's configuration does (parts are replaced)."""
    return (id(config.health), id(config.budget), id(config.mission), id(config.secrets),
            id(config.servers), len(config.servers), id(config.triggers),
            len(config.triggers), id(config.model), id(config.journal))


def config_redactor(config: ProcessConfig) -> Redact | None:
    """Hides the credential values ``config`` holds wherever they turn up in text; None when
    it holds none."""
    key, fingerprint = id(config), _fingerprint(config)
    cached = _CACHE.get(key)
    if cached is not None and cached[0] is config and cached[1] == fingerprint:
        return cached[2]
    literal = literal_redactor(_shown(config)[1])
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    _CACHE[key] = (config, fingerprint, literal)
    return literal


def _compose(first: Redact | None, then: Redact | None) -> Redact:
    if first is None or then is None:
        chosen = first or then
        assert chosen is not None
        return chosen
    return lambda text: then(first(text))


def _redactor(process: AgentProcess) -> Redact | None:
    """None when there is nothing to hide: no secret scope, no credential in the config."""
    scope = process.config.secrets
    own = process.redact if scope.enabled and scope.secrets else None
    literal = config_redactor(process.config)
    return None if own is None and literal is None else _compose(own, literal)


def redactor(process: AgentProcess) -> Redact:
    """What every text about ``process`` goes through before it is shown."""
    return _redactor(process) or _as_is


def _as_is(text: str) -> str:
    return text


def shown_part(process: AgentProcess, data: dict[str, Any]) -> dict[str, Any]:
    """A part of the configuration (e.g. the health config after a patch), as shown."""
    shown: dict[str, Any] = redact_any(hide_credentials(data, set()), redactor(process))
    return shown


def redacted_event(process: AgentProcess, event: RuntimeEvent) -> RuntimeEvent:
    redact = _redactor(process)  # most processes hold no secret: their events pass as they are
    return event if redact is None else event.redacted(redact)


def redact_plan(process: AgentProcess, plan: RewindPlan) -> RewindPlan:
    """The plan's values (context before and after, dropped messages, outside effects)."""
    redact = redactor(process)
    return redacted_plan(plan, lambda value: redact_any(value, redact))


def redacted_result(process: AgentProcess, result: RewindResult) -> RewindResult:
    redact = redactor(process)
    return _redacted_result(result, lambda value: redact_any(value, redact))
