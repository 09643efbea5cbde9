"""``GET /metrics``: the runtime's metrics in the Prometheus text format (api/metrics.py),
behind the API's bearer token like every route but the health check. Outside ``/api/v1`` and
its OpenAPI document (where scrapers look for it; docs/operations/metrics.md describes it)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import Response

from runtime_core.api.metrics import Metrics

router = APIRouter()


@router.get("/metrics", include_in_schema=False, response_class=Response)
async def metrics(request: Request) -> Response:
    """What a Prometheus scrape reads (send ``Authorization: Bearer <token>``)."""
    registry: Metrics = request.app.state.metrics
    return Response(registry.exposition(), media_type=CONTENT_TYPE_LATEST)
