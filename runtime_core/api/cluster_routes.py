"""The routes a scale-out node adds under ``/api/v1`` (``promptui serve --cluster``): the nodes
view and the webhooks it serves. Only a cluster node's app includes them, so a single runtime's
schema stays as it was."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from runtime_core.api.responses import READ, errors
from runtime_core.control.cluster import ClusterControl, NodeView

router = APIRouter(prefix="/api/v1")


@router.get("/cluster/nodes", summary="The cluster's nodes: address, heartbeat age, the "
            "processes each owns and their lease epochs", response_model=list[NodeView],
            responses=errors(*READ))
async def cluster_nodes(request: Request) -> list[NodeView]:
    control: ClusterControl = request.app.state.control
    return await control.cluster_nodes()


@router.get("/cluster/webhooks", summary="The webhooks this node serves for every process of "
            "the cluster (a standby puts an event for a process another node runs into its "
            "inbox), with their counts, and those it cannot serve", responses=errors(*READ))
async def cluster_webhooks(request: Request) -> dict[str, Any]:
    control: ClusterControl = request.app.state.control
    return control.cluster_webhooks()
