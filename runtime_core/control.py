"""The control plane: the one interface the control room and the CLI use to see and steer a
runtime. ``LocalControl`` wraps an in-process ``AgentRuntime``; a remote transport speaks the
same protocol over HTTP. Everything crossing it is plain data (frozen dataclasses of strings,
numbers, dicts), never a runtime object, so a widget cannot reach into a process."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from runtime_core.agent.mcp_config import redacted_server
from runtime_core.config import ProcessConfig
from runtime_core.events import EventNotifier, RuntimeEvent
from runtime_core.governance.config_patch import ConfigPatchError
from runtime_core.incidents.book import Incident, value_text
from runtime_core.journal.provider import ReadFilter
from runtime_core.journal.rewind import UnknownEntry, parse_entry_id
from runtime_core.journal.rewind_plan import RewindPlan, RewindResult
from runtime_core.journal.summary import summarize
from runtime_core.manifest import NAME_PATTERN
from runtime_core.triggers.base import TriggerEvent

if TYPE_CHECKING:
    from runtime_core.process import AgentProcess
    from runtime_core.runs.run import Run
    from runtime_core.runtime import AgentRuntime

__all__ = [
    "ControlError",
    "ControlPlane",
    "DeadLetterView",
    "EventStream",
    "IncidentView",
    "JournalEntryView",
    "LocalControl",
    "ProcessDetail",
    "ProcessSummary",
    "QueuedEventView",
    "ReadOnlyError",
    "RunView",
    "StepView",
]

PREVIEW_CHARS = 200
MAX_SEQ = 2**63 - 1  # journal sequence numbers are SQLite (64-bit) integers


class ControlError(RuntimeError):
    """A command could not be carried out; the message says why and what to do. ``code`` is
    the machine-readable reason the HTTP API answers with (e.g. PROCESS_NOT_FOUND)."""

    code: str = "REFUSED"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class ReadOnlyError(ControlError):
    """A mutating command on a read-only control plane."""

    code = "READ_ONLY"


@dataclass(frozen=True, slots=True)
class ProcessSummary:
    """One row of the process table."""

    name: str
    state: str
    suspend_reason: str
    queue_depth: int
    queue_capacity: int
    active_runs: int
    invocations: int
    failure_streak: int
    restarts: int
    dead_letters: int
    waiting_runs: int
    pending_retries: int
    health: str  # "off", "ok" or "<n> anomalies"
    budget_use: float | None  # the highest share of any limit used, None when off
    mission_state: str
    last_run_at: float | None  # epoch seconds of the last finished run
    last_outcome: str


@dataclass(frozen=True, slots=True)
class StepView:
    index: int
    kind: str  # "model", "tool", "refused"
    name: str
    args: dict[str, Any]
    result: str
    ok: bool
    duration_ms: float


@dataclass(frozen=True, slots=True)
class RunView:
    run_id: str
    event_id: str
    trigger_type: str
    state: str
    reason: str
    error: str
    reply: str
    attempt: int
    started_at: float | None
    finished_at: float | None
    waiting_reason: str
    write_in_flight: str
    steps: tuple[StepView, ...] = ()
    identity: dict[str, Any] = field(default_factory=dict)  # profile, goal, policy, digest...
    config_changed: str = ""  # "started -> now" digests when resumed under another config
    missing_evidence: str = ""  # why the completion evaluator is not satisfied yet


@dataclass(frozen=True, slots=True)
class QueuedEventView:
    event_id: str
    trigger_type: str
    trigger_id: str
    timestamp: float
    payload_preview: str


@dataclass(frozen=True, slots=True)
class DeadLetterView:
    event_id: str
    trigger_type: str
    reason: str
    error: str
    attempts: int
    dead_lettered_at: str  # ISO time
    payload_preview: str


@dataclass(frozen=True, slots=True)
class ProcessDetail:
    summary: ProcessSummary
    queued: tuple[QueuedEventView, ...]
    dead_letters: tuple[DeadLetterView, ...]
    runs: tuple[RunView, ...]  # waiting runs first, then running, then newest finished
    context: dict[str, Any]
    conversation: tuple[dict[str, Any], ...]
    governance: dict[str, Any]  # health / budget / mission / secrets / inbox / memory
    config: dict[str, Any]  # the configuration as loaded (secret references, never values)
    triggers: tuple[dict[str, Any], ...] = field(default=())
    servers: tuple[dict[str, Any], ...] = field(default=())  # MCP: state and tools with effects


@dataclass(frozen=True, slots=True)
class JournalEntryView:
    """One line of a process's timeline."""

    entry_id: str  # "<process>:<seq>"
    seq: int
    entry_type: str
    run_id: str
    timestamp: float
    summary: str


