"""What a run executes, frozen when it starts: the profile and its version, the goal, the policy
(the tools it may call and their effects), the configuration identity and the budget.

The configuration identity is a digest of the effective configuration, so a run resumed under a
different configuration is noticed and shown instead of silently continuing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime_core.agent.tools import AgentTool
    from runtime_core.config import ProcessConfig

GOAL_LIMIT = 2000


def config_digest(config: ProcessConfig) -> str:
    """A stable digest of the effective configuration (key order never matters)."""
    canonical = json.dumps(config.model_dump(mode="json"), sort_keys=True, default=str,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class RunIdentity:
    profile: str
    version: str
    goal: str
    policy: dict[str, Any] = field(default_factory=dict)
    config_digest: str = ""
    budget: dict[str, Any] = field(default_factory=dict)
    evaluator: str = "final_reply"

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "version": self.version, "goal": self.goal,
                "policy": self.policy, "config_digest": self.config_digest,
                "budget": self.budget, "evaluator": self.evaluator}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunIdentity:
        return cls(str(data.get("profile", "")), str(data.get("version", "")),
                   str(data.get("goal", "")), dict(data.get("policy") or {}),
                   str(data.get("config_digest", "")), dict(data.get("budget") or {}),
                   str(data.get("evaluator", "final_reply")))


@dataclass(frozen=True, slots=True)
class ProfileStamp:
    """Everything of the identity but the goal; computed once per start of the process."""

    profile: str
    version: str
    policy: dict[str, Any]
    config_digest: str
    budget: dict[str, Any]
    evaluator: str

    def for_goal(self, goal: str) -> RunIdentity:
        return RunIdentity(self.profile, self.version, goal[:GOAL_LIMIT], self.policy,
                           self.config_digest, self.budget, self.evaluator)


def profile_stamp(name: str, config: ProcessConfig, tools: Mapping[str, AgentTool]
                  ) -> ProfileStamp:
    digest = config_digest(config)
    profile = config.profile
    allowed = config.allowed_tools
    offered = {tool_name: tool.effect for tool_name, tool in sorted(tools.items())
               if allowed is None or tool_name in allowed}
    budget: dict[str, Any] = {k: v for k, v in config.run_budget.model_dump(mode="json").items()
                              if v is not None}
    if config.budget.enabled:
        budget.update({k: v for k, v in config.budget.model_dump(mode="json").items()
                       if k.endswith("_per_run") and v is not None})
    return ProfileStamp(
        profile=(profile.name if profile and profile.name else name),
        version=(profile.version if profile and profile.version else digest[:12]),
        policy={"allowed_tools": allowed, "tools": offered},
        config_digest=digest,
        budget=budget,
        evaluator=profile.completion.evaluator if profile else "final_reply",
    )
