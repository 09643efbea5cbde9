"""The control plane of a scale-out node (``promptui serve --cluster``): LocalControl over the
processes this node runs, and the cluster around them.

Every process the manifests declare is listed, each with the node that owns it (``node``): the
ones that run here as LocalControl shows them; the others with the state their journal last
recorded and their owner from the leases. An event injected for a process that runs on another
node goes into its cluster inbox (the owner takes it from there). Any other command or read of
such a process is refused with NOT_OWNER, naming the owner (the API forwards it to that node
before it gets here: api/cluster_forward.py).
``cluster_nodes`` is the nodes view: address, heartbeat age, the processes each holds and
their lease epochs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any

from runtime_core.cluster.errors import describe
from runtime_core.cluster.host import ClusterHost
from runtime_core.cluster.leases import Lease
from runtime_core.control import local_views as views
from runtime_core.control.inject import KEY_PREFIX, check_idempotency_key
from runtime_core.control.local import LocalControl
from runtime_core.control.plane import ControlError, Injected
from runtime_core.control.views import ProcessSummary
from runtime_core.journal.postgres.schema import last_states
from runtime_core.process.process import AgentProcess
from runtime_core.runtime import AgentRuntime
from runtime_core.triggers.base import DELIVERY_KEY, TriggerEvent

__all__ = ["ClusterControl", "NodeView"]


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node of the cluster as an operator sees it."""

    node_id: str
    address: str  # its control API
    heartbeat_age_s: float  # by the database's clock
    live: bool  # beating within the lease TTL and not stopping: it may own processes
    stopping: bool
    max_processes: int | None
    processes: dict[str, int] = field(default_factory=dict)  # process -> its lease's epoch
    this_node: bool = False  # the node that answered