@dataclass(frozen=True, slots=True)
class IncidentView:
    """One incident of one process. A repair action sends back the ``generation`` and
    ``version`` it was decided on, and is refused when the incident moved since."""

    process: str
    incident_id: str
    state: str  # open, resolved (by an operator), recovered (by a recovered_when event)
    generation: int
    version: int
    fingerprint: str  # the fingerprint's value, as text
    opened_at: float  # the current generation's
    last_seen: float
    occurrences: int  # in the current generation
    run_ids: tuple[str, ...]  # oldest first
    closed_at: float | None = None
    resolved_by: str = ""
    note: str = ""
    last_payload: str = ""  # a preview of the last payload seen, secrets redacted


class EventStream(Protocol):
    """A bounded buffer of runtime events; the oldest are dropped (and counted) when full."""

    dropped: int

    def drain(self, limit: int | None = None) -> list[RuntimeEvent]: ...

    def close(self) -> None: ...


class ControlPlane(Protocol):
    """What the control room can see and do."""

    @property
    def name(self) -> str: ...

    @property
    def read_only(self) -> bool: ...

    @property
    def link(self) -> str:
        """Empty while the runtime is reachable; else what is wrong (e.g. "reconnecting")."""
        ...

    def subscribe(self, maxsize: int = 10_000) -> EventStream: ...

    async def list_processes(self) -> list[ProcessSummary]: ...

    async def process_detail(self, name: str) -> ProcessDetail: ...

    async def start(self, name: str) -> None: ...

    async def stop(self, name: str) -> None: ...

    async def restart(self, name: str) -> None: ...

    async def suspend(self, name: str) -> None: ...

    async def resume(self, name: str) -> None: ...

    async def inject(self, name: str, payload: dict[str, Any],
                     trigger_type: str = "manual") -> str: ...

    async def redeliver(self, name: str, event_ids: Iterable[str] | None = None) -> int: ...

    async def clear_dead_letters(self, name: str) -> int: ...

    async def waiting_detail(self, name: str, run_id: str) -> dict[str, Any]: ...

    async def reconcile(self, name: str, run_id: str, outcome: str, *, result: Any = None,
                        note: str = "") -> None: ...

    async def answer_evidence(self, name: str, run_id: str, action: str, *,
                              evidence: Any = None, note: str = "") -> None:
        """A run waiting for completion evidence: ``supplied`` (with ``evidence``),
        ``returned`` (to the model, with ``note``) or ``failed``."""
        ...

    async def journal_entries(self, name: str, *, before_seq: int | None = None,
                              at_or_before: float | None = None, entry_type: str | None = None,
                              text: str = "", limit: int = 200,
                              after_seq: int | None = None) -> list[JournalEntryView]:
        """Newest first; page with ``before_seq`` (the last seq you have); ``after_seq`` gives
        only what came after it (to follow a journal)."""
        ...

    async def rewind_plan(self, name: str, entry_id: str, mode: str = "both") -> RewindPlan: ...

    async def rewind(self, name: str, entry_id: str, mode: str = "both") -> RewindResult: ...

    async def fork(self, name: str, entry_id: str, new_name: str) -> str: ...

    async def incidents(self, process: str | None = None) -> list[IncidentView]:
        """Every process's incidents (or one's): open ones first, then the latest seen."""
        ...

    async def resolve_incident(self, name: str, incident_id: str, *, generation: int,
                               version: int, note: str = "") -> IncidentView: ...

    async def reopen_incident(self, name: str, incident_id: str, *, generation: int,
                              version: int, note: str = "") -> IncidentView:
        """A new generation; a run starts on the last payload."""
        ...

    async def start_all(self) -> None: ...

    async def close(self) -> None: ...


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str,
                                                            ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _budget_use(remaining: dict[str, Any] | None, limits: dict[str, Any]) -> float | None:
    """The highest share used of any configured limit, from the remaining counts."""
    if remaining is None:
        return None
    shares = []
    for key, limit in limits.items():
        left = remaining.get(key)
        if isinstance(limit, int | float) and limit > 0 and isinstance(left, int | float):
            shares.append(max(0.0, (limit - left) / limit))
    return max(shares, default=0.0)


