"""The reference runtime's HTTP routes that map onto promptui's control plane, served under the
reference's own paths (behind the same token and read-only gate as the rest of ``/api/v1``), so
a script written against promptise's OrchestrationAPI keeps working for them. The routes that
do not map are listed, each with what to call instead, on the docs' porting page."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from runtime_core.api.responses import COMMAND, ON_PROCESS, READ, errors
from runtime_core.api.routes import control_of
from runtime_core.control.views import RewindPlan

router = APIRouter(prefix="/api/v1", tags=["reference runtime"])
#: The reference's routes served here (method, path): the porting page lists the others.
SERVED: tuple[tuple[str, str], ...] = (
    ("GET", "/api/v1/runtime/status"),
    ("POST", "/api/v1/runtime/start-all"),
    ("POST", "/api/v1/runtime/stop-all"),
    ("GET", "/api/v1/processes/{name}/metrics"),
    ("GET", "/api/v1/processes/{name}/context"),
    ("GET", "/api/v1/processes/{name}/mission"),
    ("GET", "/api/v1/processes/{name}/inbox"),
    ("GET", "/api/v1/processes/{name}/rewind/plan"),
)


@router.get("/runtime/status", responses=errors(*READ))
async def reference_runtime_status(request: Request) -> dict[str, Any]:
    """The reference's runtime status: the runtime's info and each process's status()."""
    control = control_of(request)
    info = await control.runtime_info()
    processes = {p.name: await control.process_status(p.name)
                 for p in await control.list_processes()}
    return {**info, "processes": processes}


@router.post("/runtime/start-all", responses=errors(*COMMAND))
async def reference_start_all(request: Request) -> dict[str, str]:
    """Start every process that is not running (the reference's start-all)."""
    await control_of(request).start_all()
    return {"status": "started"}


@router.post("/runtime/stop-all", responses=errors(*COMMAND))
async def reference_stop_all(request: Request) -> dict[str, Any]:
    """Stop every process that is not stopped; their queued events are kept for the next
    start (as ``POST /processes/{name}/stop`` does)."""
    control = control_of(request)
    stopped = []
    for process in await control.list_processes():
        if process.state in ("starting", "running", "suspended"):
            await control.stop(process.name)
            stopped.append(process.name)
    return {"status": "stopped", "stopped": stopped}


@router.get("/processes/{name}/metrics", responses=errors(*ON_PROCESS))
async def reference_metrics(request: Request, name: str) -> dict[str, Any]:
    """The process's status() dict (the reference's per-process metrics; Prometheus metrics
    of every process are at /metrics)."""
    return await control_of(request).process_status(name)


@router.get("/processes/{name}/context", responses=errors(*ON_PROCESS))
async def reference_context(request: Request, name: str) -> dict[str, Any]:
    """The process's context state (secrets redacted), read only."""
    detail = await control_of(request).process_detail(name)
    return {"name": name, "state": detail.context}


@router.get("/processes/{name}/mission", responses=errors(*ON_PROCESS))
async def reference_mission(request: Request, name: str) -> dict[str, Any]:
    """The process's mission: enabled or not, and its state and evaluations."""
    detail = await control_of(request).process_detail(name)
    found = detail.governance.get("mission")
    return {"name": name, "mission_enabled": bool(found), "mission": found or None}


@router.get("/processes/{name}/inbox", responses=errors(*ON_PROCESS))
async def reference_inbox(request: Request, name: str) -> dict[str, Any]:
    """The process's inbox status (pending messages and questions), read only."""
    detail = await control_of(request).process_detail(name)
    found = detail.governance.get("inbox")
    return found if isinstance(found, dict) else {
        "pending_messages": 0, "pending_questions": 0, "messages": []}


@router.get("/processes/{name}/rewind/plan", responses=errors(*ON_PROCESS))
async def reference_rewind_plan(request: Request, name: str,
                      target_entry_id: Annotated[str, Query(min_length=1, max_length=300)],
                      mode: Annotated[str, Query(max_length=40)] = "both") -> dict[str, Any]:
    """Preview a rewind (the reference's ``?target_entry_id=&mode=``): promptui's plan, as
    ``GET /processes/{name}/rewind-plan?entry_id=`` gives it."""
    plan: RewindPlan = await control_of(request).rewind_plan(name, target_entry_id, mode)
    return {"name": name, "plan": plan}
