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
from typing import Any

from pydantic import BaseModel

GOAL_LIMIT = 2000


def config_digest(config: BaseModel) -> str:
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
