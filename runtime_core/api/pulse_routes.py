"""The pulse read under ``/api/v1``: every process's (or one's) last hour by the minute, from
its journal (runs, failures, p50/p95 run time, tokens and recorded cost), grouped on the server
so an attached room gets a few numbers a minute, not the entries behind them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from runtime_core.api.responses import GUARDED, errors
from runtime_core.control.plane import ControlPlane
from runtime_core.control.pulse import BUCKET_SECONDS, WINDOW_SECONDS, PulseView

router = APIRouter(prefix="/api/v1")


@router.get("/pulse", response_model=list[PulseView], responses=errors(*GUARDED, 404))
async def pulse(request: Request,
                process: Annotated[str | None, Query(max_length=200)] = None,
                window: Annotated[int, Query(ge=60, le=86_400)] = WINDOW_SECONDS,
                bucket: Annotated[int, Query(ge=10, le=3600)] = BUCKET_SECONDS
                ) -> list[PulseView]:
    """Runs, failures, p50/p95 run time (ms), tokens and cost per bucket, oldest first, for
    every process or ``process``; ``cost_recorded`` false: no model usage recorded a cost."""
    control: ControlPlane = request.app.state.control
    return await control.pulse(process, window=window, bucket=bucket)
