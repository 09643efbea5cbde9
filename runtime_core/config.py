"""ProcessConfig: every setting of a process. It composes the configs that each part of the
runtime owns (triggers, delivery, runs, journal, agent, governance, incidents, memory) and owns
none of them; unknown keys fail, so a typo never passes silently.

The parts' configs are importable from here too, as they always were."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import Field, field_validator

from runtime_core.agent.config import (
    ModelSetting,
    ProcessModelSetting,
    ToolDeclaration,
    is_model_object,
)
from runtime_core.agent.mcp.config import ServerConfig, normalise_server_entries
from runtime_core.agent.script import check_model_setting
from runtime_core.context import ContextConfig
from runtime_core.delivery.config import TriggerDeliveryConfig
from runtime_core.governance.config import (
    BudgetConfig,
    EscalationTarget,
    ExecutionMode,
    HealthConfig,
    InboxConfig,
    MissionConfig,
    OpenModeConfig,
    SecretScopeConfig,
    ToolCostAnnotation,
)
from runtime_core.governance.hooks_config import HookConfig
from runtime_core.incidents.config import IncidentConfig
from runtime_core.journal.config import JournalConfig
from runtime_core.memory.config import MemoryConfig
from runtime_core.runs.config import ProfileConfig, RunBudgetConfig
from runtime_core.strict import StrictModel
from runtime_core.triggers.config import (
    FILE_WATCH_CHANGES,
    TRIGGER_FIELDS,
    TRIGGER_TYPES,
    TriggerConfig,
)

__all__ = [
    "FILE_WATCH_CHANGES",
    "TRIGGER_FIELDS",
    "TRIGGER_TYPES",
    "BudgetConfig",
    "ContextConfig",
    "EscalationTarget",
    "ExecutionMode",
    "HealthConfig",
    "HookConfig",
    "InboxConfig",
    "IncidentConfig",
    "JournalConfig",
    "MemoryConfig",
    "MissionConfig",
    "ModelSetting",
    "OpenModeConfig",
    "ProcessConfig",
    "ProfileConfig",
    "RunBudgetConfig",
    "SecretScopeConfig",
    "StrictModel",
    "ToolCostAnnotation",
    "ToolDeclaration",
    "TriggerConfig",
    "TriggerDeliveryConfig",
]


class ProcessConfig(StrictModel):
    """Every setting of one process: its model, instructions, tools and MCP servers, its
    triggers, how it queues, runs, retries and restarts, its journal and its governance. A
    manifest becomes one (see the manifest reference); from Python, pass it to
    ``AgentProcess(name, config)`` or ``AgentRuntime.add_process``. Unknown keys fail."""

    # a declarative setting, or (from Python) a model object
    model: ProcessModelSetting = Field(default="echo", description=(
        "'echo' (offline: replies with a summary of the event), 'scripted:<file>', "
        "'openai:<model>', 'ollama:<model>', 'anthropic:<model>', a mapping (a scripted "
        "model inline, or a remote model's settings), or from Python a Model object."))
    instructions: str | None = Field(default=None, description=(
        "The system prompt every run starts from."))
    tools: list[str | ToolDeclaration] = Field(default_factory=list, description=(
        "Python tools: 'package.module:function', or a mapping with path, effect, name and "
        "description. A tool not declared read is treated as a write."))
    allowed_tools: list[str] | None = Field(default=None, description=(
        "The tool names the model may call (MCP tools included); a call of another is "
        "refused and the model told. Not set: every tool."))
    servers: dict[str, ServerConfig] = Field(default_factory=dict, description=(
        "MCP servers by name: {type: stdio, command, args, env} or {type: http, url}."))
    triggers: list[TriggerConfig] = Field(default_factory=list, description=(
        "What makes the process run: each trigger's events join one queue."))
    context: ContextConfig = Field(default_factory=ContextConfig, description=(
        "The context state and conversation kept between runs."))
    concurrency: Annotated[int, Field(ge=1, le=100, description=(
        "Runs at once; with 1 runs never overlap and events run in arrival order."))] = 1
    queue_size: Annotated[int, Field(ge=1, description=(
        "Events the queue holds; when full, a webhook answers 503 with Retry-After and an "
        "inject is dead-lettered (queue full)."))] = 1000
    heartbeat_interval: Annotated[float, Field(gt=0, description=(
        "Seconds between the checks of idle_timeout and max_lifetime."))] = 10.0
    idle_timeout: Annotated[float, Field(ge=0, description=(
        "Seconds without events after which the process suspends (reason idle; the next "
        "event wakes it); 0: never."))] = 0.0
    max_lifetime: Annotated[float, Field(ge=0, description=(
        "Seconds after which the process stops, or is recycled with restart_policy "
        "always; 0: no limit."))] = 0.0
    max_consecutive_failures: Annotated[int, Field(ge=1, description=(
        "Failed events in a row (after their retries) that put the process in FAILED."))] = 3
    restart_policy: Literal["never", "on_failure", "always"] = Field(default="never", description=(
        "What FAILED leads to: never (stays failed), on_failure (start again, up to "
        "max_restarts in a row), always (the same, and max_lifetime recycles)."))
    max_restarts: Annotated[int, Field(ge=0, description=(
        "Automatic restarts in a row; a successful run resets the count."))] = 3
    restart_backoff: Annotated[float, Field(ge=0, description=(
        "Seconds before the first restart; each further one in a row doubles it (at most "
        "60 s)."))] = 1.0
    # How long a stop lets the runs in flight finish (taking no new event) before it cancels
    # them. None: stop() cancels at once, and 'promptui serve'/'run' use --drain-timeout.
    drain_timeout: Annotated[float, Field(ge=0, le=3600)] | None = Field(default=None, description=(
        "Seconds a stop lets the runs in flight finish (taking no new event) before it "
        "cancels them; not set: stop() cancels at once, and 'promptui serve' and 'run' use "
        "their --drain-timeout."))
    trigger_delivery: TriggerDeliveryConfig = Field(
        default_factory=TriggerDeliveryConfig, description=(
            "Retries of failed runs, dead letters and the payload scan."))
    run_budget: RunBudgetConfig = Field(default_factory=RunBudgetConfig, description=(
        "Limits each run gets: seconds, model calls, tool calls, output."))
    # No journal section, no journal; a section with only a path journals at checkpoint level.
    journal: JournalConfig = Field(default_factory=lambda: JournalConfig(level="none"),
                                   description=(
        "Where and how much the process journals. From Python the default is no journal; "
        "a manifest without a journal section journals at checkpoint level in "
        ".promptui/journal.db."))
    health: HealthConfig = Field(default_factory=HealthConfig, description=(
        "Behavioral health: stuck, loops, empty replies, error rate."))
    budget: BudgetConfig = Field(default_factory=BudgetConfig, description=(
        "The autonomy budget: limits per run and per day."))
    secrets: SecretScopeConfig = Field(default_factory=SecretScopeConfig, description=(
        "Secrets for tools, never written anywhere."))
    hooks: list[HookConfig] = Field(default_factory=list, description=(
        "Hooks registered on process.hooks at its making: {event, callback: "
        "'module:function'} or {event, command: [program, args...]} (see Hooks)."))
    inbox: InboxConfig = Field(default_factory=InboxConfig, description=(
        "Operator messages and questions for the agent."))
    mission: MissionConfig = Field(default_factory=MissionConfig, description=(
        "A long-running goal and how it is judged."))
    # an incident lifecycle over webhook/event
    incidents: IncidentConfig | None = Field(default=None, description=(
        "An incident lifecycle over webhook and event triggers: one incident (and one run) "
        "per fingerprint while it is open."))
    memory: MemoryConfig = Field(default_factory=MemoryConfig, description=(
        "Long-term memory and the agent's tools for it."))
    # the versioned profile and its completion contract
    profile: ProfileConfig | None = Field(default=None, description=(
        "The versioned profile runs execute under, and its completion contract."))
    execution_mode: ExecutionMode = Field(default="strict", description=(
        "strict: the configuration is fixed; open: the agent may change its own triggers "
        "and instructions and spawn processes, within open_mode."))
    # limits in open mode
    open_mode: OpenModeConfig = Field(default_factory=OpenModeConfig, description=(
        "The limits of open mode."))

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: ProcessModelSetting) -> ProcessModelSetting:
        return check_model_setting(value)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        """A model object is shared by the copies (a fork runs the same object, as with
        ``AgentProcess(model=...)``): it may hold connections that cannot be copied."""
        memo = {} if memo is None else memo
        if is_model_object(self.model):
            memo.setdefault(id(self.model), self.model)
        return super().__deepcopy__(memo)

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
