"""The governance settings of a process: budget, health, mission, secrets, inbox, escalation and
the limits of open mode. Each is opt-in (``enabled``) and, as the spec asks, strict about unknown
keys in manifests and API patches and forgiving (a FutureWarning) in Python code."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from runtime_core.agent.script import RemoteModelSpec, ScriptedModelSpec, check_model_setting
from runtime_core.strict import KeyCheckedModel, StrictModel
from runtime_core.triggers.filters.expression import compile_state_check

__all__ = [
    "WINDOW_MAX",
    "BudgetConfig",
    "EscalationTarget",
    "ExecutionMode",
    "HealthConfig",
    "InboxConfig",
    "MissionConfig",
    "OpenModeConfig",
    "SecretScopeConfig",
    "ToolCostAnnotation",
]

ExecutionMode = Literal["strict", "open"]

class EscalationTarget(KeyCheckedModel):
    """Where an escalation goes: ``webhook_url`` (a JSON POST) and/or ``event_type`` (an event
    on the runtime's bus)."""

    webhook_url: str | None = None
    event_type: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    allow_private: bool = False  # LAN receivers only; also the only way to use plain http://
    timeout: Annotated[float, Field(gt=0, le=120)] = 10.0

    @field_validator("webhook_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"webhook_url {value!r} must be an http:// or https:// URL "
                             "with a host name")
        if parts.username or parts.password:
            raise ValueError("webhook_url must not carry credentials; put them in headers "
                             "(e.g. Authorization) instead")
        return value

    @model_validator(mode="after")
    def _plain_http_needs_opt_in(self) -> EscalationTarget:
        # Plain http to the public internet would send anomaly details in clear text.
        if self.webhook_url and self.webhook_url.startswith("http://") and not self.allow_private:
            raise ValueError("webhook_url uses plain http://; use https:// or, for a receiver "
                             "on your own network, set allow_private: true")
        return self


class ToolCostAnnotation(KeyCheckedModel):
    cost_weight: Annotated[float, Field(gt=0)] = 1.0
    irreversible: bool = False


class BudgetConfig(KeyCheckedModel):
    enabled: bool = False
    max_tool_calls_per_run: Annotated[int, Field(ge=1)] | None = None
    max_model_calls_per_run: Annotated[int, Field(ge=1)] | None = None
    max_runs_per_day: Annotated[int, Field(ge=1)] | None = None
    max_tool_calls_per_day: Annotated[int, Field(ge=1)] | None = None
    max_cost_per_day: Annotated[float, Field(gt=0)] | None = None
    max_irreversible_per_day: Annotated[int, Field(ge=0)] | None = None
    tool_costs: dict[str, ToolCostAnnotation] = Field(default_factory=dict)
    on_exceeded: Literal["pause", "stop", "escalate"] = "pause"
    escalation: EscalationTarget | None = None
    inject_remaining: bool = True
    warning_threshold: Annotated[float, Field(gt=0, le=1)] = 0.8
    daily_reset_hour_utc: Annotated[int, Field(ge=0, le=23)] = 0


WINDOW_MAX = 10_000


class HealthConfig(KeyCheckedModel):
    """Behavioral health settings; every field can change on a running process."""

    enabled: bool = False
    # The windows are kept in memory: bounded, so a typo cannot make the monitor allocate GBs.
    stuck_threshold: Annotated[int, Field(ge=2, le=WINDOW_MAX)] = 3
    loop_window: Annotated[int, Field(ge=4, le=WINDOW_MAX)] = 20
    loop_min_repeats: Annotated[int, Field(ge=2, le=WINDOW_MAX)] = 2
    empty_threshold: Annotated[int, Field(ge=2, le=WINDOW_MAX)] = 3
    empty_max_chars: Annotated[int, Field(ge=0)] = 10
    error_window: Annotated[int, Field(ge=2, le=WINDOW_MAX)] = 10
    error_rate_threshold: Annotated[float, Field(gt=0, le=1)] = 0.5
    on_anomaly: Literal["log", "pause", "escalate", "stop"] = "log"
    cooldown: Annotated[float, Field(ge=0)] = 300.0
    escalation: EscalationTarget | None = None


class InboxConfig(KeyCheckedModel):
    enabled: bool = False
    max_messages: Annotated[int, Field(ge=1)] = 50
    max_message_length: Annotated[int, Field(ge=1)] = 2000
    default_ttl: Annotated[float, Field(ge=0)] = 3600.0  # 0: no expiry
    max_ttl: Annotated[float, Field(gt=0)] = 86400.0
    rate_limit_per_sender: Annotated[int, Field(ge=1)] = 20  # per hour


class MissionConfig(KeyCheckedModel):
    enabled: bool = False
    objective: str = ""
    success_criteria: str = ""
    success_check: str | None = None  # e.g. "state.invoices_booked >= 10"
    # The judge's model, a setting like ProcessConfig.model (e.g. "scripted:judge.yaml").
    eval_model: str | ScriptedModelSpec | RemoteModelSpec | None = None
    confidence_threshold: Annotated[float, Field(ge=0, le=1)] = 0.7
    eval_every: Annotated[int, Field(ge=1)] = 1
    timeout_hours: Annotated[float, Field(ge=0)] = 0.0  # 0: no timeout
    max_invocations: Annotated[int, Field(ge=0)] = 0  # 0: no limit
    auto_complete: bool = True
    escalation: EscalationTarget | None = None

    @field_validator("success_check")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value:
            compile_state_check(value)  # a FilterError (a ValueError) names the column
        return value

    @field_validator("eval_model")
    @classmethod
    def _known_model(cls, value: str | ScriptedModelSpec | RemoteModelSpec | None) -> Any:
        return None if value is None else check_model_setting(value)

    @model_validator(mode="after")
    def _judge_needs_an_objective(self) -> MissionConfig:
        if self.enabled and self.eval_model and not self.objective:
            raise ValueError("a mission judged by eval_model needs an objective to judge")
        return self


class SecretScopeConfig(KeyCheckedModel):
    enabled: bool = False
    secrets: dict[str, str] = Field(default_factory=dict)  # name -> value or "${ENV_VAR}"
    default_ttl: Annotated[float, Field(gt=0)] | None = None
    revoke_on_stop: bool = True


class OpenModeConfig(StrictModel):

    allow_trigger_management: bool = True
    allowed_trigger_types: list[str] = Field(
        default_factory=lambda: ["interval", "cron", "event", "message"])
    max_dynamic_triggers: Annotated[int, Field(ge=0, le=100)] = 10
    allow_process_spawn: bool = False  # children run beside the parent: opt in
    max_spawned_processes: Annotated[int, Field(ge=0, le=50)] = 3
    allow_instruction_change: bool = True
    max_instruction_length: Annotated[int, Field(ge=100)] = 10_000
