"""Pydantic models for every process setting. Unknown keys fail, so a typo never passes silently."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runtime_core.agent.script import ScriptedModelSpec


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class TriggerDeliveryConfig(StrictModel):
    """How a failed run is retried and how many dead letters are kept."""

    max_retries: Annotated[int, Field(ge=0, le=10)] = 0
    retry_backoff: Annotated[float, Field(gt=0)] = 2.0
    retry_backoff_max: Annotated[float, Field(gt=0)] = 60.0
    dead_letter_size: Annotated[int, Field(ge=0)] = 100


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


TRIGGER_TYPES = ("interval", "event", "message")


class TriggerConfig(StrictModel):
    """One trigger. Fields apply to the trigger type named in ``type``."""

    type: str
    interval_seconds: Annotated[float, Field(gt=0)] | None = None
    event_type: str | None = None
    event_source: str | None = None
    topic: str | None = None
    custom_config: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_required(self) -> TriggerConfig:
        if self.type not in TRIGGER_TYPES:
            raise ValueError(
                f"unknown trigger type {self.type!r}; choose from {', '.join(TRIGGER_TYPES)}"
            )
        required = {"interval": "interval_seconds", "event": "event_type", "message": "topic"}
        needed = required.get(self.type)
        if needed is not None and getattr(self, needed) is None:
            raise ValueError(f"a '{self.type}' trigger needs '{needed}'")
        return self


class JournalConfig(StrictModel):
    """Where and how much a process journals. ``none`` (the default) keeps no journal."""

    level: Literal["none", "checkpoint", "full"] = "none"
    backend: Literal["sqlite", "memory"] = "sqlite"
    path: str = ".promptui/journal.db"
    recover_on_start: bool | Literal["strict"] = True


ModelSetting = str | ScriptedModelSpec

MODEL_STRING_HELP = (
    "use 'echo' (offline, replies with a summary of the event) or "
    "'scripted:<path to a YAML script>'"
)


class ProcessConfig(StrictModel):
    model: ModelSetting = "echo"
    instructions: str | None = None
    tools: list[str | ToolDeclaration] = Field(default_factory=list)
    allowed_tools: list[str] | None = None
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

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: ModelSetting) -> ModelSetting:
        if isinstance(value, str):
            provider, sep, rest = value.partition(":")
            if value == "echo":
                return value
            if provider == "scripted" and sep and rest.strip():
                return value
            raise ValueError(f"unknown model {value!r}: {MODEL_STRING_HELP}")
        return value

    @field_validator("tools", mode="before")
    @classmethod
    def _tools_from_paths(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"path": item} if isinstance(item, str) else item for item in value]
        return value
