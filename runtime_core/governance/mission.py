"""The mission: a long-running goal, judged every ``eval_every`` successful runs.

Two judges: a programmatic success check (an expression over the context state, in the trigger
filter language) and, when no check is given, a model judge (``eval_model``) that reads the
evidence and answers achieved / confidence / reasoning. Success completes the mission (with
``auto_complete`` the process stops on purpose); a judge less confident than
``confidence_threshold`` pauses the mission and escalates; a timeout or an invocation limit fails
it. The state survives restarts through the process checkpoints."""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from runtime_core.clock import Clock
from runtime_core.governance.config import MissionConfig
from runtime_core.triggers.base import TriggerEvent

if TYPE_CHECKING:
    from runtime_core.triggers.filters.expression import EventFilter

MissionState = Literal["active", "completed", "failed", "paused"]
Outcome = Literal["complete", "failed", "progress", "paused"]
KEPT_EVALUATIONS = 20


@dataclass(frozen=True, slots=True)
class MissionEvaluation:
    achieved: bool
    confidence: float
    reasoning: str
    progress_summary: str = ""
    source: Literal["programmatic", "model"] = "programmatic"
    invocation: int = 0


class Mission:
    def __init__(self, config: MissionConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.state: MissionState = "active"
        self.invocations = 0
        self.started = clock.time()
        self.reason = ""
        self.evaluations: deque[MissionEvaluation] = deque(maxlen=KEPT_EVALUATIONS)
        from runtime_core.triggers.filters.expression import compile_state_check

        self._check: EventFilter | None = (
            compile_state_check(config.success_check) if config.success_check else None)

    @property
    def uses_model_judge(self) -> bool:
        return self._check is None and bool(self.config.eval_model)

    def count_run(self) -> bool:
        """Count a successful run; True when an evaluation is due now."""
        if self.state != "active":
            return False
        self.invocations += 1
        judged = self._check is not None or self.uses_model_judge
        return judged and self.invocations % self.config.eval_every == 0

    def check_state(self, context_state: dict[str, Any]) -> MissionEvaluation:
        assert self._check is not None
        achieved = self._check.matches(TriggerEvent("mission", "state", context_state))
        return MissionEvaluation(
            achieved, 1.0, f"success check {'passed' if achieved else 'not met'}: "
            f"{self.config.success_check}", invocation=self.invocations)

    def apply(self, evaluation: MissionEvaluation | None) -> Outcome | None:
        """Fold an evaluation (or none) into the state; returns what changed, None if nothing."""
        if self.state != "active":
            return None
        if evaluation is not None:
            self.evaluations.append(evaluation)
            if evaluation.achieved:
                self.state, self.reason = "completed", evaluation.reasoning
                return "complete"
            if evaluation.source == "model" \
                    and evaluation.confidence < self.config.confidence_threshold:
                self.state = "paused"
                self.reason = (f"judge confidence {evaluation.confidence:.2f} is below "
                               f"{self.config.confidence_threshold:.2f}: {evaluation.reasoning}")
                return "paused"
        return self.check_limits() or "progress"

    def check_limits(self) -> Outcome | None:
        cfg = self.config
        if cfg.timeout_hours and self.clock.time() - self.started >= cfg.timeout_hours * 3600:
            self.state, self.reason = "failed", f"timed out after {cfg.timeout_hours:g} h"
            return "failed"
        if cfg.max_invocations and self.invocations >= cfg.max_invocations:
            self.state = "failed"
            self.reason = f"not achieved within {cfg.max_invocations} runs"
            return "failed"
        return None

    def resume(self) -> None:
        if self.state != "paused":
            raise ValueError(f"the mission is {self.state}, not paused; nothing to resume")
        self.state, self.reason = "active", ""

    def fail(self, reason: str) -> None:
        if self.state in ("completed", "failed"):
            raise ValueError(f"the mission is already {self.state}")
        self.state, self.reason = "failed", reason or "failed by the operator"

    def prompt_line(self) -> str:
        parts = [f"[Mission] Objective: {self.config.objective}"]
        if self.config.success_criteria:
            parts.append(f"Success criteria: {self.config.success_criteria}")
        parts.append(f"Status: {self.state}, {self.invocations} runs so far")
        if self.evaluations:
            last = self.evaluations[-1]
            parts.append(f"Last evaluation: confidence {last.confidence:.2f}, "
                         f"{last.progress_summary or last.reasoning}"[:240])
        return " | ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "invocations": self.invocations,
                "started": self.started, "reason": self.reason,
                "evaluations": [asdict(e) for e in self.evaluations]}

    def restore(self, data: dict[str, Any]) -> None:
        state = data.get("state")
        if state in ("active", "completed", "failed", "paused"):
            self.state = state
        self.invocations = int(data.get("invocations") or 0)
        self.started = float(data.get("started") or self.started)
        self.reason = str(data.get("reason") or "")
        for item in data.get("evaluations") or []:
            if isinstance(item, dict):
                try:
                    self.evaluations.append(MissionEvaluation(**item))
                except TypeError:  # a checkpoint from another version: skip that record
                    continue
