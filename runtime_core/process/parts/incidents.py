"""Incidents as a part: an arriving webhook or event may open, update or close an incident
(journaled with it, before the sender is answered), and a run started for one is linked to it.
The book is read back from the journal on the first start."""

from __future__ import annotations

from runtime_core.incidents.book import Incident
from runtime_core.incidents.config import IncidentConfig
from runtime_core.incidents.keeper import Admission, IncidentKeeper
from runtime_core.journal.provider import JournalProvider
from runtime_core.journal.recorder import ProcessRecorder
from runtime_core.lifecycle import ProcessState
from runtime_core.process.core import Part, PartStatus, ProcessCore
from runtime_core.runs.run import Run
from runtime_core.triggers.base import TriggerEvent


class IncidentsPart(Part):
    key = "incidents"

    def __init__(self, core: ProcessCore, config: IncidentConfig) -> None:
        self.core = core
        self.keeper = IncidentKeeper(core.name, config, core.notifier, core.clock)

    def report(self, into: PartStatus) -> None:
        into.open_incidents = self.keeper.open_count()

    async def journal_ready(self, journal: JournalProvider, recorder: ProcessRecorder,
                            recover: bool) -> None:
        if recover:
            await self.keeper.restore(journal)

    async def admit(self, event: TriggerEvent) -> Admission:
        return await self.keeper.admit(event, self.core.recorder)

    def run_started(self, run: Run) -> None:
        self.keeper.link_run(run.run_id, run.event, self.core.recorder)

    async def resolve(self, incident_id: str, generation: int, version: int, note: str,
                      actor: str) -> Incident:
        return await self.keeper.resolve(incident_id, generation, version, note, actor,
                                         self.core.recorder)

    async def reopen(self, incident_id: str, generation: int, version: int, note: str,
                     actor: str) -> tuple[Incident, TriggerEvent]:
        """The reopened incident and the event its new run starts on."""
        if self.core.refusal() is not None or self.core.state is ProcessState.CREATED:
            raise RuntimeError(f"process {self.core.name!r} is {self.core.state.value}: start "
                               "it first (a reopened incident starts a run)")
        return await self.keeper.reopen(incident_id, generation, version, note, actor,
                                        self.core.recorder)
