"""The routes under ``/api/v1``. Each one is a thin call on the control plane; what it
answers is the same dataclass the embedded control room reads, dumped to JSON."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Path, Query, Request
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from starlette.responses import JSONResponse, Response, StreamingResponse

from runtime_core.api import storable
from runtime_core.api.event_log import EventLog
from runtime_core.api.responses import (
    COMMAND,
    GUARDED,
    ON_PROCESS,
    READ,
    errors,
    health_unavailable,
)
from runtime_core.control.plane import ControlPlane
from runtime_core.control.views import (
    DeadLetterView,
    IncidentView,
    JournalEntryView,
    ProcessDetail,
    ProcessSummary,
    RewindMode,
    RewindPlan,
    RewindResult,
    RunView,
)
from runtime_core.manifest.loader import NAME_PATTERN
from runtime_core.strict import StrictModel

router = APIRouter(prefix="/api/v1")
Name = Annotated[str, Field(min_length=1, max_length=200)]
Seq = Annotated[int | None, Query(ge=0, le=storable.MAX_INT)]  # SQLite integers: 64 bits
# A JSON object body the journal can keep (see storable.py): checked before the command runs.
JsonObject = Annotated[dict[str, Any], AfterValidator(storable.checked), Body()]


class Strict(StrictModel):
    model_config = ConfigDict(defer_build=False)  # FastAPI reads a body model's schema as is
    @model_validator(mode="after")
    def _storable(self) -> Strict:
        storable.checked(self.model_dump())
        return self


class InjectBody(Strict):
    payload: dict[str, Any] = Field(description="The event payload (a JSON object).")
    trigger_type: str = Field(default="manual", min_length=1, max_length=64, description=(
        "The trigger type the event says it came from (hooks and filters see it)."))


class RedeliverBody(Strict):
    event_ids: list[str] | None = Field(None, description="Dead letters to redeliver; "
                                        "leave out for all.")


class ReconcileBody(Strict):
    outcome: Literal["applied", "not_applied", "failed"] = Field(description=(
        "What happened to the write: applied, not_applied, or failed (the run fails)."))
    result: Any = Field(default=None, description="With applied: the tool's result, as the model "
                        "will see it.")
    note: str = Field(default="", max_length=10_000, description="Why; kept in the journal.")


class EvidenceBody(Strict):
    action: Literal["supplied", "returned", "failed"] = Field(description=(
        "supplied (evidence is judged), returned (the note goes back to the model) or "
        "failed."))
    evidence: Any = Field(default=None, description="With supplied: the evidence, as JSON.")
    note: str = Field(default="", max_length=10_000, description="Why; kept in the journal.")


class ElicitationBody(Strict):
    action: Literal["accept", "decline", "cancel"] = Field(description=(
        "accept (with content), decline or cancel the server's question."))
    content: dict[str, str | int | float | bool | list[str] | None] | None = Field(
        None, description="With accept: the values the server's form asks for (its "
        "requested_schema), checked against it; left out for decline and cancel.")


class RewindBody(Strict):
    entry_id: str = Field(min_length=1, max_length=300, description="PROCESS:SEQ")
    mode: RewindMode = Field(default=RewindMode.BOTH, description=(
        "both, conversation_only, code_only (the context state only), summarize (keeps "
        "both, adds a summary of the interval) or cancel (nothing: a preview)."))


class ForkBody(Strict):
    entry_id: str = Field(min_length=1, max_length=300, description=(
        "PROCESS:SEQ: the fork starts from the state just before it."))
    new_name: str = Field(min_length=1, max_length=64, pattern=NAME_PATTERN.pattern,
                          description="The new process's name.")
    with_triggers: bool = Field(False, description="Copy the parent's triggers too; one that "
                                "cannot be served (its webhook address or path taken) is 409 "
                                "CONFLICT, naming it, and nothing is forked.")


class IncidentBody(Strict):
    generation: int = Field(ge=0, le=storable.MAX_INT, description=(
        "The incident's generation you decided on."))
    version: int = Field(ge=0, le=storable.MAX_INT, description=(
        "The incident's version you decided on; a newer one refuses the request (409)."))
    note: str = Field(default="", max_length=10_000, description="Why; kept with the incident.")


class RuntimeInfo(BaseModel):
    name: str
    version: str
    read_only: bool
    boot: str
    process_count: int
    journal_faults: dict[str, str] = Field(default_factory=dict)  # path -> why it can't write
    #: Damaged journals a start moved aside (on_damage: start_fresh): where -> what they held.
    journal_left_behind: dict[str, str] = Field(default_factory=dict)


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    journal_faults: dict[str, str] = Field(default_factory=dict)
    journal_left_behind: dict[str, str] = Field(default_factory=dict)


class Done(BaseModel):
    name: str
    state: str


class Count(BaseModel):
    name: str
    count: int


def control_of(request: Request) -> ControlPlane:
    control: ControlPlane = request.app.state.control
    return control


def log_of(request: Request) -> EventLog:
    log: EventLog = request.app.state.event_log
    return log


# -- the runtime ----------------------------------------------------------------------------
@router.get("/health", summary="Liveness (no token needed): 503 while a journal cannot be "
            "written; 200 'degraded' while a damaged journal is left behind",
            response_model=Health, response_model_exclude_defaults=True,
            responses={**errors(403, 421), **health_unavailable(Health)})
async def health(request: Request) -> Any:
    info = await control_of(request).runtime_info()
    faults = info.get("journal_faults") or {}
    left = info.get("journal_left_behind") or {}
    if faults:  # a load balancer stops sending; the runtime heals by itself
        body = Health(status="degraded", journal_faults={
            path: f"journal {path}: {why}" for path, why in faults.items()},
            journal_left_behind=left)
        return JSONResponse(body.model_dump(), 503, headers={"Retry-After": "5"})
    if left:  # it works (the operator chose on_damage: start_fresh, for availability): 200, so
        # a load balancer keeps sending; the body says degraded until the file is dealt with
        return Health(status="degraded", journal_left_behind=left)
    return Health(status="ok")


@router.get("/runtime", response_model=RuntimeInfo, responses=errors(*READ))
async def runtime_info(request: Request) -> RuntimeInfo:
    """The runtime: name, version, read-only, boot id, process count, journal faults."""
    info = await control_of(request).runtime_info()
    return RuntimeInfo(name=info["name"], version=request.app.version,
                       read_only=request.app.state.read_only, boot=log_of(request).boot,
                       process_count=info["process_count"],
                       journal_faults=info.get("journal_faults") or {},
                       journal_left_behind=info.get("journal_left_behind") or {})


@router.get("/events", summary="Server-sent runtime events (resumable with Last-Event-ID)",
            response_class=StreamingResponse, responses=errors(*GUARDED))
async def events(request: Request, last_event_id: Annotated[
        str, Header(max_length=200)] = "") -> StreamingResponse:
    return StreamingResponse(log_of(request).stream(last_event_id),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


# -- processes --------------------------------------------------------------------------------
@router.get("/processes", response_model=list[ProcessSummary], responses=errors(*READ))
async def list_processes(request: Request) -> list[ProcessSummary]:
    """Every process: state, counters and health, one row each (the dashboard's)."""
    return await control_of(request).list_processes()


@router.get("/processes/{name}", summary="The process's status() dict",
            responses=errors(*ON_PROCESS))
async def process_status(request: Request, name: str) -> dict[str, Any]:
    return await control_of(request).process_status(name)


@router.get("/processes/{name}/detail", response_model=ProcessDetail,
            responses=errors(*ON_PROCESS))
async def process_detail(request: Request, name: str) -> ProcessDetail:
    """One process whole: config, queue, dead letters, runs, context, governance."""
    return await control_of(request).process_detail(name)


async def _command(request: Request, name: str, action: str, **options: Any) -> Done:
    control = control_of(request)
    await getattr(control, action)(name, **options)
    return Done(name=name, state=(await control.process_status(name))["state"])


@router.post("/processes/{name}/start", response_model=Done, responses=errors(*COMMAND))
async def start(request: Request, name: str) -> Done:
    """Start a process; it takes back what its journal holds. 409 when it runs."""
    return await _command(request, name, "start")


@router.post("/processes/{name}/stop", response_model=Done, responses=errors(*COMMAND))
async def stop(request: Request, name: str,
               drain_timeout: Annotated[float | None, Query(
                   ge=0, le=3600, description="Let the runs in flight finish first, up to "
                   "this many seconds (default: the process's drain_timeout, else none)")] = None,
               queued: Annotated[Literal["keep", "dead_letter"], Query(
                   description="What becomes of the queued events: 'keep' (default) leaves "
                   "them queued in the journal, to run once when the process next starts (here "
                   "or after a restart); 'dead_letter' dead-letters them \"process stopped\", "
                   "ready to redeliver (the spec's stop)")] = "keep",
               ) -> Done:
    """Stop a process; the queued events are kept for its next start by default."""
    return await _command(request, name, "stop", drain_timeout=drain_timeout, queued=queued)


@router.post("/processes/{name}/restart", response_model=Done, responses=errors(*COMMAND))
async def restart(request: Request, name: str) -> Done:
    """Stop the process (if it runs) and start it again."""
    return await _command(request, name, "restart")


@router.post("/processes/{name}/suspend", response_model=Done, responses=errors(*COMMAND))
async def suspend(request: Request, name: str) -> Done:
    """Suspend a running process: its events queue, nothing runs until resumed."""
    return await _command(request, name, "suspend")


@router.post("/processes/{name}/resume", response_model=Done, responses=errors(*COMMAND))
async def resume(request: Request, name: str, watch_again: Annotated[bool, Query(description=(
        "First the health monitor forgets its anomalies and cooldowns (the spec's "
        "clear_anomalies()): an anomaly that recurs pauses it again at once"))] = False) -> Done:
    """Resume a suspended process: the queued events run in their order."""
    return await _command(request, name, "resume", watch_again=watch_again)


class InjectAnswer(BaseModel):
    name: str
    event_id: str = Field(description="The event's id (a replay: the first inject's).")
    replayed: bool = Field(False, description="The Idempotency-Key was used before: nothing "
                           "was queued (200).")


@router.post("/processes/{name}/inject", status_code=202, response_model=InjectAnswer,
             summary="Queue an event: 202 once durable; with an Idempotency-Key used before, "
             "200 with the first event's id", responses={
                 200: {"model": InjectAnswer, "description": "A repeat of an Idempotency-Key: "
                       "the first inject's event id, nothing queued"},
                 **errors(*COMMAND)})
async def inject(request: Request, name: str, body: InjectBody,
                 idempotency_key: Annotated[str | None, Header(
                     alias="Idempotency-Key", min_length=1, max_length=257,
                     description="A key of 1 to 255 printable ASCII characters (a UUID): the "
                     "same key for the same process within a day returns the first answer "
                     "and queues nothing")] = None) -> Any:
    control = control_of(request)
    if idempotency_key is None:
        return InjectAnswer(name=name, event_id=await control.inject(
            name, body.payload, body.trigger_type), replayed=False)
    done = await control.inject_once(name, body.payload, body.trigger_type,
                                     idempotency_key=idempotency_key)
    answer = InjectAnswer(name=name, event_id=done.event_id, replayed=done.replayed)
    return JSONResponse(answer.model_dump(), 200) if done.replayed else answer


# -- dead letters ------------------------------------------------------------------------------
@router.get("/processes/{name}/dead-letters", response_model=list[DeadLetterView],
            summary="Every dead letter kept (oldest first), a page with offset and limit",
            responses=errors(*ON_PROCESS))
async def dead_letters(request: Request, name: str,
                       offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
                       limit: Annotated[int | None, Query(ge=1, le=5000)] = None
                       ) -> list[DeadLetterView]:
    return await control_of(request).dead_letters(name, offset=offset, limit=limit)


@router.get("/processes/{name}/dead-letters/{event_id}",
            summary="One dead letter whole: the event with its payload, reason, error",
            responses=errors(*ON_PROCESS))
async def dead_letter(request: Request, name: str,
                      event_id: Annotated[str, Path(max_length=200)]) -> dict[str, Any]:
    return await control_of(request).dead_letter(name, event_id)


@router.post("/processes/{name}/dead-letters/redeliver", response_model=Count,
             responses=errors(*COMMAND))
async def redeliver(request: Request, name: str,
                    body: Annotated[RedeliverBody | None, Body()] = None) -> Count:
    """Queue dead letters again (those named, else all); answers how many."""
    ids = body.event_ids if body is not None else None
    return Count(name=name, count=await control_of(request).redeliver(name, ids))


@router.delete("/processes/{name}/dead-letters", response_model=Count,
               responses=errors(*COMMAND))
async def clear_dead_letters(request: Request, name: str) -> Count:
    """Drop every dead letter of the process (journaled); answers how many."""
    return Count(name=name, count=await control_of(request).clear_dead_letters(name))


# -- triggers ---------------------------------------------------------------------------------
@router.get("/processes/{name}/triggers", responses=errors(*ON_PROCESS))
async def triggers(request: Request, name: str) -> list[dict[str, Any]]:
    """The process's triggers: id, type, source (config or dynamic), file-watch counts."""
    return await control_of(request).triggers(name)


@router.post("/processes/{name}/triggers", status_code=201, responses=errors(*COMMAND))
async def add_trigger(request: Request, name: str, config: JsonObject) -> dict[str, str]:
    """Add a trigger (a TriggerConfig as JSON), started at once; answers its id."""
    trigger_id = await control_of(request).add_trigger(name, config)
    return {"name": name, "trigger_id": trigger_id}


@router.delete("/processes/{name}/triggers/{trigger_id}", responses=errors(*COMMAND))
async def remove_trigger(request: Request, name: str, trigger_id: str) -> dict[str, str]:
    """Stop and remove a trigger; events it held are dead-lettered (trigger removed)."""
    await control_of(request).remove_trigger(name, trigger_id)
    return {"name": name, "trigger_id": trigger_id}


@router.get("/processes/{name}/manifest", response_class=Response,
            summary="The process's configuration now (live changes included) as a manifest: "
                    "YAML text, credentials as ${VAR} references (409 NOT_SAVABLE when a "
                    "manifest cannot hold it)",
            responses={200: {"description": "The manifest: a YAML mapping (version, name, "
                             "model, triggers, ...)", "content": {"application/yaml": {
                                 "schema": {"type": "object", "required": ["version", "name"]}}}},
                       **errors(*ON_PROCESS)})
async def manifest(request: Request, name: str) -> Response:
    text = await control_of(request).manifest_text(name)
    return Response(text, media_type="application/yaml")


# -- the journal and runs -----------------------------------------------------------------------
@router.get("/processes/{name}/journal/{entry_id}",
            summary="One journal entry whole, with its data (secrets redacted)",
            responses=errors(*ON_PROCESS))
async def journal_entry(request: Request, name: str,
                        entry_id: Annotated[str, Path(max_length=300)]) -> dict[str, Any]:
    return await control_of(request).journal_entry(name, entry_id)


@router.get("/processes/{name}/journal", response_model=list[JournalEntryView],
            responses=errors(*ON_PROCESS))
async def journal(request: Request, name: str,
                  before_seq: Seq = None,
                  after_seq: Seq = None,
                  at_or_before: Annotated[float | None, Query(allow_inf_nan=False)] = None,
                  type: Annotated[str | None, Query(max_length=64)] = None,
                  text: Annotated[str, Query(max_length=500)] = "",
                  limit: Annotated[int, Query(ge=1, le=5000)] = 200,
                  run_id: Annotated[str | None, Query(max_length=200)] = None,
                  ) -> list[JournalEntryView]:
    """A page of journal entries, newest first, filtered by seq, time, type, run, text."""
    return await control_of(request).journal_entries(
        name, before_seq=before_seq, after_seq=after_seq, at_or_before=at_or_before,
        entry_type=type, text=text, limit=limit, run_id=run_id)


@router.get("/processes/{name}/runs", response_model=list[RunView],
            responses=errors(*ON_PROCESS))
async def runs(request: Request, name: str,
               state: Annotated[str | None, Query(max_length=32)] = None) -> list[RunView]:
    """The process's recent runs, newest first, optionally of one state (waiting)."""
    return await control_of(request).runs(name, state)


@router.get("/processes/{name}/runs/{run_id}/waiting", responses=errors(*ON_PROCESS))
async def waiting_detail(request: Request, name: str, run_id: str) -> dict[str, Any]:
    """Why a run waits (a write's unknown outcome, evidence, a question) and the answers."""
    return await control_of(request).waiting_detail(name, run_id)


@router.post("/processes/{name}/runs/{run_id}/reconcile", responses=errors(*COMMAND))
async def reconcile(request: Request, name: str, run_id: str,
                    body: ReconcileBody) -> dict[str, str]:
    """Settle a write whose outcome is unknown: applied, not_applied or failed."""
    await control_of(request).reconcile(name, run_id, body.outcome, result=body.result,
                                        note=body.note)
    return {"name": name, "run_id": run_id, "outcome": body.outcome}


@router.post("/processes/{name}/runs/{run_id}/evidence", responses=errors(*COMMAND))
async def evidence(request: Request, name: str, run_id: str,
                   body: EvidenceBody) -> dict[str, str]:
    """Answer a run waiting for completion evidence: supplied, returned or failed."""
    await control_of(request).answer_evidence(name, run_id, body.action,
                                              evidence=body.evidence, note=body.note)
    return {"name": name, "run_id": run_id, "action": body.action}


@router.post("/processes/{name}/runs/{run_id}/elicitation", responses=errors(*COMMAND))
async def elicitation(request: Request, name: str, run_id: str,
                      body: ElicitationBody) -> dict[str, str]:
    """Answer the MCP server's question the run waits on (GET .../waiting shows it); 422 when
    the values do not fit its form, 409 when the run waits for no question."""
    await control_of(request).answer_elicitation(name, run_id, body.action,
                                                 content=body.content)
    return {"name": name, "run_id": run_id, "action": body.action}


# -- rewind and fork ---------------------------------------------------------------------------
@router.get("/processes/{name}/rewind-plan", response_model=RewindPlan,
            responses=errors(*ON_PROCESS))
async def rewind_plan(request: Request, name: str,
                      entry_id: Annotated[str, Query(min_length=1, max_length=300)],
                      mode: RewindMode = RewindMode.BOTH) -> RewindPlan:
    """Preview a rewind to just before an entry: what changes, what stays done."""
    return await control_of(request).rewind_plan(name, entry_id, mode.value)


@router.post("/processes/{name}/rewind", response_model=RewindResult,
             responses=errors(*COMMAND))
async def rewind(request: Request, name: str, body: RewindBody) -> RewindResult:
    """Rewind to just before an entry; a ``rewind`` entry records it (history is kept)."""
    return await control_of(request).rewind(name, body.entry_id, body.mode.value)


@router.post("/processes/{name}/fork", status_code=201, responses=errors(*COMMAND))
async def fork(request: Request, name: str, body: ForkBody) -> dict[str, str]:
    """A new process from this one's state just before an entry (triggers: opt in)."""
    child = await control_of(request).fork(name, body.entry_id, body.new_name,
                                           with_triggers=body.with_triggers)
    return {"name": child, "forked_from": name}


# -- health ------------------------------------------------------------------------------------
@router.get("/processes/{name}/health/anomalies", responses=errors(*ON_PROCESS))
async def anomalies(request: Request, name: str) -> dict[str, Any]:
    """The health anomalies in the process's history (health_enabled: false: none)."""
    found = await control_of(request).health_anomalies(name)
    if found is None:
        return {"name": name, "health_enabled": False, "anomalies": [], "count": 0}
    return {"name": name, "health_enabled": True, "anomalies": found, "count": len(found)}


@router.delete("/processes/{name}/health/anomalies", responses=errors(*COMMAND, 400))
async def clear_anomalies(request: Request, name: str) -> dict[str, Any]:
    """Forget the anomaly history and reset the cooldowns (400 without monitoring)."""
    return {"name": name,
            "anomalies_cleared": await control_of(request).clear_health_anomalies(name)}


@router.patch("/processes/{name}/health", responses=errors(*COMMAND))
async def patch_health(request: Request, name: str, patch: JsonObject) -> dict[str, Any]:
    """Change any HealthConfig field live; validated whole first, applies at once."""
    config = await control_of(request).update_health(name, patch)
    return {"name": name, "health_updated": True, "live": True,
            "effective_from": "immediate", "health": config}


# -- incidents ---------------------------------------------------------------------------------
@router.get("/incidents", response_model=list[IncidentView],
            responses=errors(*GUARDED, 404))
async def incidents(request: Request,
                    process: Annotated[str | None, Query(max_length=200)] = None
                    ) -> list[IncidentView]:
    """The incidents of every process, or of one: state, generation, occurrences."""
    return await control_of(request).incidents(process)


@router.post("/processes/{name}/incidents/{incident_id}/resolve", response_model=IncidentView,
             responses=errors(*COMMAND))
async def resolve_incident(request: Request, name: str, incident_id: str,
                           body: IncidentBody) -> IncidentView:
    """Resolve an incident; 409 if it moved past the generation and version given."""
    return await control_of(request).resolve_incident(
        name, incident_id, generation=body.generation, version=body.version, note=body.note)


@router.post("/processes/{name}/incidents/{incident_id}/reopen", response_model=IncidentView,
             responses=errors(*COMMAND))
async def reopen_incident(request: Request, name: str, incident_id: str,
                          body: IncidentBody) -> IncidentView:
    """Reopen an incident: a new generation and a new run (409 if it moved)."""
    return await control_of(request).reopen_incident(
        name, incident_id, generation=body.generation, version=body.version, note=body.note)


