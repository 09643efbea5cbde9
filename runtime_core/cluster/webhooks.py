"""A scale-out node serves every process's webhooks, not only those of the processes it runs.

A sender has one URL for a webhook and cannot know which node owns its process now, so every
node serves every webhook path of every manifest on its configured address. For a process this
node does not run, a *standby* :class:`WebhookTrigger` (the same config: path, port, signature
scheme and secrets, allowed sources, filter) checks the request exactly as the process's own
trigger would and puts the event into the process's cluster inbox in PostgreSQL: 202 only once
that row is committed, 503 with Retry-After when the database cannot take it. The owner's puller
journals and runs it. While this node runs the process its own trigger takes the path over (the
standby yields, the port stays open) and gives it back when the process stops here.

A redelivery or a replayed signature is recognised by its delivery key (``<path>#<delivery
id>`` or ``<path>#signature:...``, the same key the process's trigger gives it): by this
standby's memory, by the inbox while the row waits, and by the owner's journal once it took the
event (ClusterIngress.put_held reads its delivery index), each answering 200 ``duplicate`` with
the first event's id; also when the same delivery reaches the owner, or another node, at the
same moment (both hold the delivery key's lock while they decide: delivery_gate.py).

A webhook on port 0 is not served by a standby: its port is new each time and no sender could
know it; only the process's owner serves it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from runtime_core.cluster.inbox import PutResult
from runtime_core.manifest.loader import Manifest
from runtime_core.triggers.base import AcceptResult, TriggerEvent
from runtime_core.triggers.config import TriggerConfig
from runtime_core.triggers.filters.expression import EventFilter, compile_filter
from runtime_core.triggers.registry import trigger_id_for
from runtime_core.triggers.webhook.trigger import WebhookTrigger

__all__ = ["ClusterWebhooks", "PutEvent"]

log = logging.getLogger("runtime_core.cluster")

#: ``await put(process, event)``: the event is in the process's cluster inbox once it returns;
#: "accepted" or "duplicate", and the id it is held as (a duplicate: the first delivery's)
PutEvent = Callable[[str, TriggerEvent], Awaitable[tuple[PutResult, str]]]


class ClusterWebhooks:
    """The standby webhooks of every manifest's webhook triggers (port 0 apart)."""

    def __init__(self, manifests: list[Manifest], put: PutEvent) -> None:
        self._manifests = manifests
        self._put = put
        self.standbys: dict[tuple[str, str], WebhookTrigger] = {}  # (process, trigger id)
        self.skipped: list[str] = []  # why a webhook has no standby here

    async def start(self) -> None:
        """Serve every standby path. A path that cannot be served (its port taken by something
        else, a path two processes want) is logged and skipped: the process's owner still
        serves it."""
        for manifest in self._manifests:
            for config in manifest.config.triggers:
                if config.type == "webhook":
                    await self._serve(manifest.name, config)

    async def _serve(self, process: str, config: TriggerConfig) -> None:
        trigger_id = trigger_id_for(config)
        where = f"webhook {config.webhook_host}:{config.webhook_port}{config.webhook_path} " \
                f"of process {process}"
        if config.webhook_port == 0:
            self._skip(f"{where} is on port 0: only the node running {process} serves it; give "
                       "it a fixed webhook_port to reach it through any node")
            return
        event_filter = compile_filter(config.filter_expression) \
            if config.filter_expression else None
        trigger = WebhookTrigger(trigger_id, config)
        try:
            await trigger.start(self._accept_for(process, event_filter), standby=True)
        except (OSError, ValueError, RuntimeError) as exc:
            self._skip(f"{where} is not served by this node's standby: {exc}")
            return
        self.standbys[(process, trigger_id)] = trigger

    def _skip(self, why: str) -> None:
        self.skipped.append(why)
        log.warning("cluster: %s", why)

    def _accept_for(self, process: str, event_filter: EventFilter | None
                    ) -> Callable[[TriggerEvent], Awaitable[tuple[AcceptResult, str]]]:
        async def accept(event: TriggerEvent) -> tuple[AcceptResult, str]:
            if event_filter is not None and not event_filter.matches(event):
                return AcceptResult.FILTERED, "filtered"
            try:
                taken, held_as = await self._put(process, event)
            except Exception as exc:  # not taken: the sender keeps the event and retries
                log.warning("cluster: a webhook event for %s could not be put in its inbox: "
                            "%s", process, exc)
                return AcceptResult.UNAVAILABLE, "the cluster's database cannot take it now"
            if taken == "duplicate":
                return AcceptResult.DUPLICATE, held_as
            return AcceptResult.ACCEPTED, "accepted"

        return accept

    async def stop(self) -> None:
        standbys, self.standbys = list(self.standbys.values()), {}
        for trigger in standbys:
            with contextlib.suppress(Exception):
                await trigger.stop()

    def status(self) -> list[dict[str, Any]]:
        """Each standby: its process, and its trigger's status (address, counts)."""
        return [{"process": process, **trigger.status()}
                for (process, _), trigger in sorted(self.standbys.items())]
