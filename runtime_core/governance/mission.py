"""The mission: a long-running goal with a programmatic success check over the context state.

After every ``eval_every`` successful runs the check is evaluated; success completes the
mission (and, with ``auto_complete``, stops the process on purpose). A timeout or an invocation
limit fails it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, field_validator

from runtime_core.clock import Clock
from runtime_core.governance.health import _KeyCheckedModel
from runtime_core.triggers.base import TriggerEvent

if TYPE_CHECKING:
    from runtime_core.triggers.filters import EventFilter

MissionState = Literal["active", "completed", "failed", "paused"]


class MissionConfig(_KeyCheckedModel):
    enabled: bool = False
    objective: str = ""
    success_criteria: str = ""
    success_check: str | None = None  # e.g. "state.invoices_booked >= 10"
    eval_every: Annotated[int, Field(ge=1)] = 1
    timeout_hours: Annotated[float, Field(ge=0)] = 0.0  # 0: no timeout
    max_invocations: Annotated[int, Field(ge=0)] = 0  # 0: no limit
    auto_complete: bool = True

    @field_validator("success_check")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value:
            # Imported here: the filter module registers itself with runtime_core.config.
            from runtime_core.triggers.filters import compile_state_check

            compile_state_check(value)  # a FilterError (a ValueError) names the column
        return value


class Mission:
    def __init__(self, config: MissionConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.state: MissionState = "active"
        self.invocations = 0
        self.started = clock.time()
        self.reason = ""
        from runtime_core.triggers.filters import compile_state_check

        self._check: EventFilter | None = (
            compile_state_check(config.success_check) if config.success_check else None)

    def after_run(self, context_state: dict[str, Any]) -> str | None:
        """Count a successful run; returns "complete", "failed", "progress" or None."""
        if self.state != "active":
            return None
        self.invocations += 1
        if self._check is not None and self.invocations % self.config.eval_every == 0 \
                and self._check.matches(TriggerEvent("mission", "state", context_state)):
            self.state, self.reason = "completed", "success check passed"
            return "complete"
        return self.check_limits() or "progress"

    def check_limits(self) -> str | None:
        cfg = self.config
        if cfg.timeout_hours and self.clock.time() - self.started >= cfg.timeout_hours * 3600:
            self.state, self.reason = "failed", f"timed out after {cfg.timeout_hours:g} h"
            return "failed"
        if cfg.max_invocations and self.invocations >= cfg.max_invocations:
            self.state = "failed"
            self.reason = f"not achieved within {cfg.max_invocations} runs"
            return "failed"
        return None

    def prompt_line(self) -> str:
        parts = [f"[Mission] Objective: {self.config.objective}"]
        if self.config.success_criteria:
            parts.append(f"Success criteria: {self.config.success_criteria}")
        parts.append(f"Status: {self.state}, {self.invocations} runs so far")
        return " | ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "invocations": self.invocations,
                "started": self.started, "reason": self.reason}

    def restore(self, data: dict[str, Any]) -> None:
        state = data.get("state")
        if state in ("active", "completed", "failed", "paused"):
            self.state = state
        self.invocations = int(data.get("invocations") or 0)
        self.started = float(data.get("started") or self.started)
        self.reason = str(data.get("reason") or "")
