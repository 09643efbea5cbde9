"""Recovery on start: what a new process object takes back from the journal.

Context state, conversation and counters come from the last checkpoint plus what followed it.
Dead letters survive. Accepted-but-unfinished events are re-queued in their order. A run that was
in flight resumes from its durable steps; one caught mid-write waits for an operator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from runtime_core.delivery.dead_letters import DeadLetter
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.provider import (
    JournalProvider,
    OpenRun,
    ReadFilter,
    StoredDeadLetter,
)
from runtime_core.journal.recorder import ProcessRecorder
from runtime_core.journal.replay import (
    ReplayEngine,
    RunRebuild,
    full_identity,
    rebuild_run,
)
from runtime_core.journal.rewind import ReadsRuns
from runtime_core.runs.completion import MISSING_COMPLETION_EVIDENCE, Artifact
from runtime_core.runs.identity import RunIdentity
from runtime_core.runs.run import ResumePoint, Run, RunState
from runtime_core.triggers.base import TriggerEvent

UNKNOWN_WRITE_OUTCOME = "unknown_write_outcome"
#: How many profile entries one read for all the open runs' identities takes (full_identity's)
PROFILE_PAGE = 20


@dataclass(slots=True)
class RecoveredRun:
    run: Run
    rebuild: RunRebuild

    def resume_point(self) -> ResumePoint:
        r = self.rebuild
        return ResumePoint(list(r.history), r.step, r.model_calls, r.tool_calls,
                           r.output_chars, list(r.remaining),
                           [Artifact.from_dict(a) for a in r.artifacts], r.final_reply)


@dataclass(slots=True)
class Recovery:
    summary: dict[str, Any]
    context_state: dict[str, Any]
    conversation: list[dict[str, Any]]
    invocation_count: int
    queued: list[TriggerEvent] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)  # the newest dead_letter_size
    dead_total: int = 0  # every dead letter the journal keeps
    resumable: dict[str, RecoveredRun] = field(default_factory=dict)  # by event id
    waiting: dict[str, RecoveredRun] = field(default_factory=dict)  # by run id
    failed: list[RecoveredRun] = field(default_factory=list)
    checkpoint: dict[str, Any] | None = None  # the last checkpoint's data (governance state)


def stored_letter(stored: StoredDeadLetter) -> DeadLetter:
    """A dead letter as the journal keeps it, as the process lists it."""
    return DeadLetter(TriggerEvent.from_dict(stored.event), stored.reason, stored.error,
                      stored.attempts,
                      datetime.fromtimestamp(stored.dead_lettered_at, UTC).isoformat())


async def recover_process(
    journal: JournalProvider, recorder: ProcessRecorder, name: str, max_messages: int,
    dead_letter_size: int = 100, initial_state: Mapping[str, Any] | None = None,
) -> Recovery | None:
    """What the journal holds for ``name``: state, conversation, queue, runs to resume, dead
    letters, and the spec's ``recovered`` summary. ``initial_state``: the config's, for the
    summary's ``context_keys`` when a run ended after the last checkpoint we wrote (the spec's
    checkpoint after that run would hold it)."""
    engine = ReplayEngine(journal)
    # The reads that do not depend on each other at once: a start waits for each read's
    # round trip to the reading thread, not for the reads themselves (they take microseconds).
    replayed, conversation, queued, dead_total, stored_runs = await asyncio.gather(
        engine.recover(name), engine.conversation(name, max_messages),
        journal.pending_events(name), journal.dead_letter_count(name), journal.open_runs(name))
    if not replayed["found"]:
        return None
    pending = [TriggerEvent.from_dict(e) for e in queued]
    dead = [stored_letter(d) for d in await journal.dead_letters(
        name, offset=max(0, dead_total - dead_letter_size))] if dead_total else []
    by_id = {event.event_id: event for event in pending}
    recovery = Recovery(
        summary={}, context_state=replayed["context_state"], conversation=conversation,
        invocation_count=replayed["invocation_count"], dead=dead, dead_total=dead_total,
        checkpoint=replayed["checkpoint"],
    )
    open_runs = [r for r in stored_runs if r.event_id in by_id]
    rebuilds = [rebuild_run(entries) for entries in await _runs_entries(journal, name, open_runs)]
    identities = await _full_identities(journal, name, rebuilds)
    waits = []
    for open_run, rebuild, identity in zip(open_runs, rebuilds, identities, strict=True):
        event = by_id[open_run.event_id]
        run = Run(name, event, open_run.attempt, run_id=open_run.run_id,
                  trace_id=rebuild.trace_id, span_id=rebuild.span_id)
        if identity is not None:
            rebuild.identity = identity
            run.identity = RunIdentity.from_dict(identity)
        run.artifacts = [Artifact.from_dict(a) for a in rebuild.artifacts]
        recovered = RecoveredRun(run, rebuild)
        for step, call in rebuild.interrupted:
            recorder.tool_interrupted(run.run_id, step, call.call_id, call.name)
        if rebuild.failed_by_operator is not None:
            run.state = RunState.FAILED
            recovery.failed.append(recovered)
        elif rebuild.waiting_evidence:  # its final reply still lacks the evidence it needs
            run.state = RunState.WAITING
            run.waiting_reason = MISSING_COMPLETION_EVIDENCE
            run.reply = rebuild.final_reply or ""
            run.missing_evidence = rebuild.missing
            recovery.waiting[run.run_id] = recovered
        elif rebuild.unknown is not None:
            run.state = RunState.WAITING
            run.waiting_reason = UNKNOWN_WRITE_OUTCOME
            if open_run.state != "waiting":  # submitted now, in order; durable before return
                waits.append(recorder.run_waiting(run.run_id, rebuild.unknown.step,
                                                  rebuild.unknown.call.name,
                                                  UNKNOWN_WRITE_OUTCOME))
            recovery.waiting[run.run_id] = recovered
        else:
            recovery.resumable[event.event_id] = recovered
    # One commit for all of them (group commit), not one each: all durable before the summary.
    await asyncio.gather(*waits)
    waiting_events = {r.run.event.event_id for r in recovery.waiting.values()}
    failed_events = {r.run.event.event_id for r in recovery.failed}
    recovery.queued = [e for e in pending
                       if e.event_id not in waiting_events and e.event_id not in failed_events]
    recovery.summary = {
        "lifecycle_state": replayed["lifecycle_state"],
        "entries_replayed": replayed["entries_replayed"],
        "entries_read": replayed["entries_read"],
        "last_entry_type": replayed["last_entry_type"],
        "context_keys": sorted(_keys(replayed, initial_state)),
        "mission_restored": False,
        "budget_restored": False,
        "conversation_messages": len(conversation),
        "invocation_count": replayed["invocation_count"],
        "requeued_events": len(recovery.queued),
        "resumed_runs": len(recovery.resumable),
        "waiting_runs": len(recovery.waiting),
        "dead_letters": dead_total,
    }
    recorder.submit(EntryType.RECOVERED, dict(recovery.summary))
    return recovery


async def _runs_entries(journal: JournalProvider, name: str,
                        open_runs: Sequence[OpenRun]) -> list[list[JournalEntry]]:
    """Each open run's entries, in seq order: one query for all of them on a SQL journal, a
    round of reads elsewhere (after a crash with many runs in flight, not one read each)."""
    if not open_runs:
        return []
    if isinstance(journal, ReadsRuns):
        by_run: dict[str, list[JournalEntry]] = {r.run_id: [] for r in open_runs}
        for entry in await journal.runs_entries(name, list(by_run)):
            by_run[str(entry.run_id)].append(entry)
        return [by_run[r.run_id] for r in open_runs]
    return list(await asyncio.gather(*(
        journal.read(ReadFilter(process=name, run_id=r.run_id)) for r in open_runs)))


async def _full_identities(journal: JournalProvider, name: str,
                           rebuilds: Sequence[RunRebuild]) -> list[dict[str, Any] | None]:
    """Each rebuilt run's full identity (``full_identity``), None for a run without one. The
    profiles are read once for all the runs (most share one profile); only when that one read
    may have cut off a run's profile (a full page) is that run read on its own."""
    needs = [r for r in rebuilds if r.identity is not None
             and "profile" not in r.identity and r.identity.get("config_digest")]
    needed = {id(r) for r in needs}
    profiles: list[JournalEntry] = []
    if needs:
        bounds = [r.started_seq or None for r in needs]
        until = None if None in bounds else max(b for b in bounds if b is not None)
        profiles = await journal.read(ReadFilter(
            process=name, entry_type=EntryType.PROFILE, until_seq=until, newest_first=True,
            limit=PROFILE_PAGE))
    out: list[dict[str, Any] | None] = []
    for rebuild in rebuilds:
        identity = rebuild.identity
        if identity is None or id(rebuild) not in needed:
            out.append(None if identity is None else dict(identity))
            continue
        before = rebuild.started_seq or None
        if len(profiles) >= PROFILE_PAGE:  # the page may not reach this run's profile
            out.append(await full_identity(journal, name, identity, before))
            continue
        digest = identity.get("config_digest")
        found = next((e.data for e in profiles if (before is None or e.seq < before)
                      and e.data.get("config_digest") == digest), {})
        out.append({**found, **identity})
    return out


def _keys(replayed: dict[str, Any], initial_state: Mapping[str, Any] | None) -> set[str]:
    """The context keys a checkpoint after every run would report: with no checkpoint of ours
    but a run ended, the spec's checkpoint of that run would hold the initial state too."""
    keys = set(replayed["context_state"])
    if replayed["checkpoint"] is None and replayed["run_ended_after_checkpoint"]:
        keys |= set(initial_state or {})
    return keys
