"""The governance settings of a process: budget, health, mission, secrets, inbox, escalation and
the limits of open mode. Each is opt-in (``enabled``) and, as the spec asks, strict about unknown
keys in manifests and API patches and forgiving (a FutureWarning) in Python code."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator, model_validator

from runtime_core.agent.script import RemoteModelSpec, ScriptedModelSpec, check_model_setting
from runtime_core.strict import STRICT_KEYS_CONTEXT, KeyCheckedModel, StrictModel
from runtime_core.triggers.filters.expression import compile_state_check

__all__ = [
    "BUDGET_ALIASES",
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
#: The reference runtime's spellings of BudgetConfig fields -> promptui's (both accepted).
BUDGET_ALIASES = {"max_llm_turns_per_run": "max_model_calls_per_run"}

class EscalationTarget(KeyCheckedModel):
    """Where an escalation goes: ``webhook_url`` (a JSON POST) and/or ``event_type`` (an event
    on the runtime's bus)."""

    webhook_url: str | None = Field(default=None, description=(
        "An https:// URL the escalation is POSTed to as JSON. It must resolve to a public "
        "address unless allow_private is set; credentials go in headers, never in the URL."))
    event_type: str | None = Field(default=None, description=(
        "An event type the escalation is emitted as on the runtime's event bus (where an "
        "'event' trigger of another process can take it)."))
    headers: dict[str, str] = Field(default_factory=dict, description=(
        "Extra HTTP headers of the POST, e.g. Authorization; ${VAR} reads the environment."))
    # LAN receivers only; also the only way to use plain http://
    allow_private: bool = Field(default=False, description=(
        "Allow a webhook_url on a private or loopback address, and plain http:// (for a "
        "receiver on your own network)."))
    timeout: Annotated[float, Field(gt=0, le=120, description=(
        "Seconds the POST may take before it counts as failed."))] = 10.0

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
    """What one call of a tool costs against the autonomy budget: its weight toward
    ``max_cost_per_run`` and ``max_cost_per_day``, and whether it counts toward
    ``max_irreversible_per_run`` and ``max_irreversible_per_day``."""

    cost_weight: Annotated[float, Field(gt=0, description=(
        "What one call adds to the run's and the day's cost (max_cost_per_run, "
        "max_cost_per_day); a tool not listed in tool_costs weighs 1."))] = 1.0
    irreversible: bool = Field(default=False, description=(
        "The call cannot be undone (a payment, a deletion): it also counts toward "
        "max_irreversible_per_run and max_irreversible_per_day."))


class BudgetConfig(KeyCheckedModel):
    """The autonomy budget: limits per run and per day, checked before each call. A call that
    would go over a limit is not made (the model is told why, as the tool's result), and
    ``on_exceeded`` acts when the run ends. The day's counters survive restarts through the
    journal's checkpoints. Off unless ``enabled``; a limit left unset is no limit."""

    enabled: bool = Field(default=False, description="Enforce the limits below.")
    max_tool_calls_per_run: Annotated[int, Field(ge=1)] | None = Field(default=None, description=(
        "Tool calls one run may make; the call past it is not executed."))
    max_model_calls_per_run: Annotated[int, Field(ge=1)] | None = Field(default=None, description=(
        "Model calls one run may make."))
    max_cost_per_run: Annotated[float, Field(gt=0)] | None = Field(default=None, description=(
        "The run's total of the tools' cost_weight (see tool_costs)."))
    max_irreversible_per_run: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description=(
            "Calls of tools marked irreversible (tool_costs) one run may make; 0 forbids "
            "them."))
    max_runs_per_day: Annotated[int, Field(ge=1)] | None = Field(default=None, description=(
        "Runs a day; an event past it is dead-lettered (budget exceeded), ready to redeliver."))
    max_tool_calls_per_day: Annotated[int, Field(ge=1)] | None = Field(default=None, description=(
        "Tool calls a day, over all runs."))
    max_cost_per_day: Annotated[float, Field(gt=0)] | None = Field(default=None, description=(
        "The day's total of the tools' cost_weight (see tool_costs)."))
    max_irreversible_per_day: Annotated[int, Field(ge=0)] | None = Field(default=None, description=(
        "Calls of tools marked irreversible a day; 0 forbids them."))
    tool_costs: dict[str, ToolCostAnnotation] = Field(default_factory=dict, description=(
        "Tool name -> its cost: weight and whether it is irreversible."))
    on_exceeded: Literal["pause", "stop", "escalate"] = Field(default="pause", description=(
        "What a limit reached does when the run ends: pause (suspend, reason 'budget', until "
        "resumed), stop, or escalate (notify escalation, then suspend)."))
    escalation: EscalationTarget | None = Field(default=None, description=(
        "Where on_exceeded: escalate sends its notification."))
    inject_remaining: bool = Field(default=True, description=(
        "Tell the model what is left of each limit in every run's prompt "
        "('[Budget Remaining] ...')."))
    warning_threshold: Annotated[float, Field(gt=0, le=1, description=(
        "Share of a daily limit at which a budget warning event is emitted, once a day per "
        "limit."))] = 0.8
    daily_reset_hour_utc: Annotated[int, Field(ge=0, le=23, description=(
        "The hour (UTC) at which the day's counters start again."))] = 0

    @model_validator(mode="before")
    @classmethod
    def _limits_never_dropped(cls, data: Any, info: ValidationInfo) -> Any:
        """The reference's ``max_llm_turns_per_run`` is ``max_model_calls_per_run``; a limit
        this config does not know is an error even from Python (where another unknown key is
        only a FutureWarning): a budget cap must never disappear silently."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for old, new in BUDGET_ALIASES.items():
            if old in data:
                if new in data:
                    raise ValueError(f"give {new!r} or {old!r} (the reference runtime's "
                                     "spelling), not both")
                data[new] = data.pop(old)
        unknown = sorted(str(k) for k in data if str(k).startswith("max_")
                         and k not in cls.model_fields)
        strict = isinstance(info.context, dict) and info.context.get(STRICT_KEYS_CONTEXT)
        if unknown and not strict:  # strict (a manifest, a patch): refused as any unknown key
            limits = ", ".join(k for k in cls.model_fields if k.startswith("max_"))
            raise ValueError(f"unknown budget limit(s) {', '.join(unknown)}: a limit is never "
                             f"dropped; the limits are: {limits}")
        return data


WINDOW_MAX = 10_000


class HealthConfig(KeyCheckedModel):
    """Behavioral health settings; every field can change on a running process."""

    enabled: bool = Field(default=False, description="Enable health monitoring.")
    # The windows are kept in memory: bounded, so a typo cannot make the monitor allocate GBs.
    stuck_threshold: Annotated[int, Field(ge=2, le=WINDOW_MAX, description=(
        "Consecutive identical calls (same tool and arguments) in one run that count as "
        "stuck."))] = 3
    loop_window: Annotated[int, Field(ge=4, le=WINDOW_MAX, description=(
        "Recent tool calls of the run examined for a repeating sequence."))] = 20
    loop_min_repeats: Annotated[int, Field(ge=2, le=WINDOW_MAX, description=(
        "Back-to-back repeats of a sequence that count as a loop."))] = 2
    empty_threshold: Annotated[int, Field(ge=2, le=WINDOW_MAX, description=(
        "Consecutive trivial final replies that count as an anomaly."))] = 3
    empty_max_chars: Annotated[int, Field(ge=0, description=(
        "A final reply of at most this many characters (after stripping whitespace) is "
        "trivial; 0 counts only blank replies."))] = 10
    error_window: Annotated[int, Field(ge=2, le=WINDOW_MAX, description=(
        "Recent runs the error rate is computed over; checked once the window is full."))] = 10
    error_rate_threshold: Annotated[float, Field(gt=0, le=1, description=(
        "Error rate at or above which the anomaly fires."))] = 0.5
    on_anomaly: Literal["log", "pause", "escalate", "stop"] = Field(default="log", description=(
        "What an anomaly does when its run ends: log (an event only), pause (suspend, "
        "reason 'health', until resumed), escalate (notify escalation, then suspend) or "
        "stop."))
    cooldown: Annotated[float, Field(ge=0, description=(
        "Seconds before the same anomaly (same kind and evidence) is reported again; 0 "
        "reports every repeat."))] = 300.0
    escalation: EscalationTarget | None = Field(default=None, description=(
        "Where on_anomaly: escalate sends its notification."))


class InboxConfig(KeyCheckedModel):
    """The operator inbox: messages (``send_message``) and questions (``ask``) for the agent,
    shown in its next run's prompt; a question wakes it and waits for its ``ANSWER Q<n>:``.
    Off unless ``enabled``."""

    enabled: bool = Field(default=False, description="Accept messages and questions.")
    max_messages: Annotated[int, Field(ge=1, description=(
        "Messages held at once; a new one evicts the oldest of the lowest priority (critical "
        "ones last)."))] = 50
    max_message_length: Annotated[int, Field(ge=1, description=(
        "Characters kept of a message; the rest is cut."))] = 2000
    default_ttl: Annotated[float, Field(ge=0, description=(
        "Seconds a message lives when its sender gives no ttl; 0: no expiry."))] = 3600.0
    max_ttl: Annotated[float, Field(gt=0, description=(
        "The longest ttl a sender may ask for, in seconds."))] = 86400.0
    rate_limit_per_sender: Annotated[int, Field(ge=1, description=(
        "Messages one sender may send per hour."))] = 20


class MissionConfig(KeyCheckedModel):
    """A long-running goal, judged every ``eval_every`` successful runs by a check over the
    context state (``success_check``) or, without one, a model judge (``eval_model``).
    Achieved completes the mission; a timeout or the invocation limit fails it and stops the
    process. Its state survives restarts through the journal's checkpoints. Off unless
    ``enabled``."""

    enabled: bool = Field(default=False, description="Track and judge the mission.")
    objective: str = Field(default="", description=(
        "The goal, in words: shown to the agent in every run's prompt and to the judge."))
    success_criteria: str = Field(default="", description=(
        "What achieved looks like, in words: shown with the objective."))
    success_check: str | None = Field(default=None, description=(
        "An expression over the context state in the filter language, e.g. "
        "'state.invoices_booked >= 10': true means achieved (no model judge is asked)."))
    # The judge's model, a setting like ProcessConfig.model (e.g. "scripted:judge.yaml").
    eval_model: str | ScriptedModelSpec | RemoteModelSpec | None = Field(default=None, description=(
        "The judge's model when there is no success_check, written like the process's model "
        "(e.g. 'scripted:judge.yaml'); it answers achieved, confidence and reasoning."))
    confidence_threshold: Annotated[float, Field(ge=0, le=1, description=(
        "A judge less confident than this pauses the mission and escalates."))] = 0.7
    eval_every: Annotated[int, Field(ge=1, description=(
        "Judge after every this many successful runs."))] = 1
    timeout_hours: Annotated[float, Field(ge=0, description=(
        "Hours after which a mission not achieved fails; 0: no timeout."))] = 0.0
    max_invocations: Annotated[int, Field(ge=0, description=(
        "Runs after which a mission not achieved fails; 0: no limit."))] = 0
    auto_complete: bool = Field(default=True, description=(
        "Stop the process (on purpose: no restart) once the mission is achieved."))
    escalation: EscalationTarget | None = Field(default=None, description=(
        "Where a verdict less confident than confidence_threshold is escalated."))

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
    """Secrets for tools: resolved at start (a missing environment variable fails the start),
    handed to a tool that asks for one by name, revoked on stop, and never written anywhere:
    any occurrence in text bound for the journal, a log or the screen becomes
    ``[secret:name]``. Off unless ``enabled``."""

    enabled: bool = Field(default=False, description=(
        "Resolve the secrets at start; without it none is resolved."))
    secrets: dict[str, str] = Field(default_factory=dict, description=(
        "Secret name -> its value, normally '${ENV_VAR}' (read from the environment at "
        "start)."))
    default_ttl: Annotated[float, Field(gt=0)] | None = Field(default=None, description=(
        "Seconds a resolved secret stays usable; not set: until the process stops."))
    ttls: dict[str, Annotated[float, Field(gt=0)]] = Field(default_factory=dict, description=(
        "Secret name -> seconds it stays usable, overriding default_ttl for that secret."))
    revoke_on_stop: bool = Field(default=True, description=(
        "Forget the values on stop (they are resolved again at the next start)."))

    @model_validator(mode="after")
    def _ttls_name_secrets(self) -> SecretScopeConfig:
        unknown = sorted(set(self.ttls) - set(self.secrets))
        if unknown:
            raise ValueError(f"ttls names {', '.join(map(repr, unknown))}, not in secrets; the "
                             f"secrets are: {', '.join(self.secrets) or '(none)'}")
        return self


class OpenModeConfig(StrictModel):
    """The limits of open execution mode (``execution_mode: open``), where the agent may
    change its own triggers, spawn child processes and rewrite its instructions through
    meta-tools. Every such call is journaled and budgeted like any tool call; a refusal is an
    error the model reads, never a failed run."""

    allow_trigger_management: bool = Field(default=True, description=(
        "The agent may add and remove triggers of its own."))
    allowed_trigger_types: list[str] = Field(
        default_factory=lambda: ["interval", "cron", "event", "message"], description=(
            "The trigger types the agent may add (and give a process it spawns)."))
    max_dynamic_triggers: Annotated[int, Field(ge=0, le=100, description=(
        "Triggers the agent may have added at once."))] = 10
    # children run beside the parent: opt in
    allow_process_spawn: bool = Field(default=False, description=(
        "The agent may start child processes beside itself in the runtime."))
    max_spawned_processes: Annotated[int, Field(ge=0, le=50, description=(
        "Child processes the agent may have spawned."))] = 3
    allow_instruction_change: bool = Field(default=True, description=(
        "The agent may replace its own instructions (from its next run on)."))
    max_instruction_length: Annotated[int, Field(ge=100, description=(
        "The longest instructions the agent may write, in characters."))] = 10_000