class ClusterControl(LocalControl):
    def __init__(self, runtime: AgentRuntime, host: ClusterHost, *, name: str = "cluster",
                 read_only: bool = False) -> None:
        super().__init__(runtime, name=name, read_only=read_only)
        self.host = host

    def _registered(self, name: str, process: AgentProcess | None) -> AgentProcess | None:
        """``process`` if it is still the runtime's ``name`` (not removed by a step-down)."""
        return process if process is not None and \
            self.runtime.processes.get(name) is process else None

    def _here(self, name: str) -> AgentProcess | None:
        return self._registered(name, self.host.runs_here(name))

    def _shown(self, name: str) -> AgentProcess | None:
        """The process to read here: running, or failing its starts (its FAILED state and
        error are what there is to see of it)."""
        failing = self.host.failing(name)
        return self._registered(
            name, failing[0] if failing is not None else self.host.runs_here(name))

    def _process(self, name: str) -> AgentProcess:
        process = self._here(name)
        if process is not None:
            return process
        if name in self.host.manifests:
            raise ControlError(self._elsewhere(name), "NOT_OWNER")
        return super()._process(name)  # a process added here otherwise (a fork), or unknown

    def _elsewhere(self, name: str) -> str:
        owner = self.host.node_of(name)
        failing = self.host.failing(name)
        if failing is not None:
            return (f"{name} did not start on this node ({failing[1]}); it is tried again "
                    "by itself, waiting longer each time")
        if owner == self.host.node_id:
            return f"{name} is starting on this node; try again shortly"
        if owner is None:
            return (f"{name} runs on no node right now (between owners: one takes it within "
                    f"the lease TTL of {self.host.ttl_s:g} s); try again shortly")
        return (f"{name} runs on node {owner!r}, not on this one ({self.host.node_id!r}): "
                "send the request to its node (GET /api/v1/cluster/nodes lists each "
                "node's address)")

    async def _inject(self, name: str, payload: dict[str, Any], trigger_type: str,
                      idempotency_key: str | None) -> Injected:
        """Here: as LocalControl does. Another node's process: into its cluster inbox, the
        event id once the row is committed (its owner runs it exactly once); a key already
        used (waiting in the inbox, or in the owner's journal) answers with the first id."""
        if self._here(name) is not None or name not in self.host.manifests:
            return await super()._inject(name, payload, trigger_type, idempotency_key)
        self._mutating("inject")
        if not isinstance(payload, dict):
            raise ControlError("the payload must be a JSON object, e.g. {\"task\": \"check\"}")
        event = TriggerEvent("operator", trigger_type, payload)
        if idempotency_key is not None:
            event.metadata[DELIVERY_KEY] = KEY_PREFIX + check_idempotency_key(idempotency_key)
        try:
            taken, held_as = await self.host.ingress.put_held(name, event)
        except Exception as exc:
            raise ControlError(f"{name} runs on another node and its cluster inbox cannot "
                               f"take the event now ({describe(exc)}); nothing was accepted: "
                               "try again shortly", "INBOX_UNAVAILABLE") from None
        return Injected(held_as, replayed=taken == "duplicate")

    async def _states(self, names: list[str]) -> dict[str, str]:
        if not names:
            return {}
        try:
            async with asyncio.timeout(self.host.connect_timeout), \
                    self.host.reads.connection() as conn:
                return await last_states(conn, names)
        except Exception:  # the database is down: the owners say enough
            return {}

    # -- reads -----------------------------------------------------------------------------
    async def runtime_info(self) -> dict[str, Any]:
        info = await super().runtime_info()
        info.update(process_count=len(set(self.host.manifests) | set(self.runtime.processes)),
                    node_id=self.host.node_id, cluster=self.host.shown)
        return info

    async def list_processes(self) -> list[ProcessSummary]:
        leases = await self.host.owners()
        rows, elsewhere = [], []
        for name in sorted(set(self.host.manifests) | set(self.runtime.processes)):
            process = self._shown(name) if name in self.host.manifests else \
                self.runtime.processes.get(name)
            if process is not None:
                rows.append(replace(views.summary(process), node=self.host.node_id))
            else:
                elsewhere.append(name)
        states = await self._states(elsewhere)
        rows += [_remote(name, states.get(name, "unknown"), leases.get(name))
                 for name in elsewhere]
        return sorted(rows, key=lambda row: row.name)

    async def process_status(self, name: str) -> dict[str, Any]:
        if self._shown(name) is None and name in self.host.manifests:
            lease = (await self.host.owners()).get(name)
            state = (await self._states([name])).get(name, "unknown")
            return {"name": name, "state": state, "node": None if lease is None else
                    lease.node_id, "epoch": None if lease is None else lease.epoch}
        failing = self.host.failing(name)
        process = self._shown(name)
        if failing is not None and process is not None:
            data = self._status_data(process)
            data["start_failure"] = failing[1]
        else:
            data = await super().process_status(name)
        data["node"] = self.host.node_id
        return data

    def cluster_webhooks(self) -> dict[str, Any]:
        """The webhooks this node serves for every process (cluster/webhooks.py: its standbys,
        whoever runs the process) and those it cannot serve, with why."""
        return {"node_id": self.host.node_id, "standbys": self.host.webhooks.status(),
                "skipped": list(self.host.webhooks.skipped)}

    async def cluster_nodes(self) -> list[NodeView]:
        """Every registered node, live or not, with the live leases each holds."""
        try:
            async with asyncio.timeout(self.host.connect_timeout):
                nodes = await self.host.registry.nodes()
        except Exception as exc:
            raise ControlError(f"the cluster's database ({self.host.shown}) cannot be read "
                               f"now: {exc}", "JOURNAL_UNAVAILABLE") from None
        held: dict[str, dict[str, int]] = {}
        for process, lease in (await self.host.owners()).items():
            held.setdefault(lease.node_id, {})[process] = lease.epoch
        return [NodeView(node_id=n.node_id, address=n.address,
                         heartbeat_age_s=round(n.heartbeat_age_s, 3),
                         live=not n.stopping and n.heartbeat_age_s < self.host.ttl_s,
                         stopping=n.stopping, max_processes=n.max_processes,
                         processes=dict(sorted(held.get(n.node_id, {}).items())),
                         this_node=n.node_id == self.host.node_id) for n in nodes]


def _remote(name: str, state: str, lease: Lease | None) -> ProcessSummary:
    """A process another node runs (or nobody, between owners): what the journal and the
    leases say of it."""
    return ProcessSummary(
        name=name, state=state, suspend_reason="", queue_depth=0, queue_capacity=0,
        active_runs=0, invocations=0, failure_streak=0, restarts=0, dead_letters=0,
        waiting_runs=0, pending_retries=0, health="off", budget_use=None, mission_state="",
        last_run_at=None, last_outcome="", node=None if lease is None else lease.node_id)
