"""LocalControl: the control plane over an in-process runtime (same event loop). Reads are
views (control/local_views.py); commands check the read-only flag and the process's state, and
turn the runtime's refusals into ControlError with what to do."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from runtime_core.agent.mcp.elicit_form import ACTIONS, FormError
from runtime_core.control import local_reads as reads
from runtime_core.control import local_views as views
from runtime_core.control import redaction
from runtime_core.control.inject import HostInject
from runtime_core.control.local_reads import check_entry_id
from runtime_core.control.manifests import process_manifest
from runtime_core.control.plane import (
    ControlError,
    ControlPlane,
    EventStream,
    Injected,
    QueuedOnStop,
    ReadOnlyError,
)
from runtime_core.control.pulse import BUCKET_SECONDS, WINDOW_SECONDS, PulseView
from runtime_core.control.pulse_reads import read_pulse
from runtime_core.control.views import (
    DeadLetterView,
    IncidentView,
    JournalEntryView,
    ProcessDetail,
    ProcessSummary,
    RewindPlan,
    RewindResult,
    RunView,
)
from runtime_core.events import EventNotifier, RuntimeEvent
from runtime_core.governance.config_patch import ConfigPatchError
from runtime_core.journal.provider import JournalError
from runtime_core.lifecycle import ProcessState
from runtime_core.manifest.loader import NAME_PATTERN
from runtime_core.process.process import AgentProcess
from runtime_core.process.rewinding import ForkConflict
from runtime_core.runtime import AgentRuntime
from runtime_core.triggers.base import TriggerEvent


class LocalControl:
    """The control plane over an in-process runtime (same event loop)."""

    def __init__(self, runtime: AgentRuntime, *, name: str = "local",
                 read_only: bool = False) -> None:
        self.runtime = runtime
        self._name = name
        self._read_only = read_only
        self._injects = HostInject()
        # Events reach every subscriber (the room, the API's stream) with secrets hidden.
        runtime.notifier.redact = self._redacted_event

    def _redacted_event(self, event: RuntimeEvent) -> RuntimeEvent:
        try:
            process = self.runtime.get_process(event.process)
        except KeyError:  # not a process's event (e.g. a journal's)
            return event
        return redaction.redacted_event(process, event)

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
    async def runtime_info(self) -> dict[str, Any]:
        return {"name": self._name, "read_only": self._read_only,
                "process_count": len(self.runtime.processes),
                "journal_faults": self.runtime.journal_faults(),
                "journal_left_behind": self.runtime.journals_left_behind()}

    async def list_processes(self) -> list[ProcessSummary]:
        return [views.summary(p) for p in self.runtime.processes.values()]

    async def process_detail(self, name: str) -> ProcessDetail:
        return views.detail(self._process(name))

    async def runs(self, name: str, state: str | None = None) -> list[RunView]:
        return [r for r in views.run_views(self._process(name))
                if state is None or r.state == state]

    async def dead_letters(self, name: str, *, offset: int = 0, limit: int | None = None
                           ) -> list[DeadLetterView]:
        process = self._process(name)
        journal = process.journal
        letters = None
        if journal is not None and process.state is not ProcessState.CREATED:
            with contextlib.suppress(JournalError):  # a closed journal: the list is enough
                letters = await journal.dead_letters(name, offset=offset, limit=limit)
        if letters is None:  # no journal: the process's list is all there is
            listed = views.dead_letter_views(process)
            return list(listed[offset:] if limit is None else listed[offset:offset + limit])
        redact = redaction.redactor(process)
        return [views.dead_letter_view(TriggerEvent.from_dict(d.event), d.reason, d.error,
                                       d.attempts, reads.iso(d.dead_lettered_at), redact)
                for d in letters]

    async def triggers(self, name: str) -> list[dict[str, Any]]:
        return [t.as_dict() for t in self._process(name).status_snapshot().triggers]

    async def waiting_detail(self, name: str, run_id: str) -> dict[str, Any]:
        process = self._process(name)
        try:
            detail = process.waiting_detail(run_id)
        except KeyError as exc:
            raise ControlError(str(exc.args[0])) from None
        redacted: dict[str, Any] = views.redact_any(detail, redaction.redactor(process))
        return redacted

    # -- commands --------------------------------------------------------------------------
    async def start(self, name: str) -> None:
        self._mutating("start")
        process = self._process(name)
        if process.state.value not in ("created", "stopped", "failed"):
            raise ControlError(f"{name} is {process.state.value}; only a stopped or failed "
                               "process can be started")
        await process.start()

    async def stop(self, name: str, drain_timeout: float | None = None,
                   queued: QueuedOnStop = "keep") -> None:
        """An operator's stop: runs in flight drain, the queue is kept (or dead-lettered)."""
        self._mutating("stop")
        process = self._process(name)
        if process.state.value in ("stopped", "created"):
            raise ControlError(f"{name} is already {process.state.value}")
        if drain_timeout is not None and not 0 <= drain_timeout <= 3600:
            raise ControlError(f"drain_timeout {drain_timeout:g} must be 0 to 3600 seconds",
                               "INVALID_REQUEST")
        await process.stop(drain_timeout, keep_queue=queued != "dead_letter")  # safe default

    async def restart(self, name: str) -> None:
        self._mutating("restart")  # the queue kept by the stop runs first, once
        process = self._process(name)
        if process.state.value not in ("created", "stopped", "failed"):
            await process.stop(keep_queue=True)
        await process.start()

    async def suspend(self, name: str) -> None:
        self._mutating("suspend")
        process = self._process(name)
        if process.state.value != "running":
            raise ControlError(f"{name} is {process.state.value}; only a running process "
                               "can be suspended")
        await process.suspend("operator")

    async def resume(self, name: str, *, watch_again: bool = False) -> None:
        self._mutating("resume")
        process = self._process(name)
        if process.state.value != "suspended":
            raise ControlError(f"{name} is {process.state.value}; only a suspended process "
                               "can be resumed")
        if watch_again:  # the spec's clear_anomalies(), then resume(): cooldowns forgotten
            if process.health_anomalies() is None:
                raise ControlError(f"{name} has no health monitor to watch again; resume it "
                                   "without watch_again", "INVALID_REQUEST")
            process.clear_health_anomalies()
        await process.resume("operator")

    async def inject(self, name: str, payload: dict[str, Any],
                     trigger_type: str = "manual", *,
                     idempotency_key: str | None = None) -> str:
        """Taken as a webhook's event (control/inject.py): a refusal keeps nothing."""
        return (await self._inject(name, payload, trigger_type, idempotency_key)).event_id

    async def inject_once(self, name: str, payload: dict[str, Any], trigger_type: str = "manual",
                          *, idempotency_key: str) -> Injected:
        return await self._inject(name, payload, trigger_type, idempotency_key)

    async def _inject(self, name: str, payload: dict[str, Any], trigger_type: str,
                      idempotency_key: str | None) -> Injected:
        self._mutating("inject")
        process = self._process(name)
        if not isinstance(payload, dict):
            raise ControlError("the payload must be a JSON object, e.g. {\"task\": \"check\"}")
        return await self._injects.inject(process, payload, trigger_type, idempotency_key)

    async def redeliver(self, name: str, event_ids: Iterable[str] | None = None) -> int:
        self._mutating("redeliver")
        ids = list(event_ids) if event_ids is not None else None
        return await self._process(name).redeliver_dead_letters(ids)

    async def clear_dead_letters(self, name: str) -> int:
        self._mutating("clear dead letters")
        process = self._process(name)
        count = process.clear_dead_letters()
        if process.journal is not None and process.state is not ProcessState.CREATED:
            with contextlib.suppress(JournalError):  # the in-memory list is cleared already
                await process.journal.flush()  # readers page the journal: it must agree
        return count

    async def reconcile(self, name: str, run_id: str, outcome: str, *, result: Any = None,
                        note: str = "") -> None:
        self._mutating("reconcile")
        if outcome not in ("applied", "not_applied", "failed"):
            raise ControlError(f"outcome {outcome!r} must be applied, not_applied or failed")
        try:
            await self._process(name).reconcile(run_id, outcome, result=result, note=note)
        except (KeyError, ValueError) as exc:
            raise ControlError(str(exc.args[0] if exc.args else exc)) from None
        except JournalError as exc:  # the run still waits: the answer can be given again
            raise ControlError(f"the answer was not journaled, so nothing changed: {exc}; "
                               "answer again once the journal writes", "JOURNAL_UNAVAILABLE"
                               ) from None

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

    async def answer_elicitation(self, name: str, run_id: str, action: str, *,
                                 content: dict[str, Any] | None = None) -> None:
        self._mutating("answer a server's question")
        if action not in ACTIONS:
            raise ControlError(f"action {action!r} must be accept, decline or cancel",
                               "INVALID_REQUEST")
        try:
            await self._process(name).answer_elicitation(run_id, action, content)
        except FormError as exc:
            raise ControlError(f"the answer does not fit the form: {exc}",
                               "INVALID_REQUEST") from None
        except (KeyError, ValueError) as exc:
            raise ControlError(str(exc.args[0] if exc.args else exc)) from None

    # -- the journal, rewind and fork (the reads: control/local_reads.py) ---------------------
    async def journal_entries(self, name: str, *, before_seq: int | None = None,
                              at_or_before: float | None = None, entry_type: str | None = None,
                              text: str = "", limit: int = 200,
                              after_seq: int | None = None,
                              run_id: str | None = None) -> list[JournalEntryView]:
        return await reads.journal_entries(
            self._process(name), before_seq=before_seq, at_or_before=at_or_before,
            entry_type=entry_type, text=text, limit=limit, after_seq=after_seq, run_id=run_id)

    async def journal_entry(self, name: str, entry_id: str) -> dict[str, Any]:
        process = self._process(name)
        check_entry_id(name, entry_id)
        return await reads.journal_entry(process, entry_id)

    async def dead_letter(self, name: str, event_id: str) -> dict[str, Any]:
        return await reads.dead_letter(self._process(name), event_id)

    async def pulse(self, name: str | None = None, *, window: int = WINDOW_SECONDS,
                    bucket: int = BUCKET_SECONDS) -> list[PulseView]:
        names = [name] if name is not None else list(self.runtime.processes)
        found = []
        for each in names:
            journal = self._process(each).journal
            if journal is not None:
                with contextlib.suppress(JournalError):  # a closed journal: nothing to read
                    found.append(await read_pulse(journal, each, self.runtime.clock.time(),
                                                    window, bucket))
        return found

    async def rewind_plan(self, name: str, entry_id: str, mode: str = "both") -> RewindPlan:
        process = self._process(name)  # outside the try: its ControlError is a RuntimeError
        check_entry_id(name, entry_id)
        try:
            plan = await process.rewind_plan(entry_id, mode)
        except (RuntimeError, ValueError) as exc:
            raise ControlError(str(exc)) from None
        return redaction.redact_plan(process, plan)

    async def rewind(self, name: str, entry_id: str, mode: str = "both") -> RewindResult:
        self._mutating("rewind")
        process = self._process(name)
        check_entry_id(name, entry_id)
        try:
            result = await process.rewind(entry_id, mode, actor="operator")
        except (RuntimeError, ValueError) as exc:
            raise ControlError(str(exc)) from None
        return redaction.redacted_result(process, result)

    async def fork(self, name: str, entry_id: str, new_name: str, *,
                   with_triggers: bool = False) -> str:
        """Fork and start the new process (without the parent's triggers unless asked). A
        fork that fails leaves no process behind; a trigger clash is CONFLICT, naming it."""
        self._mutating("fork")
        new_name = new_name.strip()
        if not new_name:
            raise ControlError("the fork needs a name")
        if not NAME_PATTERN.match(new_name):  # it becomes a path segment, a table row, a key
            raise ControlError(f"{new_name!r} is not a process name: a letter, then up to 63 "
                               "letters, digits, '-' or '_'", "INVALID_REQUEST")
        process = self._process(name)
        check_entry_id(name, entry_id)
        try:
            child = await process.fork(entry_id, new_name, with_triggers=with_triggers)
        except ForkConflict as exc:
            raise ControlError(str(exc), "CONFLICT") from None
        except (RuntimeError, ValueError) as exc:
            raise ControlError(str(exc)) from None
        try:
            await child.start()
        except Exception as exc:  # e.g. a trigger's address taken since the check
            await self.runtime.remove_process(child.name)
            raise ControlError(f"the fork {new_name!r} did not start and was removed: {exc} "
                               f"(its journal keeps the forked state: start a process named "
                               f"{new_name!r} on it, or fork again with another name)",
                               "CONFLICT" if with_triggers else "REFUSED") from None
        return child.name

    # -- incidents -------------------------------------------------------------------------
    async def incidents(self, process: str | None = None) -> list[IncidentView]:
        processes = [self._process(process)] if process is not None else \
            list(self.runtime.processes.values())
        found = [views.incident_view(p.name, incident, redaction.redactor(p))
                 for p in processes for incident in p.incidents()]
        return sorted(found, key=lambda v: (v.state != "open", -v.last_seen))

    async def resolve_incident(self, name: str, incident_id: str, *, generation: int,
                               version: int, note: str = "") -> IncidentView:
        self._mutating("resolve incident")
        process = self._process(name)
        try:
            incident = await process.resolve_incident(
                incident_id, generation=generation, version=version, note=note)
        except (KeyError, ValueError, RuntimeError) as exc:  # stale, wrong state, unknown
            raise ControlError(str(exc.args[0] if exc.args else exc)) from None
        return views.incident_view(name, incident, redaction.redactor(process))

    async def reopen_incident(self, name: str, incident_id: str, *, generation: int,
                              version: int, note: str = "") -> IncidentView:
        self._mutating("reopen incident")
        process = self._process(name)
        try:
            incident = await process.reopen_incident(
                incident_id, generation=generation, version=version, note=note)
        except (KeyError, ValueError, RuntimeError) as exc:
            raise ControlError(str(exc.args[0] if exc.args else exc)) from None
        return views.incident_view(name, incident, redaction.redactor(process))

    # -- status, triggers, health --------------------------------------------------------------
    async def process_status(self, name: str) -> dict[str, Any]:
        """The process's ``status()`` dict, as JSON data."""
        return self._status_data(self._process(name))

    @staticmethod
    def _status_data(process: AgentProcess) -> dict[str, Any]:
        data: dict[str, Any] = views.redact_any(
            json.loads(json.dumps(process.status(), default=str)), redaction.redactor(process))
        return data

    async def manifest_text(self, name: str) -> str:
        return process_manifest(self._process(name), name)

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
        return None if anomalies is None else views.redact_any(anomalies,
                                                               redaction.redactor(process))

    async def clear_health_anomalies(self, name: str) -> int:
        self._mutating("clear anomalies")
        try:
            return self._process(name).clear_health_anomalies()
        except ValueError as exc:
            raise ControlError(str(exc), "HEALTH_DISABLED") from None

    async def update_health(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Change the health config live (a JSON merge patch, checked as a whole)."""
        self._mutating("change health config")
        process = self._process(name)
        try:
            config = process.update_health(patch)
        except ConfigPatchError as exc:
            raise ControlError(str(exc), exc.code) from None
        return redaction.shown_part(process, config.model_dump(mode="json"))

    async def start_all(self) -> None:
        await self.runtime.start_all()

    async def close(self) -> None:
        """Stop every process cleanly (queued events are journaled, nothing is lost)."""
        await self.runtime.close()

    async def shutdown(self, drain_timeout: float | None = None) -> dict[str, dict[str, int]]:
        """Close for a service restart: queued events and runs in flight are taken back by
        the next start on the same journal (see ``AgentRuntime.shutdown``); with
        ``drain_timeout`` the runs in flight may finish first."""
        return await self.runtime.shutdown(drain_timeout)

    def end_drains(self) -> None:
        """Cut every drain under way short (a second SIGTERM or Ctrl+C)."""
        self.runtime.end_drains()


if TYPE_CHECKING:  # the one protocol the room and the CLI use
    def _is_a_control_plane(local: LocalControl) -> ControlPlane:
        return local

