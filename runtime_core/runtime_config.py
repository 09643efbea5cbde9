"""RuntimeConfig: the reference runtime's config of a whole runtime (its processes by name),
for code written for it: ``AgentRuntime(RuntimeConfig(processes={...}))``."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from runtime_core.config import ProcessConfig
from runtime_core.strict import StrictModel

#: What the reference's ``distributed: {enabled: true}`` is here.
CLUSTER_HINT = ("the reference's distributed mode is promptui's cluster here: run the runtime "
                "as `promptui serve --cluster postgresql://...` on each node (see docs/porting.md)")


class RuntimeConfig(StrictModel):
    """The processes a runtime starts with, by name: ``AgentRuntime(RuntimeConfig(processes=
    {"watcher": ProcessConfig(...)}))`` adds each, not started. ``distributed`` is accepted
    only switched off (the reference's default); switched on, it is refused with what to run
    instead: scale-out here is ``promptui serve --cluster``."""

    processes: dict[str, ProcessConfig] = Field(default_factory=dict, description=(
        "The processes, by name."))
    distributed: dict[str, Any] = Field(default_factory=dict, description=(
        "The reference's distributed settings: accepted only with enabled false."))

    @field_validator("distributed")
    @classmethod
    def _no_distributed_mode(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("enabled"):
            raise ValueError(CLUSTER_HINT)
        return value

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-ready data."""
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RuntimeConfig:
        """A config from ``to_dict``'s form (validated)."""
        return cls.model_validate(data)
