"""The control plane of a scale-out node (``promptui serve --cluster``): LocalControl over the
processes this node runs, and the cluster around them.

Every process the manifests declare is listed, each with the node that owns it (``node``): the
ones that run here as LocalControl shows them; the others with the figures their owner
published on the cluster's status board (cluster/status_board.py: this node publishes its own
there), their owner from the leases and how old the figures are (control/cluster_figures.py).
An event injected for a process that runs on another node goes into its cluster inbox (the
owner takes it from there). Any other command or read of such a process is refused with
NOT_OWNER, naming the owner (the API forwards it to that node before it gets here:
api/cluster_forward.py).
``cluster_nodes`` is the nodes view: address, heartbeat age, the processes each holds and
their lease epochs.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg

from runtime_core.cluster.errors import describe
from runtime_core.cluster.host import ClusterHost
from runtime_core.cluster.leases import Lease
from runtime_core.cluster.nodes import NodeState, node_state
from runtime_core.cluster.status_board import Figures, Published, read_board
from runtime_core.control import local_views as views
from runtime_core.control.cluster_figures import (
    FiguresSeen,
    elsewhere_row,
    figures_of,
    needs_journal_state,
    published_status,
)
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
    #: live, stopping, stale (silent past the lease TTL) or gone (silent past the TTL and the
    #: grace: written off, pruned after a while; ``promptui nodes forget`` removes it now)
    state: NodeState = "live"


class ClusterControl(LocalControl):
    def __init__(self, runtime: AgentRuntime, host: ClusterHost, *, name: str = "cluster",
                 read_only: bool = False) -> None:
        super().__init__(runtime, name=name, read_only=read_only)
        self.host = host
        self._figures_seen = FiguresSeen()
        host.board.source = self._figures  # what this node publishes for the others' views

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

    def _figures(self) -> Figures:
        """The processes this node runs (or fails to start), for the status board."""
        held = {name: (owned.epoch, process) for name, owned in list(self.host.owned.items())
                if (process := self._shown(name)) is not None}
        return figures_of(held, self.host.node_id)

    async def _elsewhere_rows(self, names: list[str], leases: dict[str, Lease]
                              ) -> list[ProcessSummary]:
        """The rows of ``names``, which run on other nodes (or none): their published figures
        and, where those do not say it, the state their journal last recorded. One read,
        bounded by the connect timeout; the database down, the figures as last read."""
        if not names:
            return []
        published: dict[str, Published] | None = None
        states: dict[str, str] = {}
        try:
            async with asyncio.timeout(self.host.connect_timeout), \
                    self.host.reads.connection() as conn:
                with contextlib.suppress(psycopg.Error):  # no node published yet, say
                    published = await read_board(conn, names)
                    self._figures_seen.keep(published)
                shown = published if published is not None else self._figures_seen.aged(names)
                states = await last_states(conn, [n for n in names if needs_journal_state(
                    n, shown, leases)])
        except Exception:  # the database is down: what there is
            pass
        if published is None:
            published = self._figures_seen.aged(names)
        return [elsewhere_row(name, published.get(name), leases.get(name), states.get(name))
                for name in names]

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
        rows += await self._elsewhere_rows(elsewhere, leases)
        return sorted(rows, key=lambda row: row.name)

    async def process_status(self, name: str) -> dict[str, Any]:
        if self._shown(name) is None and name in self.host.manifests:
            leases = await self.host.owners()
            (row,) = await self._elsewhere_rows([name], leases)
            return published_status(row, leases.get(name))
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
        """Every registered node, live or not, with its state, how long since its last beat
        and the live leases it holds."""
        try:
            async with asyncio.timeout(self.host.connect_timeout):
                nodes = await self.host.registry.nodes()
        except Exception as exc:
            raise ControlError(f"the cluster's database ({self.host.shown}) cannot be read "
                               f"now: {exc}", "JOURNAL_UNAVAILABLE") from None
        held: dict[str, dict[str, int]] = {}
        for process, lease in (await self.host.owners()).items():
            held.setdefault(lease.node_id, {})[process] = lease.epoch
        ttl = self.host.ttl_s
        gone_after = self.host.node_aging.gone_after_s(ttl)
        return [NodeView(node_id=n.node_id, address=n.address,
                         heartbeat_age_s=round(n.heartbeat_age_s, 3),
                         live=not n.stopping and n.heartbeat_age_s < ttl,
                         stopping=n.stopping, max_processes=n.max_processes,
                         processes=dict(sorted(held.get(n.node_id, {}).items())),
                         this_node=n.node_id == self.host.node_id,
                         state=node_state(n, ttl, gone_after)) for n in nodes]

    async def forget_node(self, node_id: str) -> list[str]:
        """Remove ``node_id`` from the cluster's nodes and end the leases it still holds (the
        processes released, which live nodes take over); refused for a live node."""
        self._mutating("forget a node")
        if node_id == self.host.node_id:
            raise ControlError(f"node {node_id!r} is the node answering this request: it is "
                               "live; stop it (SIGTERM) and it leaves the cluster by itself",
                               "REFUSED")
        ttl = self.host.ttl_s
        try:
            async with asyncio.timeout(self.host.connect_timeout):
                found, released = await self.host.registry.forget(node_id, ttl)
        except Exception as exc:
            raise ControlError(f"the cluster's database ({self.host.shown}) cannot be "
                               f"written now: {describe(exc)}; nothing was forgotten: try "
                               "again shortly", "JOURNAL_UNAVAILABLE") from None
        if found == "unknown":
            raise ControlError(f"no node {node_id!r} is registered in the cluster ('promptui "
                               "nodes' lists them)", "NOT_FOUND")
        if found == "live":
            raise ControlError(
                f"node {node_id!r} is live (it beat within the lease TTL of {ttl:g} s): it "
                "cannot be forgotten while it runs; stop it (SIGTERM: it hands its processes "
                "over and leaves), or, if it is dead, try again once it has been silent for "
                f"{ttl:g} s", "REFUSED")
        if self.host.node is not None:
            self.host.node.kick()  # take its processes over now, not at the next round
        return released
