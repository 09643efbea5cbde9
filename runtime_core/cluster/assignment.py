"""Who should own which process: a pure function every node computes the same way.

``fair_share`` gives each live node a fair share of the processes (shares differ by at most one,
unless a node's ``max_processes`` caps it lower), leaves what exceeds the nodes' total capacity
unowned, and keeps current owners wherever it can, so a node joining or leaving moves as few
processes as possible. It depends only on its arguments, sorted, so every node that reads the
same nodes and leases reaches the same answer and the nodes never fight over a process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["NodeInfo", "fair_share", "quotas"]


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node as the cluster sees it: ``max_processes`` None = no cap; ``heartbeat_age_s`` is
    how long ago it last beat, by the database's clock."""

    node_id: str
    address: str = ""
    max_processes: int | None = None
    stopping: bool = False
    heartbeat_age_s: float = 0.0


def quotas(count: int, nodes: Sequence[NodeInfo], held: dict[str, int]) -> dict[str, int]:
    """How many of ``count`` processes each node gets: water-filling under the caps (every
    node gets ``level`` or its cap, whichever is lower), then the remainder one by one to the
    uncapped nodes that hold the most now (fewest moves), ties by node id."""
    caps = {n.node_id: count if n.max_processes is None else max(0, min(n.max_processes, count))
            for n in nodes}
    total = min(count, sum(caps.values()))
    level = _level(total, caps.values())
    share = {node: min(cap, level) for node, cap in caps.items()}
    remainder = total - sum(share.values())
    roomy = sorted((node for node, cap in caps.items() if cap > level),
                   key=lambda node: (-held.get(node, 0), node))
    for node in roomy[:remainder]:
        share[node] += 1
    return share


def _level(total: int, caps: Iterable[int]) -> int:
    """The largest level L with sum(min(cap, L)) <= total (binary search)."""
    caps = list(caps)
    low, high = 0, max(caps, default=0)
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(cap, mid) for cap in caps) <= total:
            low = mid
        else:
            high = mid - 1
    return low


def fair_share(processes: Sequence[str], nodes: Sequence[NodeInfo],
               owners: dict[str, str]) -> dict[str, str]:
    """The desired owner of each process (process -> node id); a process left out stays
    unowned (the nodes' caps are full).

    ``nodes`` are the live nodes (a stopping one gets nothing); ``owners`` maps a process to
    the node holding its live lease now (an owner that is not a live node counts as none).
    A process whose owner is live and within its share stays where it is; a node over its
    share gives up its last processes (by name), and the free ones fill the nodes with room,
    the emptiest first."""
    names = sorted(set(processes))
    live = sorted({n.node_id: n for n in nodes if not n.stopping}.values(),
                  key=lambda n: n.node_id)
    if not names or not live:
        return {}
    live_ids = {n.node_id for n in live}
    current = {p: owners[p] for p in names if owners.get(p) in live_ids}
    held: dict[str, int] = {}
    for node in current.values():
        held[node] = held.get(node, 0) + 1
    share = quotas(len(names), live, held)

    desired: dict[str, str] = {}
    count = dict.fromkeys(share, 0)
    free: list[str] = []
    for process in names:  # keep the current owner while it is within its share
        owner = current.get(process)
        if owner is not None and count[owner] < share[owner]:
            desired[process] = owner
            count[owner] += 1
        else:
            free.append(process)
    for process in free:  # then fill the nodes with room, the most room first
        room = [(share[n] - count[n], n) for n in share if count[n] < share[n]]
        if not room:
            break  # over capacity: the rest stay unowned
        emptiest = min(room, key=lambda item: (-item[0], item[1]))[1]
        desired[process] = emptiest
        count[emptiest] += 1
    return desired
