"""A process's incidents: the IncidentBook (runtime_core/incidents.py) made durable.

Every change is journaled before it is applied, as an ``incident`` entry holding the incident's
snapshot after the change, so folding those entries on start gives back the same incidents with
the same generations and versions. An event that opens (or reopens) an incident is journaled as
accepted in the same commit as the incident entry; one that only updates an open incident is
answered once its ``incident`` entry is durable, and never queued: the sender's acknowledgement
means "recorded", and no second run starts.
"""

from __future__ import annotations

import asyncio
import enum
import logging

from runtime_core.clock import Clock
from runtime_core.events import EventNotifier, IncidentChanged
from runtime_core.incidents.book import (
    GENERATION_KEY,
    INCIDENT_KEY,
    Incident,
    IncidentBook,
    IncidentChange,
    value_text,
)
from runtime_core.incidents.config import IncidentConfig
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import JournalProvider, ReadFilter
from runtime_core.journal.recorder import ProcessRecorder
from runtime_core.triggers.base import TriggerEvent

log = logging.getLogger(__name__)


class Admission(enum.Enum):
    PASS = "pass"  # not an incident's business: accept it as any event
    QUEUE = "queue"  # it opened or reopened an incident and is journaled: queue its run
    TAKEN = "taken"  # it updated an incident (journaled): acknowledge it, start no run


class IncidentKeeper:
    def __init__(self, process: str, config: IncidentConfig, notifier: EventNotifier,
                 clock: Clock) -> None:
        self.process = process
        self.book = IncidentBook(config)
        self._notifier = notifier
        self._clock = clock
        # One change at a time: two webhooks with a new fingerprint must not both open one.
        self._lock = asyncio.Lock()

    def incidents(self) -> list[Incident]:
        return self.book.incidents()

    def open_count(self) -> int:
        return sum(1 for incident in self.book.incidents() if incident.is_open)

    async def restore(self, journal: JournalProvider) -> int:
        """Fold this process's ``incident`` entries; returns how many incidents it has."""
        entries = await journal.read(ReadFilter(process=self.process,
                                                entry_type=EntryType.INCIDENT))
        for entry in entries:
            try:
                self.book.fold(entry.data)
            except (TypeError, ValueError, KeyError) as exc:  # a damaged entry costs itself
                log.warning("process %s: incident entry %s cannot be read (%s); skipped",
                            self.process, entry.entry_id, exc)
        return len(self.book)

    async def admit(self, event: TriggerEvent, recorder: ProcessRecorder | None) -> Admission:
        """Decide what an arriving event does to the incidents and make it durable. QUEUE
        and TAKEN events are journaled here; PASS ones are left to the caller."""
        async with self._lock:
            change = self.book.classify(event, self._clock.time())
            if change is None:
                return Admission.PASS
            if change.starts_run:
                assert change.incident is not None
                self._link_event(event, change.incident)
                await self._journal(change, recorder, event)
            else:
                await self._journal(change, recorder)
            self._apply(change)
        return Admission.QUEUE if change.starts_run else Admission.TAKEN

    async def resolve(self, incident_id: str, generation: int, version: int, note: str,
                      actor: str, recorder: ProcessRecorder | None) -> Incident:
        async with self._lock:
            change = self.book.resolve(self._known(incident_id), generation, version,
                                       note=note, actor=actor, now=self._clock.time())
            await self._journal(change, recorder)
            self._apply(change)
        assert change.incident is not None
        return change.incident.copy()

    async def reopen(self, incident_id: str, generation: int, version: int, note: str,
                     actor: str, recorder: ProcessRecorder | None
                     ) -> tuple[Incident, TriggerEvent]:
        """A new generation, and the event (the last payload seen) whose run works on it; the
        caller queues that event."""
        async with self._lock:
            change = self.book.reopen(self._known(incident_id), generation, version,
                                      note=note, actor=actor, now=self._clock.time())
            incident = change.incident
            assert incident is not None
            last = incident.payload_history[-1]["payload"] if incident.payload_history else {}
            event = TriggerEvent(incident.trigger_id or "incident",
                                 incident.trigger_type or "manual", last,
                                 metadata={"reopened_by": actor})
            self._link_event(event, incident)
            await self._journal(change, recorder, event)
            self._apply(change)
        return incident.copy(), event

    def link_run(self, run_id: str, event: TriggerEvent,
                 recorder: ProcessRecorder | None) -> None:
        """Called when a run starts: an incident's event links its run (journaled, not
        waited for: the run's own entries follow it in the same journal)."""
        incident_id = event.metadata.get(INCIDENT_KEY)
        if not isinstance(incident_id, str):
            return
        change = self.book.link_run(incident_id, run_id)
        if change is None:
            return
        if recorder is not None:
            try:
                recorder.submit(EntryType.INCIDENT, change.entry_data())
            except Exception:  # the run goes on; the link is shown again after a restart
                log.critical("process %s: could not journal run %s of incident %s",
                             self.process, run_id, incident_id, exc_info=True)
                return
        self._apply(change)

    # -- internals -------------------------------------------------------------------------
    def _known(self, incident_id: str) -> str:
        try:
            self.book.get(incident_id)
        except KeyError:
            known = ", ".join(i.incident_id[:8] for i in self.book.incidents()) or "none"
            raise KeyError(f"process {self.process!r} has no incident {incident_id!r} "
                           f"(incidents: {known})") from None
        return incident_id

    @staticmethod
    def _link_event(event: TriggerEvent, incident: Incident) -> None:
        event.metadata[INCIDENT_KEY] = incident.incident_id
        event.metadata[GENERATION_KEY] = incident.generation

    @staticmethod
    async def _journal(change: IncidentChange, recorder: ProcessRecorder | None,
                       event: TriggerEvent | None = None) -> None:
        """Durable before it is applied. With ``event``: the incident entry is submitted, then
        the event's acceptance awaited; entries commit in order, so once the sender is
        answered both are durable (and usually in one group commit)."""
        if recorder is None:
            return
        if event is None:
            await recorder.append(EntryType.INCIDENT, change.entry_data())
            return
        recorder.submit(EntryType.INCIDENT, change.entry_data())
        await recorder.event_accepted(event)

    def _apply(self, change: IncidentChange) -> None:
        self.book.apply(change)
        incident = change.incident
        if incident is None or change.action == "ignored":
            return
        self._notifier.emit(IncidentChanged(
            process=self.process, incident_id=incident.incident_id, action=change.action,
            state=incident.state, generation=incident.generation, version=incident.version,
            occurrences=incident.occurrences, fingerprint=value_text(incident.fingerprint_value)))
