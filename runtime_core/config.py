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
    model: ProcessModelSetting = "echo"  # a declarative setting, or (from Python) a model object
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
    # How long a stop lets the runs in flight finish (taking no new event) before it cancels
    # them. None: stop() cancels at once, and 'promptui serve'/'run' use --drain-timeout.
    drain_timeout: Annotated[float, Field(ge=0, le=3600)] | None = None
    trigger_delivery: TriggerDeliveryConfig = Field(default_factory=TriggerDeliveryConfig)
    run_budget: RunBudgetConfig = Field(default_factory=RunBudgetConfig)
    # No journal section, no journal; a section with only a path journals at checkpoint level.
    journal: JournalConfig = Field(default_factory=lambda: JournalConfig(level="none"))
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
