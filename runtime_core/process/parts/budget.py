"""The autonomy budget as a part: a run the day's budget has no room for is dead-lettered
before it starts; after each run its warnings are announced and a limit reached is acted on
(pause, stop or escalate). Its counters survive restarts through checkpoints."""

from __future__ import annotations

from typing import Any

from runtime_core.delivery.dead_letters import DeadLetterReason
from runtime_core.events import BudgetExceeded, BudgetWarning
from runtime_core.governance.budget import Budget, BudgetViolation
from runtime_core.lifecycle import ProcessState as S
from runtime_core.process.core import Part, PartStatus, ProcessCore
from runtime_core.process.parts.actions import PartActions
from runtime_core.runs.run import Run
from runtime_core.triggers.base import TriggerEvent


class BudgetPart(Part):
    key = "budget"

    def __init__(self, core: ProcessCore, actions: PartActions) -> None:
        self.core = core
        self.actions = actions
        self.budget = Budget(core.config.budget, core.clock)
        core.autonomy = self.budget  # the runs check it before each model and tool call

    def report(self, into: PartStatus) -> None:
        into.budget = dict(self.budget.remaining())

    def snapshot(self) -> dict[str, Any]:  # a restart must not reset the day's spending
        return self.budget.to_dict()

    def restore(self, saved: dict[str, Any]) -> bool:
        self.budget.restore(saved)
        return True

    def prompt_line(self) -> str | None:
        return self.budget.prompt_line() if self.core.config.budget.inject_remaining else None

    async def refuse_run(self, event: TriggerEvent, attempt: int) -> bool:
        """The day's runs are used up: the event waits in the dead letters for redelivery."""
        if self.budget.begin_run() is None:
            return False
        violations, _ = self.budget.take()
        error = violations[0].message() if violations else "budget exceeded"
        self.core.delivery.dead_letter(event, DeadLetterReason.BUDGET_EXCEEDED, error, attempt)
        await self._act(violations)
        return True

    async def after_run(self, run: Run) -> None:
        violations, warnings = self.budget.take()
        for warning in warnings:
            self.core.notifier.emit(BudgetWarning(
                process=self.core.name, limit_type=warning.limit, limit=warning.limit_value,
                current=warning.current))
        await self._act(violations)

    async def _act(self, violations: list[BudgetViolation]) -> None:
        if not violations:
            return
        core = self.core
        first = violations[0]
        core.notifier.emit(BudgetExceeded(process=core.name, limit_type=first.limit,
                                          limit=first.limit_value, current=first.would_be,
                                          tool=first.tool))
        action = core.config.budget.on_exceeded
        if action == "escalate":
            self.actions.escalations.send(core.config.budget.escalation, {
                "type": "budget_violation", "process_id": core.process_id,
                "process_name": core.name, "violation": {
                    "limit_name": first.limit, "limit_value": first.limit_value,
                    "current_value": first.would_be, "tool_name": first.tool}})
        if action in ("pause", "escalate") and core.state is S.RUNNING:
            await self.actions.control.pause("budget")
        elif action == "stop":
            await self.actions.control.stop_on_purpose()
