"""Behavioral health as a part: the monitor sees each run's tool calls, its reply and its
outcome, and acts on an anomaly (log, pause, escalate, stop). Its history survives restarts
through checkpoints; ``enabled`` can be switched on or off on a running process."""

from __future__ import annotations

from typing import Any

from runtime_core.governance.health import HealthMonitor
from runtime_core.governance.health_actions import HealthKeeper
from runtime_core.process.core import Part, PartStatus, ProcessCore
from runtime_core.process.parts.actions import PartActions
from runtime_core.runs.run import Run, RunState


class HealthPart(Part):
    """The health monitor and its keeper, which pauses, stops or escalates through the
    process's ports (``PartActions``)."""

    key = "health"

    def __init__(self, core: ProcessCore, actions: PartActions) -> None:
        self.core = core
        monitor = HealthMonitor(core.config.health, process_id=core.name, clock=core.clock)
        self.keeper = HealthKeeper(core.name, core.process_id, monitor, core.notifier,
                                   pause=lambda: actions.control.pause("health"),
                                   stop=actions.control.stop_on_purpose,
                                   escalate=actions.escalations.send)

    @property
    def monitor(self) -> HealthMonitor:
        return self.keeper.monitor

    def anomaly_dicts(self) -> list[dict[str, Any]]:
        """The anomaly history, oldest first, as dicts."""
        return [anomaly.to_dict() for anomaly in self.monitor.anomalies]

    def report(self, into: PartStatus) -> None:
        into.health_anomalies = len(self.monitor.anomalies)
        into.health = self.monitor.health_status()

    def snapshot(self) -> dict[str, Any]:  # a restart must not forget a stuck agent's history
        return self.monitor.to_dict()

    def restore(self, saved: dict[str, Any]) -> bool:
        self.keeper.monitor = HealthMonitor.from_dict(saved, self.core.config.health,
                                                      process_id=self.core.name,
                                                      clock=self.core.clock)
        return True

    def run_started(self, run: Run) -> None:
        self.keeper.begin_run()

    async def tool_call(self, name: str, args: dict[str, Any]) -> None:
        await self.keeper.tool_call(name, args)

    async def after_run(self, run: Run) -> None:
        if run.state is RunState.SUCCEEDED:
            await self.keeper.run_succeeded(run.reply)
        elif run.attempt > self.core.config.trigger_delivery.max_retries:  # retries used up
            await self.keeper.run_failed()
        else:
            await self.keeper.act()

