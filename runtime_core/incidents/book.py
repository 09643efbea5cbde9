"""Incidents: an application lifecycle on top of webhook and event triggers (spec: run lifecycle
and recovery, "Incident lifecycle compatibility").

An event whose fingerprint (an expression in the filter language, e.g.
``payload.labels.alertname``) is new opens an incident and starts a run. More events with that
fingerprint while it is open only update it (count, last seen, payload history): an alert storm
is one incident and one run, not a hundred. An operator resolves it, or an event for which
``recovered_when`` holds marks it recovered. Reopening it (explicitly, or by a matching event
within ``reopen_window``) starts a new generation and a new run.

Every change bumps ``version``. Repair actions name the generation and version they were decided
on and are refused when either moved: an operator looking at a stale screen never overrides a
newer fact (optimistic concurrency, as the spec asks).

This module is bookkeeping only, with no I/O: ``IncidentBook.classify``/``resolve``/``reopen``
compute a change without applying it, so the caller can make it durable first and apply it
after (runtime_core/incidents/keeper.py does that for a process). ``fold`` rebuilds the book from
journal entries, which is how incidents survive restarts and how ``promptui incidents`` reads a
journal file offline.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final

from runtime_core.incidents.config import IncidentConfig
from runtime_core.triggers.base import TriggerEvent
from runtime_core.triggers.filters.expression import EventFilter, compile_filter

OPEN: Final = "open"
RESOLVED: Final = "resolved"  # by an operator
RECOVERED: Final = "recovered"  # by an event for which recovered_when holds
STATES: Final = (OPEN, RESOLVED, RECOVERED)

#: Keys an incident puts in the metadata of the event whose run it starts.
INCIDENT_KEY: Final = "incident_id"
GENERATION_KEY: Final = "incident_generation"

RUN_IDS_KEPT: Final = 50
PAYLOAD_CHARS: Final = 8000  # a bigger payload is kept as a cut JSON text in the history
VALUE_CHARS: Final = 500  # the fingerprint's value as shown


class StaleIncidentError(ValueError):
    """A repair action decided on an older generation or version of the incident."""

    def __init__(self, incident: Incident, action: str, generation: int, version: int) -> None:
        self.incident_id = incident.incident_id
        self.current_generation = incident.generation
        self.current_version = incident.version
        self.generation = generation
        self.version = version
        super().__init__(
            f"{action} refused: incident {incident.incident_id[:8]} is at generation "
            f"{incident.generation} version {incident.version}, the request was for "
            f"generation {generation} version {version} (it changed since it was read: "
            f"{incident.state}, {incident.occurrences} occurrence(s)); refresh and decide again")


class IncidentStateError(ValueError):
    """A repair action the incident's state does not allow (resolving a resolved one...)."""


@dataclass(slots=True)
class Incident:
    incident_id: str
    fingerprint: str  # a digest of the fingerprint's value (canonical JSON)
    fingerprint_value: Any  # the value itself, for people
    state: str
    generation: int
    version: int
    opened_at: float  # when the current generation opened (epoch seconds)
    last_seen: float
    occurrences: int  # events seen in the current generation
    trigger_id: str = ""  # where its events come from (a reopen's run says the same)
    trigger_type: str = ""
    run_ids: list[str] = field(default_factory=list)
    payload_history: list[dict[str, Any]] = field(default_factory=list)  # oldest first
    closed_at: float | None = None  # resolved or recovered at
    resolved_by: str = ""
    note: str = ""

    @property
    def is_open(self) -> bool:
        return self.state == OPEN

    def snapshot(self) -> dict[str, Any]:
        """Every field but the payload history (journaled one item at a time)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "payload_history"}
        data["run_ids"] = list(self.run_ids)
        return data

    def to_dict(self) -> dict[str, Any]:
        return {**self.snapshot(), "payload_history": [dict(h) for h in self.payload_history]}

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> Incident:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known and k != "payload_history"}
        incident = cls(**values)
        incident.run_ids = list(incident.run_ids)
        return incident

    def copy(self) -> Incident:
        return replace(self, run_ids=list(self.run_ids),
                       payload_history=list(self.payload_history))


@dataclass(frozen=True, slots=True)
class IncidentChange:
    """What one event or repair action does to an incident, not yet applied."""

    action: str  # opened | occurrence | recovered | resolved | reopened | run_linked | ignored
    incident: Incident | None  # as it is after the change (None: ignored, nothing to show)
    starts_run: bool = False
    history_item: dict[str, Any] | None = None
    event_id: str = ""
    run_id: str = ""
    actor: str = ""
    note: str = ""
    reason: str = ""

    def entry_data(self) -> dict[str, Any]:
        """The journal entry's data: the action and the incident's snapshot after it."""
        data: dict[str, Any] = {"action": self.action}
        if self.incident is not None:
            data["incident"] = self.incident.snapshot()
        for key in ("event_id", "run_id", "actor", "note", "reason"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        if self.history_item is not None:
            data["history_item"] = self.history_item
        return data


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def value_text(value: Any) -> str:
    """A fingerprint's value as one line: text as is, anything else as JSON."""
    return value if isinstance(value, str) else canonical(value)


