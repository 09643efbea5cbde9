"""Incidents through AgentProcess with the scripted model: real webhook requests open an
incident and start one run, more of the same fingerprint only update it, recovered_when and
operators close it, a reopen (explicit or within reopen_window) is a new generation with a new
run, stale repairs are refused, and everything survives a restart on the same SQLite journal."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime_core import AgentProcess, AgentRuntime, FakeClock, ProcessConfig, TriggerEvent
from runtime_core.control import ControlError, LocalControl, ReadOnlyError
from runtime_core.events import IncidentChanged
from runtime_core.incidents import (
    GENERATION_KEY,
    INCIDENT_KEY,
    IncidentConfig,
    IncidentStateError,
    StaleIncidentError,
    fold_entries,
)
from runtime_core.journal import EntryType, ReadFilter
from runtime_core.journal.summary import summarize
from runtime_core.manifest.loader import ManifestError, parse_manifest
from tests.helpers.events import record
from tests.helpers.polling import wait_for

INCIDENTS = {"fingerprint": "payload.alert",
             "recovered_when": 'payload.status == "resolved"'}


def config(journal: Path | None = None, **incidents: Any) -> ProcessConfig:
    return ProcessConfig(
        model={"turns": [{"reply": "handled"}]},
        triggers=[{"type": "webhook", "webhook_port": 0, "webhook_path": "/alerts"}],
        incidents={**INCIDENTS, **incidents},
        journal={"level": "checkpoint", "path": str(journal)} if journal is not None
        else {"level": "checkpoint", "backend": "memory"})


def url_of(process: AgentProcess) -> str:
    return f"http://127.0.0.1:{process.status()['triggers'][0]['port']}/alerts"


async def post(process: AgentProcess, payload: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(trust_env=False) as client:
        return await client.post(url_of(process), json=payload)


def alert(name: str, **extra: Any) -> TriggerEvent:
    """The same event a webhook would hand over, for tests that need no HTTP."""
    return TriggerEvent("webhook-alerts", "webhook", {"alert": name, **extra})


async def incident_actions(process: AgentProcess) -> list[str]:
    assert process.journal is not None
    await process.journal.flush()
    entries = await process.journal.read(ReadFilter(process=process.name,
                                                    entry_type=EntryType.INCIDENT))
    return [entry.data["action"] for entry in entries]


async def test_a_webhook_opens_an_incident_and_the_same_fingerprint_only_updates_it() -> None:
    async with AgentProcess("alerts", config()) as process:
        events = record(process)
        first = await post(process, {"alert": "disk full", "host": "db-1"})
        assert first.status_code == 202
        await wait_for(lambda: process.invocation_count == 1)
        [incident] = process.incidents()
        assert (incident.state, incident.generation, incident.occurrences) == ("open", 1, 1)
        assert incident.fingerprint_value == "disk full"
        [run] = process.recent_runs()
        assert incident.run_ids == [run.run_id]
        assert run.event.metadata[INCIDENT_KEY] == incident.incident_id
        assert run.event.metadata[GENERATION_KEY] == 1

        second = await post(process, {"alert": "disk full", "host": "db-2"})
        assert second.status_code == 202  # accepted and recorded
        # Decided before the answer: nothing queued, no second run, the incident updated.
        assert process.queued_events() == [] and process.active_runs() == []
        [updated] = process.incidents()
        assert updated.incident_id == incident.incident_id
        assert updated.occurrences == 2 and updated.version == incident.version + 1
        assert updated.last_seen >= incident.last_seen
        assert [h["payload"]["host"] for h in updated.payload_history] == ["db-1", "db-2"]
        assert [h["event_id"] for h in updated.payload_history][-1] == \
            second.json()["event_id"]
        assert process.invocation_count == 1 and len(process.recent_runs()) == 1

        assert await incident_actions(process) == ["opened", "run_linked", "occurrence"]
        assert process.journal is not None
        accepted = await process.journal.read(ReadFilter(
            process="alerts", entry_type=EntryType.EVENT_ACCEPTED))
        assert [e.data["event_id"] for e in accepted] == [first.json()["event_id"]]
        assert await process.journal.pending_events("alerts") == []  # nothing to re-queue
        changes = [e for e in events if isinstance(e, IncidentChanged)]
        assert [c.action for c in changes] == ["opened", "run_linked", "occurrence"]
        assert process.status()["open_incidents"] == 1


async def test_a_new_fingerprint_opens_a_second_incident_with_its_own_run() -> None:
    async with AgentProcess("alerts", config()) as process:
        assert (await post(process, {"alert": "disk full"})).status_code == 202
        assert (await post(process, {"alert": "cpu hot"})).status_code == 202
        await wait_for(lambda: process.invocation_count == 2)
        incidents = process.incidents()
        assert [i.fingerprint_value for i in incidents] == ["disk full", "cpu hot"]
        assert len({i.fingerprint for i in incidents}) == 2
        assert all(len(i.run_ids) == 1 for i in incidents)


async def test_concurrent_webhooks_with_a_new_fingerprint_open_one_incident() -> None:
    async with AgentProcess("alerts", config()) as process, \
            httpx.AsyncClient(trust_env=False) as client:
        answers = await asyncio.gather(*(client.post(url_of(process), json={
            "alert": "disk full", "n": n}) for n in range(5)))
        assert {a.status_code for a in answers} == {202}
        await wait_for(lambda: process.invocation_count == 1)
        [incident] = process.incidents()
        assert incident.occurrences == 5 and len(incident.run_ids) == 1
        assert process.queued_events() == []


async def test_recovered_when_marks_the_open_incident_recovered_without_a_run() -> None:
    async with AgentProcess("alerts", config()) as process:
        await post(process, {"alert": "disk full"})
        await wait_for(lambda: process.invocation_count == 1)
        before = process.incidents()[0]
        answer = await post(process, {"alert": "disk full", "status": "resolved"})
        assert answer.status_code == 202
        [incident] = process.incidents()
        assert incident.state == "recovered" and incident.resolved_by == "recovered_when"
        assert incident.occurrences == before.occurrences  # a recovery is not an occurrence
        assert incident.version == before.version + 1 and incident.closed_at is not None
        assert incident.payload_history[-1]["payload"]["status"] == "resolved"
        # A recovery notice for nothing open changes nothing and starts nothing.
        assert (await post(process, {"alert": "cpu hot", "status": "resolved"})
                ).status_code == 202
        assert len(process.incidents()) == 1
        assert process.queued_events() == [] and process.invocation_count == 1
        assert (await incident_actions(process))[-2:] == ["recovered", "ignored"]


async def test_an_event_whose_fingerprint_is_null_runs_as_usual() -> None:
    async with AgentProcess("alerts", config()) as process:
        assert (await post(process, {"summary": "no alert field"})).status_code == 202
        await wait_for(lambda: process.invocation_count == 1)
        assert process.incidents() == []
        await process.inject(TriggerEvent("operator", "manual", {"alert": "disk full"}))
        await wait_for(lambda: process.invocation_count == 2)
        assert process.incidents() == []  # manual is not one of incidents.triggers


async def test_resolve_needs_the_current_generation_and_version() -> None:
    async with AgentProcess("alerts", config()) as process:
        await post(process, {"alert": "disk full"})
        await wait_for(lambda: process.invocation_count == 1)
        seen = process.incidents()[0]
        await post(process, {"alert": "disk full"})  # it moves on after the operator looked
        actions = await incident_actions(process)
        with pytest.raises(StaleIncidentError) as stale:
            await process.resolve_incident(seen.incident_id, generation=seen.generation,
                                           version=seen.version, note="disk cleaned")
        message = str(stale.value)
        assert f"version {seen.version + 1}" in message and f"version {seen.version}" in message
        assert "refresh" in message
        [unchanged] = process.incidents()
        assert unchanged.state == "open" and unchanged.version == seen.version + 1
        assert await incident_actions(process) == actions  # a refusal writes nothing

        resolved = await process.resolve_incident(
            seen.incident_id, generation=unchanged.generation, version=unchanged.version,
            note="disk cleaned", actor="ana")
        assert (resolved.state, resolved.resolved_by, resolved.note) == \
            ("resolved", "ana", "disk cleaned")
        assert resolved.version == unchanged.version + 1
        assert process.incidents()[0].state == "resolved"
        with pytest.raises(IncidentStateError, match="already resolved"):
            await process.resolve_incident(seen.incident_id, generation=resolved.generation,
                                           version=resolved.version)
        with pytest.raises(KeyError, match="no incident 'nope'"):
            await process.resolve_incident("nope", generation=1, version=1)


async def test_an_explicit_reopen_is_a_new_generation_with_a_run_on_the_last_payload() -> None:
    async with AgentProcess("alerts", config()) as process:
        await post(process, {"alert": "disk full", "host": "db-1"})
        await wait_for(lambda: process.invocation_count == 1)
        await post(process, {"alert": "disk full", "status": "resolved"})
        recovered = process.incidents()[0]
        assert recovered.state == "recovered"
        with pytest.raises(StaleIncidentError):
            await process.reopen_incident(recovered.incident_id, generation=2,
                                          version=recovered.version)
        reopened = await process.reopen_incident(
            recovered.incident_id, generation=recovered.generation, version=recovered.version,
            note="it is back")
        assert (reopened.state, reopened.generation, reopened.occurrences) == ("open", 2, 0)
        assert reopened.incident_id == recovered.incident_id and reopened.note == "it is back"
        await wait_for(lambda: process.invocation_count == 2)
        run = process.recent_runs()[-1]
        assert run.event.payload == {"alert": "disk full", "status": "resolved"}
        assert run.event.metadata[GENERATION_KEY] == 2
        await wait_for(lambda: len(process.incidents()[0].run_ids) == 2)
        assert process.incidents()[0].run_ids[-1] == run.run_id
        current = process.incidents()[0]
        with pytest.raises(IncidentStateError, match="is open"):
            await process.reopen_incident(current.incident_id, generation=2,
                                          version=current.version)
        # The next webhook of that fingerprint updates generation 2, no new run.
        await post(process, {"alert": "disk full"})
        assert process.incidents()[0].occurrences == 1 and process.queued_events() == []


async def test_reopen_window_reopens_the_same_incident_and_later_opens_a_new_one() -> None:
    clock = FakeClock()
    process = AgentProcess("alerts", config(reopen_window=60), clock=clock)
    await process.start()
    try:
        await process.inject(alert("disk full"))
        await wait_for(lambda: process.invocation_count == 1)
        first = process.incidents()[0]
        await process.resolve_incident(first.incident_id, generation=1,
                                       version=process.incidents()[0].version)
        clock.advance(30)
        await process.inject(alert("disk full"))  # within the window: the same incident
        await wait_for(lambda: process.invocation_count == 2)
        [again] = process.incidents()
        assert (again.incident_id, again.generation, again.state, again.occurrences) == \
            (first.incident_id, 2, "open", 1)
        await process.resolve_incident(again.incident_id, generation=2,
                                       version=process.incidents()[0].version)
        clock.advance(61)
        await process.inject(alert("disk full"))  # too late: a new incident
        await wait_for(lambda: process.invocation_count == 3)
        old, new = process.incidents()
        assert old.state == "resolved" and old.generation == 2
        assert new.incident_id != old.incident_id and new.generation == 1
        assert new.fingerprint == old.fingerprint
    finally:
        await process.close()


async def test_without_a_reopen_window_a_resolved_fingerprint_opens_a_new_incident() -> None:
    async with AgentProcess("alerts", config()) as process:
        await process.inject(alert("disk full"))
        await wait_for(lambda: process.invocation_count == 1)
        first = process.incidents()[0]
        await process.resolve_incident(first.incident_id, generation=1,
                                       version=process.incidents()[0].version)
        await process.inject(alert("disk full"))
        await wait_for(lambda: process.invocation_count == 2)
        assert [i.state for i in process.incidents()] == ["resolved", "open"]
        # The older one may not be reopened while the newer one is open.
        old = process.incidents()[0]
        with pytest.raises(IncidentStateError, match="opened later"):
            await process.reopen_incident(old.incident_id, generation=old.generation,
                                          version=old.version)


async def test_incidents_survive_a_restart_on_the_same_sqlite_journal(tmp_path: Path) -> None:
    journal = tmp_path / "journal.db"
    async with AgentProcess("alerts", config(journal)) as process:
        await post(process, {"alert": "disk full", "host": "db-1"})
        await wait_for(lambda: process.invocation_count == 1)
        await post(process, {"alert": "disk full", "host": "db-2"})
        await post(process, {"alert": "cpu hot"})
        await wait_for(lambda: process.invocation_count == 2)
        await wait_for(lambda: all(i.run_ids for i in process.incidents()))
        disk = process.incidents()[0]
        await process.resolve_incident(disk.incident_id, generation=1, version=disk.version,
                                       note="cleaned")
        before = [i.to_dict() for i in process.incidents()]

    async with AgentProcess("alerts", config(journal)) as again:
        assert [i.to_dict() for i in again.incidents()] == before
        disk = again.incidents()[0]
        assert (disk.state, disk.occurrences, disk.note) == ("resolved", 2, "cleaned")
        # The restored version is the one a repair must name.
        reopened = await again.reopen_incident(disk.incident_id, generation=1,
                                               version=disk.version)
        assert reopened.generation == 2
        await wait_for(lambda: again.invocation_count == 3)
        assert again.queued_events() == []  # no update was ever queued to run after all
        # Offline: the same incidents from the journal file alone.
        assert again.journal is not None
        await again.journal.flush()
        entries = await again.journal.read(ReadFilter(process="alerts",
                                                      entry_type=EntryType.INCIDENT))
        folded = fold_entries([e.data for e in entries])
        assert [i.to_dict() for i in folded] == [i.to_dict() for i in again.incidents()]
        assert "incident" in summarize(entries[0]) and "opened" in summarize(entries[0])


async def test_the_control_plane_lists_resolves_and_refuses_stale_or_read_only() -> None:
    runtime = AgentRuntime()
    process = runtime.add_process("alerts", config())
    runtime.add_process("quiet", ProcessConfig())
    control = LocalControl(runtime)
    async with runtime:
        await post(process, {"alert": "disk full"})
        await post(process, {"alert": "cpu hot"})
        await wait_for(lambda: process.invocation_count == 2)
        await wait_for(lambda: all(i.run_ids for i in process.incidents()))
        views = await control.incidents()
        assert {v.fingerprint for v in views} == {"disk full", "cpu hot"}
        assert all(v.process == "alerts" and v.state == "open" for v in views)
        assert await control.incidents("quiet") == []
        view = views[0]
        assert view.last_payload.startswith("{") and view.run_ids
        with pytest.raises(ControlError, match="changed since it was read"):
            await control.resolve_incident("alerts", view.incident_id,
                                           generation=view.generation,
                                           version=view.version - 1)
        done = await control.resolve_incident("alerts", view.incident_id,
                                              generation=view.generation,
                                              version=view.version, note="ok")
        assert done.state == "resolved"
        listed = await control.incidents()
        assert [v.state for v in listed] == ["open", "resolved"]  # open ones first
        with pytest.raises(ControlError, match="keeps no incidents"):
            await control.resolve_incident("quiet", "x", generation=1, version=1)
        watcher = LocalControl(runtime, read_only=True)
        with pytest.raises(ReadOnlyError):
            await watcher.reopen_incident("alerts", done.incident_id,
                                          generation=done.generation, version=done.version)
        assert len(await watcher.incidents()) == 2


def test_a_bad_fingerprint_in_a_manifest_is_a_located_error() -> None:
    text = ("name: alerts\n"
            "triggers:\n"
            "  - type: webhook\n"
            "incidents:\n"
            "  reopen_window: 300\n"
            "  fingerprint: payload.labels.alertname +\n"
            "  recovered_when: paylod.status == 'resolved'\n")
    with pytest.raises(ManifestError) as error:
        parse_manifest(text, Path("alerts.agent"))
    problems = {p.path: p for p in error.value.problems}
    bad = problems["incidents.fingerprint"]
    assert (bad.file, bad.line, bad.column) == ("alerts.agent", 6, 16)
    assert "fingerprint column 27: invalid syntax" in bad.message
    assert "unknown name 'paylod'" in problems["incidents.recovered_when"].message
    good = parse_manifest(text.replace(" +\n", "\n").replace("paylod", "payload"),
                          Path("alerts.agent"))
    assert good.config.incidents == IncidentConfig(
        fingerprint="payload.labels.alertname", reopen_window=300,
        recovered_when="payload.status == 'resolved'")


def test_incident_config_checks_its_trigger_types() -> None:
    with pytest.raises(ValueError, match="unknown trigger type"):
        IncidentConfig.from_manifest({"fingerprint": "payload.a", "triggers": ["hook"]})
    with pytest.raises(ValueError, match="empty list"):
        IncidentConfig.from_manifest({"fingerprint": "payload.a", "triggers": []})
