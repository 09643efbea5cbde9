"""The rows of the processes another node runs, as a scale-out node shows them: the figures
their owner published on the status board (cluster/status_board.py), the node that holds the
lease now, and how old the figures are. What this node publishes is made here too.

A process between owners keeps its last published figures, marked with no node; its state is
then the one its journal last recorded (a clean stop records it; the board stops publishing
first). A process nobody published yet is a row of zeros with ``figures_known`` False, so a
view can say so instead of showing zeros as counts.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from runtime_core.cluster.leases import Lease
from runtime_core.cluster.status_board import Figures, Published
from runtime_core.control import local_views as views
from runtime_core.control.views import ProcessSummary
from runtime_core.control.wire import dump, load
from runtime_core.process.process import AgentProcess

__all__ = ["FiguresSeen", "elsewhere_row", "figures_of", "needs_journal_state",
           "published_status", "unknown_row"]

#: status() keys of a process another node runs, from its published row's fields
STATUS_KEYS = {"state": "state", "suspend_reason": "suspend_reason",
               "queue_size": "queue_depth", "queue_capacity": "queue_capacity",
               "active_runs": "active_runs", "invocation_count": "invocations",
               "consecutive_failures": "failure_streak", "restart_count": "restarts",
               "dead_letter_count": "dead_letters", "dead_letter_total": "dead_letters",
               "waiting_runs": "waiting_runs",
               "pending_retries": "pending_retries", "mission_state": "mission_state",
               "journal_fault": "journal_fault"}


def figures_of(held: dict[str, tuple[int, AgentProcess]], node_id: str) -> Figures:
    """What a node publishes: for each process it runs (``held``: name -> (its lease's epoch,
    the process)), that epoch and its row as LocalControl shows it, as JSON data."""
    return {name: (epoch, dump(replace(views.summary(process), node=node_id)))
            for name, (epoch, process) in held.items()}


def unknown_row(name: str, state: str, node: str | None) -> ProcessSummary:
    """A process with no figures published (yet): its state from the journal, its owner from
    the leases, zeros standing in for its counts (``figures_known`` False)."""
    return ProcessSummary(
        name=name, state=state, suspend_reason="", queue_depth=0, queue_capacity=0,
        active_runs=0, invocations=0, failure_streak=0, restarts=0, dead_letters=0,
        waiting_runs=0, pending_retries=0, health="off", budget_use=None, mission_state="",
        last_run_at=None, last_outcome="", node=node, figures_known=False)


def elsewhere_row(name: str, published: Published | None, lease: Lease | None,
                  journal_state: str | None) -> ProcessSummary:
    """The row of ``name``, which runs on another node (``lease``) or on none: its published
    figures, ``node`` the lease's holder (None between owners), ``as_of_age_s`` how old the
    figures are. The state is the published one while its publisher holds the lease, else
    what the journal last recorded (when it recorded one)."""
    node = None if lease is None else lease.node_id
    if published is None:
        return unknown_row(name, journal_state or "unknown", node)
    try:
        row = load(ProcessSummary, published.summary)
    except (ValidationError, TypeError):  # a node of another version: shown as unknown
        return unknown_row(name, journal_state or "unknown", node)
    current = lease is not None and lease.node_id == published.node_id \
        and lease.epoch == published.epoch
    if not current and journal_state is not None and journal_state != row.state:
        row = replace(row, state=journal_state, suspend_reason="", draining=False)
    return replace(row, name=name, node=node, as_of_age_s=round(published.age_s, 1),
                   figures_known=True)


def needs_journal_state(name: str, published: dict[str, Published],
                        leases: dict[str, Lease]) -> bool:
    """Whether ``name``'s state must come from its journal: no figures, or figures not
    published under the lease held now."""
    row, lease = published.get(name), leases.get(name)
    return row is None or lease is None or (lease.node_id, lease.epoch) != (row.node_id,
                                                                            row.epoch)


def published_status(row: ProcessSummary, lease: Lease | None) -> dict[str, Any]:
    """The status of a process another node runs (or none), from its row: the status() keys
    its figures give, its node and epoch, and how old the figures are."""
    status: dict[str, Any] = {"name": row.name}
    status.update({key: getattr(row, field) for key, field in STATUS_KEYS.items()})
    status.update(node=row.node, epoch=None if lease is None else lease.epoch,
                  waiting=[dump(run) for run in row.waiting], as_of_age_s=row.as_of_age_s,
                  figures_known=row.figures_known)
    return status


class FiguresSeen:
    """The board's rows as last read, so a view degrades to them (older by the time since)
    while the database cannot be read."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[Published, float]] = {}

    def keep(self, found: dict[str, Published]) -> None:
        at = time.monotonic()
        self._rows.update({name: (row, at) for name, row in found.items()})

    def aged(self, names: list[str]) -> dict[str, Published]:
        now, found = time.monotonic(), {}
        for name in names:
            seen = self._rows.get(name)
            if seen is not None:
                row, at = seen
                found[name] = row._replace(age_s=row.age_s + now - at)
        return found
