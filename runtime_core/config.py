"""Pydantic models for every process setting. Unknown keys fail, so a typo never passes silently."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from runtime_core.agent.mcp_config import ServerConfig, normalise_server_entries
from runtime_core.agent.script import RemoteModelSpec, ScriptedModelSpec, check_model_setting
from runtime_core.completion import ProfileConfig
from runtime_core.governance.budget import BudgetConfig
from runtime_core.governance.health import HealthConfig
from runtime_core.governance.inbox import InboxConfig
from runtime_core.governance.mission import MissionConfig
from runtime_core.governance.secrets import SecretScopeConfig
from runtime_core.incidents import IncidentConfig
from runtime_core.memory.config import MemoryConfig
from runtime_core.open_mode import ExecutionMode, OpenModeConfig


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class TriggerDeliveryConfig(StrictModel):
    """How a failed run is retried and how many dead letters are kept."""

    max_retries: Annotated[int, Field(ge=0, le=10)] = 0
    retry_backoff: Annotated[float, Field(gt=0)] = 2.0
    retry_backoff_max: Annotated[float, Field(gt=0)] = 60.0
    dead_letter_size: Annotated[int, Field(ge=0)] = 100
    scan_payloads: bool = False  # dead-letter payloads that look like prompt injection
    max_payload_chars: Annotated[int, Field(ge=200)] = 20_000


class ContextConfig(StrictModel):
    writable_keys: list[str] = Field(default_factory=list)
    initial_state: dict[str, Any] = Field(default_factory=dict)
    conversation_history: bool = True
    conversation_max_messages: Annotated[int, Field(ge=0)] = 100
    conversation_clear_on_stop: bool = False


class RunBudgetConfig(StrictModel):
    """Per-run limits, each checked on its own. ``None`` means unlimited."""

    max_seconds: Annotated[float, Field(gt=0)] | None = 300.0
    max_model_calls: Annotated[int, Field(ge=1)] | None = 25
    max_tool_calls: Annotated[int, Field(ge=0)] | None = 50
    max_output_chars: Annotated[int, Field(ge=1)] | None = 100_000


class ToolDeclaration(StrictModel):
    """A Python tool named by import path, e.g. ``"mypkg.tools:lookup"``."""

    path: str
    name: str | None = None
    description: str | None = None
    effect: Literal["read", "write"] = "write"

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        module, sep, attr = value.partition(":")
        if not sep or not module or not attr:
            raise ValueError(
                f"tool path {value!r} must look like 'package.module:function'"
            )
        return value


TRIGGER_TYPES = ("cron", "interval", "webhook", "file_watch", "event", "message", "manual")
FILE_WATCH_CHANGES = ("added", "modified", "deleted")

#: Which fields each trigger type uses (besides type and filter_expression).
TRIGGER_FIELDS: dict[str, tuple[str, ...]] = {
    "cron": ("cron_expression", "timezone"),
    "interval": ("seconds",),
    "webhook": ("webhook_path", "webhook_port", "webhook_host", "hmac_secret",
                "signature_tolerance", "max_body_bytes"),
    "file_watch": ("watch_path", "patterns", "recursive", "debounce", "watch_events"),
    "event": ("event_type", "event_source"),
    "message": ("topic",),
    "manual": (),
}
_REQUIRED = {"cron": "cron_expression", "interval": "seconds", "file_watch": "watch_path",
             "event": "event_type", "message": "topic"}


class TriggerConfig(StrictModel):
    """One trigger. Only the fields of the trigger type named in ``type`` may be set."""

    type: str
    filter_expression: str | None = None
    # cron
    cron_expression: str | None = None
    timezone: str | None = None
    # interval
    seconds: Annotated[float, Field(gt=0)] | None = None
    # webhook
    webhook_path: str = "/webhook"
    webhook_port: Annotated[int, Field(ge=0, le=65535)] = 9090
    webhook_host: str = "127.0.0.1"
    hmac_secret: SecretStr | None = None
    signature_tolerance: Annotated[int, Field(gt=0)] = 300
    max_body_bytes: Annotated[int, Field(gt=0)] = 1_048_576
    # file_watch
    watch_path: str | None = None
    patterns: list[str] = Field(default_factory=lambda: ["*"])
    recursive: bool = True
    debounce: Annotated[float, Field(ge=0)] = 0.5
    watch_events: list[str] = Field(default_factory=lambda: list(FILE_WATCH_CHANGES))
    # event / message
    event_type: str | None = None
    event_source: str | None = None
    topic: str | None = None

    @model_validator(mode="after")
    def _check_type_and_fields(self) -> TriggerConfig:
        if self.type not in TRIGGER_TYPES:
            raise ValueError(
                f"unknown trigger type {self.type!r}; choose from {', '.join(TRIGGER_TYPES)}"
            )
        allowed = set(TRIGGER_FIELDS[self.type]) | {"type", "filter_expression"}
        stray = sorted(set(self.model_fields_set) - allowed)
        if stray:
            valid = ", ".join(sorted(allowed))
            raise ValueError(
                f"{', '.join(stray)} does not apply to a '{self.type}' trigger "
                f"(its fields: {valid})"
            )
        needed = _REQUIRED.get(self.type)
        if needed is not None and getattr(self, needed) is None:
            raise ValueError(f"a '{self.type}' trigger needs '{needed}'")
        if self.type == "webhook" and not self.webhook_path.startswith("/"):
            raise ValueError(f"webhook_path must start with '/', got {self.webhook_path!r}")
        unknown = sorted(set(self.watch_events) - set(FILE_WATCH_CHANGES))
        if unknown:
            raise ValueError(
                f"unknown watch_events {unknown}; choose from {list(FILE_WATCH_CHANGES)}"
            )
        for hook in _TRIGGER_VALIDATORS:
            hook(self)
        return self


#: Extra checks registered by the trigger modules (cron syntax, filter syntax, ...), run when a
#: config loads so a mistake is reported with the manifest, not when the trigger fires.
_TRIGGER_VALIDATORS: list[Callable[[TriggerConfig], None]] = []


def register_trigger_validator(check: Callable[[TriggerConfig], None]) -> None:
    _TRIGGER_VALIDATORS.append(check)


class JournalConfig(StrictModel):
    """Where and how much a process journals. ``none`` (the default) keeps no journal."""

    level: Literal["none", "checkpoint", "full"] = "none"
    backend: Literal["sqlite", "memory"] = "sqlite"
    path: str = ".promptui/journal.db"
    recover_on_start: bool | Literal["strict"] = True


ModelSetting = str | ScriptedModelSpec | RemoteModelSpec



class ProcessConfig(StrictModel):
    model: ModelSetting = "echo"
    instructions: str | None = None
    tools: list[str | ToolDeclaration] = Field(default_factory=list)
    allowed_tools: list[str] | None = None
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    triggers: list[TriggerConfig] = Field(default_factory=list)
    context: ContextConfig = Field(default_factory=ContextConfig)
    concurrency: Annotated[int, Field(ge=1, le=100)] = 1
    queue_size: Annotated[int, Field(ge=1)] = 1000
    heartbeat_interval: Annotated[float, Field(gt=0)] = 10.0
    idle_timeout: Annotated[float, Field(ge=0)] = 0.0
    max_lifetime: Annotated[float, Field(ge=0)] = 0.0
    max_consecutive_failures: Annotated[int, Field(ge=1)] = 3
    restart_policy: Literal["never", "on_failure", "always"] = "never"
    max_restarts: Annotated[int, Field(ge=0)] = 3
    restart_backoff: Annotated[float, Field(ge=0)] = 1.0
    trigger_delivery: TriggerDeliveryConfig = Field(default_factory=TriggerDeliveryConfig)
    run_budget: RunBudgetConfig = Field(default_factory=RunBudgetConfig)
    journal: JournalConfig = Field(default_factory=JournalConfig)
    health: HealthConfig = Field(default_factory=HealthConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    secrets: SecretScopeConfig = Field(default_factory=SecretScopeConfig)
    inbox: InboxConfig = Field(default_factory=InboxConfig)
    mission: MissionConfig = Field(default_factory=MissionConfig)
    incidents: IncidentConfig | None = None  # an incident lifecycle over webhook/event
    memory: MemoryConfig = Field(default_factory=MemoryConfig)  # long-term memory
    profile: ProfileConfig | None = None  # the versioned profile and its completion contract
    execution_mode: ExecutionMode = "strict"
    open_mode: OpenModeConfig = Field(default_factory=OpenModeConfig)  # limits in open mode

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: ModelSetting) -> ModelSetting:
        return check_model_setting(value)

    @field_validator("servers", mode="before")
    @classmethod
    def _server_types(cls, value: Any) -> Any:
        return normalise_server_entries(value)

    @field_validator("tools", mode="before")
    @classmethod
    def _tools_from_paths(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"path": item} if isinstance(item, str) else item for item in value]
        return value
