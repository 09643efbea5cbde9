"""AgentRuntime: many processes sharing one event bus, message broker, notifier and clock."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runtime_core.agent.model import Model
from runtime_core.bus import EventBus, MessageBroker
from runtime_core.clock import Clock, SystemClock
from runtime_core.config import ProcessConfig
from runtime_core.events import EventNotifier
from runtime_core.process import AgentProcess


class AgentRuntime:
    def __init__(
        self,
        *,
        event_bus: EventBus | None = None,
        broker: MessageBroker | None = None,
        event_notifier: EventNotifier | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.event_bus = event_bus or EventBus()
        self.broker = broker or MessageBroker()
        self.notifier = event_notifier or EventNotifier()
        self.clock: Clock = clock or SystemClock()
        self._processes: dict[str, AgentProcess] = {}

    @property
    def processes(self) -> dict[str, AgentProcess]:
        return dict(self._processes)

    def get_process(self, name: str) -> AgentProcess:
        try:
            return self._processes[name]
        except KeyError:
            known = ", ".join(sorted(self._processes)) or "none"
            raise KeyError(f"no process named {name!r} (processes: {known})") from None

    def add_process(
        self,
        name: str,
        config: ProcessConfig | dict[str, Any],
        *,
        model: Model | None = None,
        tools: Iterable[Any] | None = None,
        base_dir: str | Path | None = None,
        process_id: str | None = None,
    ) -> AgentProcess:
        if name in self._processes:
            raise ValueError(f"a process named {name!r} already exists")
        process = AgentProcess(
            name,
            config,
            process_id=process_id,
            event_bus=self.event_bus,
            broker=self.broker,
            runtime=self,
            event_notifier=self.notifier,
            model=model,
            tools=tools,
            clock=self.clock,
            base_dir=base_dir,
        )
        self._processes[name] = process
        return process

    async def remove_process(self, name: str) -> None:
        process = self.get_process(name)
        await process.close()
        del self._processes[name]

    async def start_all(self) -> None:
        """Start every process that is not already up; one that fails to start stays FAILED and
        does not stop the others. Raises the first failure after trying them all."""
        errors: list[BaseException] = []
        for process in list(self._processes.values()):
            if process.state.value in ("created", "stopped", "failed"):
                try:
                    await process.start()
                except Exception as exc:
                    errors.append(exc)
        if errors:
            raise errors[0]

    async def stop_all(self) -> None:
        await asyncio.gather(*(p.stop() for p in list(self._processes.values())))

    def list_processes(self) -> list[dict[str, Any]]:
        return [
            {"name": p.name, "state": p.state.value, "process_id": p.process_id}
            for p in self._processes.values()
        ]

    def status(self) -> dict[str, Any]:
        return {
            "process_count": len(self._processes),
            "processes": {name: p.status() for name, p in self._processes.items()},
        }

    async def __aenter__(self) -> AgentRuntime:
        await self.start_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop_all()