def _step_view(step: Any) -> StepView:
    return StepView(step.index, step.kind, step.name, dict(step.args or {}), step.result,
                    step.ok, step.duration_ms)


def _run_view(run: Run) -> RunView:
    return RunView(run.run_id, run.event.event_id, run.event.trigger_type, run.state.value,
                   run.reason, run.error, run.reply, run.attempt, run.started_at,
                   run.finished_at, run.waiting_reason, run.write_in_flight,
                   tuple(_step_view(s) for s in run.steps),
                   run.identity.to_dict() if run.identity is not None else {},
                   run.config_changed, run.missing_evidence)


class LocalControl:
    """The control plane over an in-process runtime (same event loop)."""

    def __init__(self, runtime: AgentRuntime, *, name: str = "local",
                 read_only: bool = False) -> None:
        self.runtime = runtime
        self._name = name
        self._read_only = read_only

    @property
    def name(self) -> str:
        return self._name

    @property
    def read_only(self) -> bool:
        return self._read_only

    @property
    def link(self) -> str:
        return ""  # in-process: always reachable

    @property
    def notifier(self) -> EventNotifier:
        return self.runtime.notifier

    def subscribe(self, maxsize: int = 10_000) -> EventStream:
        return self.runtime.notifier.subscribe(maxsize=maxsize)

    def _process(self, name: str) -> AgentProcess:
        try:
            return self.runtime.get_process(name)
        except KeyError as exc:
            raise ControlError(str(exc.args[0]), "PROCESS_NOT_FOUND") from None

    def _mutating(self, what: str) -> None:
        if self._read_only:
            raise ReadOnlyError(f"{what} is not allowed: this control room is read-only "
                                "(started with --read-only)")

    # -- reads -----------------------------------------------------------------------------
    def summary(self, process: AgentProcess) -> ProcessSummary:
        status = process.status()
        runs = process.recent_runs()
        last = runs[-1] if runs else None
        outcome = ""
        if last is not None:
            outcome = last.reply if last.state.value == "succeeded" else \
                f"{last.state.value}: {last.reason or last.error}"
        health = "off"
        if "health" in status:
            count = status.get("health_anomalies", 0)
            health = "ok" if not count else f"{count} anomal{'y' if count == 1 else 'ies'}"
        budget_cfg = process.config.budget
        limits = {key.removeprefix("max_"): getattr(budget_cfg, key)
                  for key in type(budget_cfg).model_fields if key.startswith("max_")}
        return ProcessSummary(
            name=process.name, state=status["state"],
            suspend_reason=status.get("suspend_reason") or "",
            queue_depth=status["queue_size"], queue_capacity=process.config.queue_size,
            active_runs=status["active_runs"], invocations=status["invocation_count"],
            failure_streak=status["consecutive_failures"], restarts=status["restart_count"],
            dead_letters=status["dead_letter_count"], waiting_runs=status["waiting_runs"],
            pending_retries=status["pending_retries"], health=health,
            budget_use=_budget_use(status.get("budget"), limits),
            mission_state=status.get("mission_state", ""),
            last_run_at=last.finished_at if last is not None else None,
            last_outcome=process.redact(preview(outcome)))

    async def list_processes(self) -> list[ProcessSummary]:
        return [self.summary(p) for p in self.runtime.processes.values()]

    async def process_detail(self, name: str) -> ProcessDetail:
        process = self._process(name)
        redact = process.redact
        waiting = process.waiting_runs()
        waiting_ids = {r.run_id for r in waiting}
        finished = [r for r in reversed(process.recent_runs()) if r.run_id not in waiting_ids]
        # A reconciled run sits in the queue before it continues: listed, so it never vanishes.
        listed = [*waiting, *process.resuming_runs(), *process.active_runs(), *finished]
        unique: dict[str, Run] = {}
        for run in listed:  # the first listing of a run wins
            unique.setdefault(run.run_id, run)
        runs = tuple(_run_view(r) for r in unique.values())
        queued = tuple(QueuedEventView(e.event_id, e.trigger_type, e.trigger_id,
                                       e.timestamp.timestamp(), redact(preview(e.payload)))
                       for e in process.queued_events())
        dead = tuple(DeadLetterView(
            d["event"].event_id, d["event"].trigger_type, d["reason"], redact(d["error"]),
            d["attempts"], d["dead_lettered_at"], redact(preview(d["event"].payload)))
            for d in process.dead_letters)
        status = process.status()
        governance: dict[str, Any] = {key: status[key] for key in (
            "health", "health_anomalies", "budget", "mission_state", "active_secrets",
            "inbox", "memory") if key in status}
        if process.config.mission.enabled:
            governance["mission"] = process.checkpoint_state().get("mission", {})
        if status["execution_mode"] == "open":  # what the agent changed about itself
            added = [t["id"] for t in status["triggers"] if t.get("source") == "dynamic"]
            governance["open_mode"] = {
                "dynamic_triggers": f"{len(added)}: {', '.join(added)}" if added else "0",
                "spawned_processes": ", ".join(process.spawned_processes) or "none",
                "rebuilds": status["rebuild_count"]}
        return ProcessDetail(
            summary=self.summary(process), queued=queued, dead_letters=dead,
            runs=tuple(redact_run(r, redact) for r in runs),
            context=redact_any(process.context.state_snapshot(), redact),
            conversation=tuple(redact_any(m, redact) for m in process.conversation.messages()),
            governance=governance,
            config=shown_config(process.config),
            triggers=tuple(status["triggers"]) if isinstance(status["triggers"], list) else (),
            servers=tuple(status.get("servers", ())),
        )

    async def waiting_detail(self, name: str, run_id: str) -> dict[str, Any]:
        process = self._process(name)
        try:
            detail = process.waiting_detail(run_id)
        except KeyError as exc:
            raise ControlError(str(exc.args[0])) from None
        redacted: dict[str, Any] = redact_any(detail, process.redact)
        return redacted

    # -- commands --------------------------------------------------------------------------
    async def start(self, name: str) -> None:
        self._mutating("start")
        process = self._process(name)
        if process.state.value not in ("created", "stopped", "failed"):
            raise ControlError(f"{name} is {process.state.value}; only a stopped or failed "
                               "process can be started")
        await process.start()

    async def stop(self, name: str) -> None:
        self._mutating("stop")
        process = self._process(name)
        if process.state.value in ("stopped", "created"):
            raise ControlError(f"{name} is already {process.state.value}")
        await process.stop()

    async def restart(self, name: str) -> None:
        self._mutating("restart")
        process = self._process(name)
        if process.state.value not in ("created", "stopped", "failed"):
            await process.stop()
        await process.start()

    async def suspend(self, name: str) -> None:
        self._mutating("suspend")
        process = self._process(name)
        if process.state.value != "running":
            raise ControlError(f"{name} is {process.state.value}; only a running process "
                               "can be suspended")
        await process.suspend("operator")

    async def resume(self, name: str) -> None:
        self._mutating("resume")
        process = self._process(name)
        if process.state.value != "suspended":
            raise ControlError(f"{name} is {process.state.value}; only a suspended process "
                               "can be resumed")
        await process.resume("operator")

    async def inject(self, name: str, payload: dict[str, Any],
                     trigger_type: str = "manual") -> str:
        self._mutating("inject")
        process = self._process(name)
        if not isinstance(payload, dict):
            raise ControlError("the payload must be a JSON object, e.g. {\"task\": \"check\"}")
        event = TriggerEvent("operator", trigger_type, payload)
        try:
            accepted = await process.inject(event)
        except Exception as exc:  # a stopped process, a full queue: say so, lose nothing
            raise ControlError(f"{name} did not accept the event: {exc}") from None
        if not accepted:
            raise ControlError(f"{name} did not accept the event (its queue is full or it is "
                               "not running); it is in the dead letters")
        return event.event_id

    async def redeliver(self, name: str, event_ids: Iterable[str] | None = None) -> int:
        self._mutating("redeliver")
        ids = list(event_ids) if event_ids is not None else None
        return await self._process(name).redeliver_dead_letters(ids)

    async def clear_dead_letters(self, name: str) -> int:
        self._mutating("clear dead letters")
        return self._process(name).clear_dead_letters()

    async def reconcile(self, name: str, run_id: str, outcome: str, *, result: Any = None,
                        note: str = "") -> None:
        self._mutating("reconcile")
        if outcome not in ("applied", "not_applied", "failed"):
            raise ControlError(f"outcome {outcome!r} must be applied, not_applied or failed")
        try:
            await self._process(name).reconcile(run_id, outcome, result=result, note=note)
        except (KeyError, ValueError) as exc:
            raise ControlError(str(exc.args[0] if exc.args else exc)) from None

    async def answer_evidence(self, name: str, run_id: str, action: str, *,
                              evidence: Any = None, note: str = "") -> None:
        self._mutating("answer evidence")
        process = self._process(name)
        try:
            if action == "supplied":
                await process.supply_evidence(run_id, evidence, note=note)
            elif action == "returned":
                await process.return_to_model(run_id, note)
            elif action == "failed":
                await process.fail_waiting_run(run_id, note)
            else:
                raise ControlError(f"action {action!r} must be supplied, returned or failed")
        except (KeyError, ValueError) as exc:
            raise ControlError(str(exc.args[0] if exc.args else exc)) from None

    # -- the journal, rewind and fork ----------------------------------------------------------
    async def journal_entries(self, name: str, *, before_seq: int | None = None,
                              at_or_before: float | None = None, entry_type: str | None = None,
                              text: str = "", limit: int = 200,
                              after_seq: int | None = None) -> list[JournalEntryView]:
        process = self._process(name)
        journal = process.journal
        if journal is None:
            raise ControlError(f"{name} keeps no journal, so it has no timeline "
                               "(set journal: {level: checkpoint} in its manifest)")
        await journal.flush()
        entries = await journal.read(ReadFilter(
            process=name, until_seq=before_seq, until_time=at_or_before, since_seq=after_seq,
            entry_type=entry_type or None, contains=text or None, newest_first=True,
            limit=max(1, min(limit, 5000))))
        return [JournalEntryView(e.entry_id, e.seq, e.entry_type, e.run_id or "", e.timestamp,
                                 process.redact(summarize(e))) for e in entries]

    async def rewind_plan(self, name: str, entry_id: str, mode: str = "both") -> RewindPlan:
        process = self._process(name)  # outside the try: its ControlError is a RuntimeError
        _check_entry_id(name, entry_id)
        try:
            return await process.rewind_plan(entry_id, mode)
        except (RuntimeError, ValueError) as exc:
            raise ControlError(str(exc)) from None

    async def rewind(self, name: str, entry_id: str, mode: str = "both") -> RewindResult:
        self._mutating("rewind")
        process = self._process(name)
        _check_entry_id(name, entry_id)
        try:
            return await process.rewind(entry_id, mode, actor="operator")
        except (RuntimeError, ValueError) as exc:
            raise ControlError(str(exc)) from None

    async def fork(self, name: str, entry_id: str, new_name: str) -> str:
        """Fork and start the new process."""
        self._mutating("fork")
        new_name = new_name.strip()
        if not new_name:
            raise ControlError("the fork needs a name")
        if not NAME_PATTERN.match(new_name):  # it becomes a path segment, a table row, a key
            raise ControlError(f"{new_name!r} is not a process name: a letter, then up to 63 "
                               "letters, digits, '-' or '_'", "INVALID_REQUEST")
        process = self._process(name)
        _check_entry_id(name, entry_id)
        try:
            child = await process.fork(entry_id, new_name)
        except (RuntimeError, ValueError) as exc:
            raise ControlError(str(exc)) from None
        await child.start()
        return child.name

    # -- incidents -------------------------------------------------------------------------
    async def incidents(self, process: str | None = None) -> list[IncidentView]:
        processes = [self._process(process)] if process is not None else \
            list(self.runtime.processes.values())
        views = [incident_view(p.name, incident, p.redact)
                 for p in processes for incident in p.incidents()]
        return sorted(views, key=lambda v: (v.state != "open", -v.last_seen))

    async def resolve_incident(self, name: str, incident_id: str, *, generation: int,
                               version: int, note: str = "") -> IncidentView:
        self._mutating("resolve incident")
        process = self._process(name)
        try:
            incident = await process.resolve_incident(
                incident_id, generation=generation, version=version, note=note)
        except (KeyError, ValueError, RuntimeError) as exc:  # stale, wrong state, unknown
            raise ControlError(str(exc.args[0] if exc.args else exc)) from None
        return incident_view(name, incident, process.redact)

    async def reopen_incident(self, name: str, incident_id: str, *, generation: int,
                              version: int, note: str = "") -> IncidentView:
        self._mutating("reopen incident")
        process = self._process(name)
        try:
            incident = await process.reopen_incident(
                incident_id, generation=generation, version=version, note=note)
        except (KeyError, ValueError, RuntimeError) as exc:
            raise ControlError(str(exc.args[0] if exc.args else exc)) from None
        return incident_view(name, incident, process.redact)

    # -- what the HTTP API adds: status, triggers, health ---------------------------------------
    async def process_status(self, name: str) -> dict[str, Any]:
        """The process's ``status()`` dict, as JSON data."""
        process = self._process(name)
        data: dict[str, Any] = json.loads(json.dumps(process.status(), default=str))
        return data

    async def add_trigger(self, name: str, config: dict[str, Any]) -> str:
        self._mutating("add trigger")
        try:
            return await self._process(name).add_trigger(config)
        except (ValueError, TypeError) as exc:
            raise ControlError(str(exc), "INVALID_CONFIG") from None

    async def remove_trigger(self, name: str, trigger_id: str) -> None:
        self._mutating("remove trigger")
        try:
            await self._process(name).remove_trigger(trigger_id)
        except KeyError as exc:
            raise ControlError(str(exc.args[0] if exc.args else exc), "TRIGGER_NOT_FOUND"
                               ) from None

    async def health_anomalies(self, name: str) -> list[dict[str, Any]] | None:
        """Oldest first; None when the process has no health monitoring."""
        process = self._process(name)
        anomalies = process.health_anomalies()
        return None if anomalies is None else redact_any(anomalies, process.redact)

    async def clear_health_anomalies(self, name: str) -> int:
        self._mutating("clear anomalies")
        try:
            return self._process(name).clear_health_anomalies()
        except ValueError as exc:
            raise ControlError(str(exc), "HEALTH_DISABLED") from None

    async def update_health(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Change the health config live (a JSON merge patch, checked as a whole)."""
        self._mutating("change health config")
        try:
            config = self._process(name).update_health(patch)
        except ConfigPatchError as exc:
            raise ControlError(str(exc), exc.code) from None
        return config.model_dump(mode="json")

    async def start_all(self) -> None:
        await self.runtime.start_all()

    async def close(self) -> None:
        """Stop every process cleanly (queued events are journaled, nothing is lost)."""
        await self.runtime.close()

    async def shutdown(self) -> dict[str, dict[str, int]]:
        """Close for a service restart: queued events and runs in flight are taken back by
        the next start on the same journal (see ``AgentRuntime.shutdown``)."""
        return await self.runtime.shutdown()


def _check_entry_id(process: str, entry_id: str) -> None:
    """Refuse an entry id whose number no journal can hold (it would overflow SQLite)."""
    try:
        seq = parse_entry_id(process, entry_id)
    except UnknownEntry as exc:
        raise ControlError(str(exc)) from None
    if seq > MAX_SEQ:
        raise ControlError(f"no journal entry {process}:{seq}: sequence numbers stop at "
                           f"{MAX_SEQ}; list the entries with 'promptui rewind {process}'")


def redact_any(value: Any, redact: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_any(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_any(v, redact) for v in value]
    return value


def redact_run(run: RunView, redact: Any) -> RunView:
    from dataclasses import replace

    return replace(run, reply=redact(run.reply), error=redact(run.error),
                   identity=redact_any(run.identity, redact), steps=tuple(
        replace(s, args=redact_any(s.args, redact), result=redact(s.result))
        for s in run.steps))


def shown_config(config: ProcessConfig) -> dict[str, Any]:
    """The configuration as it may be displayed: MCP server credentials are ``${VAR}``
    references or ``[redacted]``, never values."""
    data = config.model_dump(mode="json", exclude_defaults=True)
    if config.servers:
        data["servers"] = {name: redacted_server(server)
                           for name, server in config.servers.items()}
    return data


def incident_view(process: str, incident: Incident, redact: Any) -> IncidentView:
    last = incident.payload_history[-1]["payload"] if incident.payload_history else ""
    return IncidentView(
        process=process, incident_id=incident.incident_id, state=incident.state,
        generation=incident.generation, version=incident.version,
        fingerprint=redact(value_text(incident.fingerprint_value)),
        opened_at=incident.opened_at, last_seen=incident.last_seen,
        occurrences=incident.occurrences, run_ids=tuple(incident.run_ids),
        closed_at=incident.closed_at, resolved_by=incident.resolved_by,
        note=redact(incident.note), last_payload=redact(preview(last)) if last != "" else "")
