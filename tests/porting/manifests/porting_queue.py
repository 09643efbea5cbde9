"""A custom trigger type written against the reference runtime's protocol: a factory
``(config, *, event_bus=None, broker=None)`` registered with ``register_trigger_type``, returning a
trigger with ``trigger_id``, ``start()``, ``stop()`` and ``wait_for_next()``. Each ``*.json`` file
dropped in the spool folder is one job; it is renamed ``.taken`` once handed over."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from runtime_core import TriggerEvent, register_trigger_type


class SpoolQueueTrigger:
    def __init__(self, spool: str, poll_seconds: float) -> None:
        self.trigger_id = f"spool-{Path(spool).name}"
        self.spool = Path(spool)
        self.poll_seconds = poll_seconds
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        self.spool.mkdir(parents=True, exist_ok=True)
        self._stopped.clear()

    async def stop(self) -> None:
        self._stopped.set()

    async def wait_for_next(self) -> TriggerEvent:
        while not self._stopped.is_set():
            for job in sorted(self.spool.glob("*.json")):
                payload = json.loads(job.read_text(encoding="utf-8"))
                job.rename(job.with_suffix(".taken"))
                return TriggerEvent(self.trigger_id, "spool_queue", payload,
                                    metadata={"file": job.name})
            await asyncio.sleep(self.poll_seconds)
        raise asyncio.CancelledError


def _factory(config: Any, *, event_bus: Any = None, broker: Any = None) -> SpoolQueueTrigger:
    options = config.custom_config
    return SpoolQueueTrigger(str(options["spool"]), float(options.get("poll_seconds", 1.0)))


register_trigger_type("spool_queue", _factory, overwrite=True)
