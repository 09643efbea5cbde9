"""What a process does with its health monitor around each run: feed it, announce anomalies
and recoveries, and act on ``on_anomaly`` once per anomaly."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from runtime_core.events import EventNotifier, HealthAnomaly, HealthRecovered
from runtime_core.governance.escalation import EscalationTarget
from runtime_core.governance.health import Anomaly, HealthMonitor

log = logging.getLogger(__name__)

Action = Callable[[], Awaitable[None]]
Escalate = Callable[[EscalationTarget | None, dict[str, Any]], None]


class HealthKeeper:
    def __init__(self, process: str, process_id: str, monitor: HealthMonitor,
                 notifier: EventNotifier, *, pause: Action, stop: Action,
                 escalate: Escalate) -> None:
        self.process = process
        self.process_id = process_id
        self.monitor = monitor
        self.notifier = notifier
        self._escalate_to = escalate
        self._pause = pause
        self._stop = stop

    def begin_run(self) -> None:
        self.monitor.begin_invocation()

    async def tool_call(self, name: str, args: dict[str, Any]) -> None:
        await self.monitor.record_tool_call(name, args)

    async def run_succeeded(self, reply: str) -> None:
        if await self.monitor.record_success():  # announced before this run's anomalies
            self.notifier.emit(HealthRecovered(process=self.process))
        await self.monitor.record_response(reply)
        await self.act()

    async def run_failed(self) -> None:
        """A run that used up its retries: high_error_rate is acted on right then."""
        await self.monitor.record_error()
        await self.act()

    async def act(self) -> None:
        """Announce every new anomaly, then act once on the latest (the run has ended)."""
        fresh = self.monitor.take_new_anomalies()
        for anomaly in fresh:
            self.notifier.emit(HealthAnomaly(process=self.process,
                                             anomaly_type=anomaly.anomaly_type.value,
                                             description=anomaly.description,
                                             details=dict(anomaly.details)))
        if not fresh:
            return
        latest = fresh[-1]
        action = self.monitor.config.on_anomaly
        log.warning("process %s: %s (%s)", self.process, latest.description, action)
        if action == "escalate":
            self._escalate(latest)
        if action in ("pause", "escalate"):
            await self._pause()
        elif action == "stop":
            await self._stop()

    def _escalate(self, anomaly: Anomaly) -> None:
        target = self.monitor.config.escalation
        if target is None:
            log.warning("process %s: on_anomaly is escalate but no escalation target is set; "
                        "suspending without notifying anyone", self.process)
            return
        self._escalate_to(target, {
            "type": "health_anomaly", "process_id": self.process_id,
            "process_name": self.process, "anomaly_type": anomaly.anomaly_type.value,
            "details": dict(anomaly.details)})
