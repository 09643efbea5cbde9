"""The mission as a part: every ``eval_every`` successful runs it is judged (a state check or a
model judge); achieved completes it (and stops the process on purpose with ``auto_complete``),
an unsure judge pauses it and escalates, a timeout or an invocation limit fails it."""

from __future__ import annotations

from typing import Any

from runtime_core.agent.factory import build_model
from runtime_core.agent.model import Model
from runtime_core.events import MissionComplete, MissionEvent, MissionFailed
from runtime_core.governance.config import MissionConfig
from runtime_core.governance.health import args_hash
from runtime_core.governance.mission import Mission, MissionEvaluation
from runtime_core.governance.mission_judge import build_evidence, judge
from runtime_core.process.core import Part, PartStatus, ProcessCore
from runtime_core.process.parts.actions import PartActions
from runtime_core.runs.run import Run, RunState


class MissionPart(Part):
    key = "mission"

    def __init__(self, core: ProcessCore, actions: PartActions) -> None:
        self.core = core
        self.actions = actions
        self.mission = Mission(core.config.mission, core.clock)
        self._judge: Model | None = None
        self._judge_calls = 0

    def apply_config(self, config: MissionConfig) -> None:
        """Judge by ``config`` from the next run on, keeping the mission's progress (its state,
        runs counted, start and evaluations)."""
        kept = self.mission.to_dict()
        self.mission = Mission(config, self.core.clock)
        self.mission.restore(kept)
        self._judge = None  # built again from the new eval_model when next needed

    def report(self, into: PartStatus) -> None:
        into.mission_state = self.mission.state

    def snapshot(self) -> dict[str, Any]:
        return self.mission.to_dict()

    def restore(self, saved: dict[str, Any]) -> bool:
        self.mission.restore(saved)
        return True

    def prompt_line(self) -> str | None:
        return self.mission.prompt_line()

    async def after_run(self, run: Run) -> None:
        if run.state is not RunState.SUCCEEDED:
            return
        mission = self.mission
        evaluation: MissionEvaluation | None = None
        if mission.count_run():
            if mission.uses_model_judge:
                evaluation = await self._judge_run(run)
            else:
                evaluation = mission.check_state(self.core.context.state_snapshot())
        outcome = mission.apply(evaluation)
        if outcome is None:
            return
        kind = {"complete": MissionComplete, "failed": MissionFailed}.get(outcome, MissionEvent)
        self.core.notifier.emit(kind(
            process=self.core.name, state=mission.state, invocations=mission.invocations,
            reason=mission.reason,
            confidence=evaluation.confidence if evaluation is not None else None))
        config = self.core.config.mission
        if outcome == "paused" and evaluation is not None:
            self.actions.escalations.send(config.escalation, {
                "type": "low_confidence", "process_id": self.core.process_id,
                "process_name": self.core.name, "confidence": evaluation.confidence,
                "reasoning": evaluation.reasoning})
        if (outcome == "complete" and config.auto_complete) or outcome == "failed":
            await self.actions.control.stop_on_purpose()  # a mission ended is not restarted

    async def _judge_run(self, run: Run) -> MissionEvaluation:
        core = self.core
        config = core.config.mission
        assert config.eval_model is not None
        if self._judge is None:
            self._judge = build_model(config.eval_model, base_dir=core.base_dir)
        tool_calls = [f"{step.name}({args_hash(step.args or {})[:8]})"
                      for step in run.steps if step.kind == "tool"]
        evidence = build_evidence(config, core.context.state_snapshot(), tool_calls, run.event,
                                  core.conversation.messages(), self.mission.invocations)
        evidence = core.redact(evidence)
        self._judge_calls += 1
        return await judge(self._judge, evidence, self.mission.invocations,
                           judged_before=self._judge_calls - 1)

    def resume(self) -> None:
        """Let a mission paused by an unsure judge be evaluated again."""
        self.mission.resume()
        self.core.notifier.emit(MissionEvent(process=self.core.name, state="active",
                                             invocations=self.mission.invocations,
                                             reason="resumed by the operator"))

    async def fail(self, reason: str) -> None:
        """Give up: the mission is marked failed (the caller stops the process)."""
        self.mission.fail(reason)
        self.core.notifier.emit(MissionFailed(process=self.core.name, state="failed",
                                              invocations=self.mission.invocations,
                                              reason=self.mission.reason))
