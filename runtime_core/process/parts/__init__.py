"""The optional features of a process, each one ``Part`` (see process/core.py): budget,
mission, health, inbox, incidents, long-term memory and secrets. ``build_parts`` makes the
enabled ones, in the order the process visits them; ``put_part``, ``apply_governance`` and
``patch_health`` change them on a live process."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime_core.governance.config import HealthConfig
from runtime_core.governance.config_patch import apply_patch
from runtime_core.process.core import Part, ProcessCore
from runtime_core.process.parts.actions import PartActions
from runtime_core.process.parts.budget import BudgetPart
from runtime_core.process.parts.health import HealthPart
from runtime_core.process.parts.inbox import InboxPart
from runtime_core.process.parts.incidents import IncidentsPart
from runtime_core.process.parts.memory import MemoryPart
from runtime_core.process.parts.mission import MissionPart
from runtime_core.process.parts.secrets import SecretsPart

__all__ = ["BudgetPart", "HealthPart", "InboxPart", "IncidentsPart", "MemoryPart",
           "MissionPart", "PartActions", "SecretsPart", "apply_governance", "build_parts",
           "patch_health", "put_part"]

#: The order parts are visited in: after a run, health, budget and mission act on it in that
#: order; a run's prompt gets the budget left, the mission, then the inbox.
ORDER: tuple[type[Part], ...] = (SecretsPart, MemoryPart, IncidentsPart, HealthPart, BudgetPart,
                                 MissionPart, InboxPart)


def build_parts(core: ProcessCore, actions: PartActions) -> list[Part]:
    """The parts the config enables, in ``ORDER``; those that act on their process get
    ``actions``."""
    config = core.config
    parts: list[Part] = []
    if config.secrets.enabled:
        parts.append(SecretsPart(core))
    if config.memory.enabled:
        parts.append(MemoryPart(core))
    if config.incidents is not None and config.incidents.enabled:
        parts.append(IncidentsPart(core, config.incidents))
    if config.health.enabled:
        parts.append(HealthPart(core, actions))
    if config.budget.enabled:
        parts.append(BudgetPart(core, actions))
    if config.mission.enabled:
        parts.append(MissionPart(core, actions))
    if config.inbox.enabled:
        parts.append(InboxPart(core, actions))
    return parts


def put_part(core: ProcessCore, kind: type[Part], part: Part | None) -> None:
    """Add, replace or (with None) drop the part of ``kind``, keeping the visiting order."""
    kept = [p for p in core.parts if not isinstance(p, kind)]
    if part is not None:
        kept.append(part)
    core.parts[:] = sorted(kept, key=lambda p: next(
        i for i, k in enumerate(ORDER) if isinstance(p, k)))


#: What ``apply_governance`` takes: the spec's ``apply_governance_config`` sections.
GOVERNANCE_SECTIONS = ("budget", "health", "mission")
_GOVERNED: dict[str, type[BudgetPart] | type[HealthPart] | type[MissionPart]] = {
    "budget": BudgetPart, "health": HealthPart, "mission": MissionPart}


def apply_governance(core: ProcessCore, actions: PartActions, section: str) -> bool:
    """Make the process's part for ``section`` match ``core.config.<section>`` now (the spec's
    ``apply_governance_config``): enabled builds it, disabled drops it (with its history),
    new values of an enabled one apply from its next check, keeping what it counted (the
    budget its counters, the monitor its history, the mission its progress). Returns whether
    it is enabled; ValueError names the sections it takes."""
    if section not in GOVERNANCE_SECTIONS:
        known = ", ".join(repr(s) for s in GOVERNANCE_SECTIONS)
        raise ValueError(f"process {core.name!r}: unknown governance section {section!r}; "
                         f"use one of {known}")
    config = getattr(core.config, section)
    kind = _GOVERNED[section]
    part = core.part(kind)
    if not config.enabled:
        put_part(core, kind, None)
    elif part is None:
        put_part(core, kind, kind(core, actions))
    elif isinstance(part, HealthPart):
        part.monitor.apply_config(config)
    elif isinstance(part, BudgetPart):
        part.budget.config = config
    elif isinstance(part, MissionPart):
        part.apply_config(config)
    if section == "budget":  # the runs check it before each model and tool call
        budget = core.part(BudgetPart)
        core.autonomy = budget.budget if budget is not None else None
    services = core.executor.services if core.executor is not None else None
    if services is not None:  # the running start's runs: from their next call and prompt
        services.autonomy = core.autonomy
        services.prompt_lines = [p.prompt_line for p in core.parts]
    return bool(config.enabled)


def patch_health(core: ProcessCore, actions: PartActions, patch: Mapping[str, Any]
                 ) -> HealthConfig:
    """Apply a JSON merge patch to the process's health config (ConfigPatchError, changing
    nothing, on a bad one). ``enabled`` builds the monitor or drops it with its history;
    otherwise the running monitor takes the new config."""
    config = apply_patch(core.config.health, patch)
    core.config.health = config
    apply_governance(core, actions, "health")
    return config
