"""The routes a scale-out node adds under ``/api/v1`` (``promptui serve --cluster``): the nodes
view. Only a cluster node's app includes them, so a single runtime's schema stays as it was."""

from __future__ import annotations

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