def fingerprint_of(value: Any) -> str:
    """A stable digest of a fingerprint's value: equal values, equal digests, across runs."""
    return hashlib.sha256(canonical(value).encode("utf-8")).hexdigest()[:16]


def _shown(value: Any, limit: int) -> Any:
    """``value`` as plain JSON data, or a cut JSON text when it is longer than ``limit``."""
    text = canonical(value)
    return json.loads(text) if len(text) <= limit else text[: limit - 1] + "…"


class IncidentBook:
    """The incidents of one process, by id, in the order they opened."""

    def __init__(self, config: IncidentConfig) -> None:
        self.config = config
        self._fingerprint: EventFilter = compile_filter(config.fingerprint, bare_names=False)
        self._recovered: EventFilter | None = compile_filter(
            config.recovered_when, bare_names=False) if config.recovered_when else None
        self._incidents: dict[str, Incident] = {}
        self._current: dict[str, str] = {}  # fingerprint -> the incident that tracks it now

    def __len__(self) -> int:
        return len(self._incidents)

    def incidents(self) -> list[Incident]:
        return [incident.copy() for incident in self._incidents.values()]

    def get(self, incident_id: str) -> Incident:
        incident = self._incidents.get(incident_id)
        if incident is None:
            raise KeyError(f"no incident {incident_id!r}")
        return incident

    # -- events ----------------------------------------------------------------------------
    def classify(self, event: TriggerEvent, now: float) -> IncidentChange | None:
        """What ``event`` does, or None when it is no incident's business (another trigger
        type, already linked to an incident, or a fingerprint that evaluates to null): it
        then runs as any event does."""
        if not self.config.enabled or event.trigger_type not in self.config.triggers:
            return None
        if INCIDENT_KEY in event.metadata:  # a reopen's own run, or an event redelivered
            return None
        value = self._fingerprint.value(event)
        if value is None:
            return None
        fingerprint = fingerprint_of(value)
        current_id = self._current.get(fingerprint)
        current = self._incidents[current_id].copy() if current_id is not None else None
        if self._recovered is not None and self._recovered.matches(event):
            if current is None or not current.is_open:
                return IncidentChange("ignored", current, event_id=event.event_id,
                                      reason="recovered_when holds but no incident is open "
                                             "for this fingerprint")
            current.state, current.closed_at = RECOVERED, now
            current.resolved_by, current.note = "recovered_when", ""
            return self._seen(current, "recovered", event, now, count=False)
        if current is not None and current.is_open:
            return self._seen(current, "occurrence", event, now)
        window = self.config.reopen_window
        if (current is not None and window > 0 and current.closed_at is not None
                and now - current.closed_at <= window):
            self._new_generation(current, now)
            return self._seen(current, "reopened", event, now, starts_run=True,
                              actor="reopen_window")
        incident = Incident(
            incident_id=uuid.uuid4().hex, fingerprint=fingerprint,
            fingerprint_value=_shown(value, VALUE_CHARS), state=OPEN, generation=1, version=0,
            opened_at=now, last_seen=now, occurrences=0, trigger_id=event.trigger_id,
            trigger_type=event.trigger_type)
        return self._seen(incident, "opened", event, now, starts_run=True)

    def _seen(self, incident: Incident, action: str, event: TriggerEvent, now: float, *,
              count: bool = True, starts_run: bool = False, actor: str = "") -> IncidentChange:
        item = {"at": now, "event_id": event.event_id, "generation": incident.generation,
                "payload": _shown(event.payload, PAYLOAD_CHARS)}
        incident.last_seen = now
        incident.occurrences += 1 if count else 0
        incident.version += 1
        incident.payload_history = self._trimmed([*incident.payload_history, item])
        return IncidentChange(action, incident, starts_run=starts_run, history_item=item,
                              event_id=event.event_id, actor=actor)

    def _trimmed(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return history[-self.config.history_size:]

    @staticmethod
    def _new_generation(incident: Incident, now: float) -> None:
        incident.state, incident.generation = OPEN, incident.generation + 1
        incident.opened_at, incident.occurrences = now, 0
        incident.closed_at, incident.resolved_by, incident.note = None, "", ""

    # -- repair actions --------------------------------------------------------------------
    def _fresh(self, incident_id: str, generation: int, version: int, action: str
               ) -> Incident:
        incident = self.get(incident_id)
        if generation != incident.generation or version != incident.version:
            raise StaleIncidentError(incident, action, generation, version)
        return incident.copy()

    def resolve(self, incident_id: str, generation: int, version: int, *, note: str,
                actor: str, now: float) -> IncidentChange:
        incident = self._fresh(incident_id, generation, version, "resolve")
        if not incident.is_open:
            raise IncidentStateError(
                f"resolve refused: incident {incident_id[:8]} is already {incident.state} "
                f"(generation {incident.generation}); reopen it to work on it again")
        incident.state, incident.closed_at = RESOLVED, now
        incident.resolved_by, incident.note = actor, note
        incident.version += 1
        return IncidentChange("resolved", incident, actor=actor, note=note)

    def reopen(self, incident_id: str, generation: int, version: int, *, note: str,
               actor: str, now: float) -> IncidentChange:
        incident = self._fresh(incident_id, generation, version, "reopen")
        if incident.is_open:
            raise IncidentStateError(
                f"reopen refused: incident {incident_id[:8]} is open (generation "
                f"{incident.generation}); only a resolved or recovered incident reopens")
        newer_id = self._current.get(incident.fingerprint, incident_id)
        if newer_id != incident_id and self._incidents[newer_id].is_open:
            raise IncidentStateError(
                f"reopen refused: incident {newer_id[:8]}, opened later for the same "
                f"fingerprint, is open; work on that one instead")
        self._new_generation(incident, now)
        incident.note = note
        incident.version += 1
        return IncidentChange("reopened", incident, starts_run=True, actor=actor, note=note)

    def link_run(self, incident_id: str, run_id: str) -> IncidentChange | None:
        """The run an incident's event started; None when unknown or already linked (a run
        resumed after a restart)."""
        incident = self._incidents.get(incident_id)
        if incident is None or run_id in incident.run_ids:
            return None
        incident = incident.copy()
        incident.run_ids = [*incident.run_ids, run_id][-RUN_IDS_KEPT:]
        incident.version += 1
        return IncidentChange("run_linked", incident, run_id=run_id)

    # -- applying --------------------------------------------------------------------------
    def apply(self, change: IncidentChange) -> None:
        incident = change.incident
        if change.action == "ignored" or incident is None:
            return
        self._incidents[incident.incident_id] = incident.copy()
        if change.action in ("opened", "reopened"):
            self._current[incident.fingerprint] = incident.incident_id

    def fold(self, data: dict[str, Any]) -> None:
        """Apply one journaled change (an ``incident`` entry's data)."""
        snapshot = data.get("incident")
        action = str(data.get("action", ""))
        if action == "ignored" or not isinstance(snapshot, dict):
            return
        incident = Incident.from_snapshot(snapshot)
        before = self._incidents.get(incident.incident_id)
        history = list(before.payload_history) if before is not None else []
        item = data.get("history_item")
        if isinstance(item, dict):
            history.append(item)
        incident.payload_history = self._trimmed(history)
        self.apply(IncidentChange(action, incident))


def fold_entries(entries: Iterable[dict[str, Any]], history_size: int = 20
                 ) -> list[Incident]:
    """Incidents rebuilt from ``incident`` entries' data, oldest first, without the process's
    configuration (``promptui incidents`` on a journal file)."""
    book = IncidentBook(IncidentConfig(fingerprint="null", history_size=history_size))
    for data in entries:
        book.fold(data)
    return book.incidents()
