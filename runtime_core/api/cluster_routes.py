"""The routes a scale-out node adds under ``/api/v1`` (``promptui serve --cluster``): the nodes
view and the webhooks it serves. Only a cluster node's app includes them, so a single runtime's
schema stays as it was."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from runtime_core.api.responses import COMMAND, READ, errors
from runtime_core.control.cluster import ClusterControl, NodeView

router = APIRouter(prefix="/api/v1")


@router.get("/cluster/nodes", summary="The cluster's nodes: state (live, stopping, stale, "
            "gone), address, heartbeat age, the processes each owns and their lease epochs",
            response_model=list[NodeView],
            responses=errors(*READ))
async def cluster_nodes(request: Request) -> list[NodeView]:
    control: ClusterControl = request.app.state.control
    return await control.cluster_nodes()


@router.delete("/cluster/nodes/{node_id}", summary="Forget a node that is not live (dead, or "
               "gone): it leaves the nodes list and the leases it still holds end, so live "
               "nodes take its processes over; a live node is refused (409 REFUSED)",
               responses=errors(*COMMAND))
async def forget_node(request: Request, node_id: str) -> dict[str, Any]:
    control: ClusterControl = request.app.state.control
    released = await control.forget_node(node_id)
    return {"node_id": node_id, "forgotten": True, "leases_ended": released}


@router.get("/cluster/webhooks", summary="The webhooks this node serves for every process of "
            "the cluster (a standby puts an event for a process another node runs into its "
            "inbox), with their counts, and those it cannot serve", responses=errors(*READ))
async def cluster_webhooks(request: Request) -> dict[str, Any]:
    control: ClusterControl = request.app.state.control
    return control.cluster_webhooks()
