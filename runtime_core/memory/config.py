"""MemoryConfig: which long-term memory provider a process has and how the agent uses it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from runtime_core.strict import StrictModel

MemoryKind = Literal["none", "in_memory", "sqlite"]
#: The reference runtime's manifest spellings -> ours (both are accepted).
MEMORY_ALIASES = {"max": "inject_limit", "timeout": "inject_timeout"}


class MemoryConfig(StrictModel):
    """``provider: none`` (the default) keeps no long-term memory."""

    model_config = ConfigDict(allow_inf_nan=False)

    provider: MemoryKind = Field(default="none", description=(
        "none: no long-term memory; in_memory: lost when the process object goes; sqlite: a "
        "file that outlives restarts."))
    path: str | None = Field(default=None, description=(
        "sqlite only: the memory file; default: beside the journal, else "
        ".promptui/memory.db."))
    tools: bool = Field(default=True, description=(
        "Offer the agent remember, recall and forget tools."))
    auto_inject: bool = Field(default=False, description=(
        "Put the memories that best match the event in each run's prompt (needs a "
        "provider)."))
    inject_limit: Annotated[int, Field(ge=1, le=20, description=(
        "The most memories auto_inject puts in a prompt (also written max)."))] = 3
    min_score: Annotated[float, Field(ge=0, le=1, description=(
        "The least share of the query's words a memory must match to be injected."))] = 0.0
    # a slow store never stalls a run
    inject_timeout: Annotated[float, Field(gt=0, le=60, description=(
        "Seconds the search for auto_inject may take; past it the run goes on without "
        "(also written timeout)."))] = 5.0

    @model_validator(mode="before")
    @classmethod
    def _reference_spellings(cls, data: Any) -> Any:
        """A reference runtime manifest's ``memory:``: ``max`` and ``timeout`` are
        ``inject_limit`` and ``inject_timeout``; ``auto_store: false`` is what happens here (the
        agent stores with its remember tool), ``auto_store: true`` is not offered."""
        if not isinstance(data, Mapping) or not (set(MEMORY_ALIASES) | {"auto_store"}) & set(
                data):
            return data
        data = dict(data)
        for alias, canonical in MEMORY_ALIASES.items():
            if alias in data:
                if canonical in data:
                    raise ValueError(f"{alias} and {canonical} are two spellings of one field; "
                                     f"give only {canonical}")
                data[canonical] = data.pop(alias)
        if "auto_store" in data and data.pop("auto_store") is not False:
            raise ValueError("auto_store (storing every exchange) is not offered: the "
                                 "agent stores what matters with its remember tool; remove it")
        return data

    @property
    def enabled(self) -> bool:
        return self.provider != "none"

    @model_validator(mode="after")
    def _check_combination(self) -> MemoryConfig:
        if self.path is not None and self.provider != "sqlite":
            raise ValueError(f"memory.path applies to the sqlite provider, not {self.provider!r}")
        if self.auto_inject and self.provider == "none":
            raise ValueError("memory.auto_inject needs a provider: set memory.provider to "
                             "in_memory or sqlite")
        return self
