"""Seeded, frozen scenes for snapshot tests (and the README capture): a ControlPlane that
serves fixed processes, events and details, with a fixed clock, so a screen renders the same
bytes on every run."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from promptui.app import ControlRoom
from promptui.themes import load_themes
from runtime_core.control import (
    ControlError,
    DeadLetterView,
    IncidentView,
    JournalEntryView,
    ProcessDetail,
    ProcessSummary,
    QueuedEventView,
    ReadOnlyError,
    RunView,
    StepView,
    WaitingRunView,
)
from runtime_core.control.pulse import PulseBuckets, PulseView
from runtime_core.events import (
    BudgetExceeded,
    EventDeadLettered,
    HealthAnomaly,
    ProcessFailed,
    RunFinished,
    RunStarted,
    RuntimeEvent,
    RunWaiting,
)
from runtime_core.journal.rewind_plan import (
    ContextChange,
    OutsideEffect,
    RewindMode,
    RewindPlan,
    RewindResult,
)


def scene_pulse(process: str, seed: int) -> PulseView:
    """An hour by the minute for ``process``: runs in waves, a failure now and then, run times
    and tokens that follow the runs (no cost recorded, like the scripted demo models)."""
    buckets = PulseBuckets(process)
    for minute in range(60):
        at = NOW - (59 - minute) * 60
        runs = (minute * (seed + 3) + seed * 7) % 9
        for n in range(runs):
            state = "failed" if (minute + n + seed) % 11 == 0 else "succeeded"
            buckets.run(at, state, 120.0 + ((minute * 37 + n * 53 + seed * 11) % 900))
        buckets.usage(at, runs * (40 + seed * 9))
    return buckets.view(NOW)


NO_USER_THEMES = Path("/nonexistent/promptui-user-themes")
NOW = 1_780_000_000.0  # 2026-05-28 20:26:40 UTC


def summary(name: str, state: str, **kw: Any) -> ProcessSummary:
    base: dict[str, Any] = dict(
        name=name, state=state, suspend_reason="", queue_depth=0, queue_capacity=100,
        active_runs=0, invocations=0, failure_streak=0, restarts=0, dead_letters=0,
        waiting_runs=0, pending_retries=0, health="off", budget_use=None, mission_state="",
        last_run_at=None, last_outcome="")
    base.update(kw)
    return ProcessSummary(**base)


PROCESSES = [
    summary("alert-handler", "running", queue_depth=3, active_runs=1, invocations=128,
            last_run_at=NOW - 4, health="ok", last_outcome="Paged on-call for disk full"),
    summary("demo-feeder", "running", invocations=57, last_run_at=NOW - 12),
    summary("flaky-deployer", "running", queue_depth=12, invocations=31, failure_streak=1,
            dead_letters=4, restarts=2, last_run_at=NOW - 2),
    summary("health-checker", "running", invocations=412, last_run_at=NOW - 1, health="ok",
            budget_use=0.42),
    summary("invoice-watcher", "suspended", suspend_reason="operator", queue_depth=7,
            invocations=88, last_run_at=NOW - 340, budget_use=0.86),
    summary("looper", "suspended", suspend_reason="health", invocations=0, failure_streak=9,
            dead_letters=11, health="2 anomalies", last_run_at=NOW - 65),
    summary("payments-sync", "running", active_runs=0, waiting_runs=1, invocations=9,
            last_run_at=NOW - 3600 * 3, waiting=(WaitingRunView(
                "f00dfeed0001", "e7", "unknown_write_outcome",
                "charge_card (f00dfeed0001:3)", NOW - 3600 * 3 + 20),)),
    summary("report-builder", "failed", failure_streak=3, restarts=5, dead_letters=2,
            last_run_at=NOW - 86400 * 2),
    summary("archiver", "stopped", invocations=1024, last_run_at=NOW - 86400 * 9),
]

EVENTS: list[RuntimeEvent] = [
    RunStarted(process="alert-handler", timestamp=NOW - 9, run_id="a1b2c3d4e5f6", event_id="e1",
               trigger_type="webhook", attempt=1),
    HealthAnomaly(process="looper", timestamp=NOW - 8, anomaly_type="stuck",
                  description="tool 'check_health' called 3 times with identical arguments",
                  details={"tool_name": "check_health", "consecutive_count": 3}),
    EventDeadLettered(process="flaky-deployer", timestamp=NOW - 7, event_id="9f8e7d6c5b4a",
                      trigger_type="event", reason="retries exhausted",
                      error="deploy target refused the connection", attempts=2),
    RunFinished(process="alert-handler", timestamp=NOW - 6, run_id="a1b2c3d4e5f6",
                event_id="e1", state="succeeded", reply="Paged on-call for disk full",
                duration_ms=412.0),
    BudgetExceeded(process="invoice-watcher", timestamp=NOW - 5,
                   limit_type="max_tool_calls_per_day", limit=200, current=201,
                   tool="book_invoice"),
    RunWaiting(process="payments-sync", timestamp=NOW - 4, run_id="77aa88bb99cc",
               event_id="e7", reason="unknown_write_outcome", tool="charge_card"),
    ProcessFailed(process="report-builder", timestamp=NOW - 3, process_id="x",
                  reason="restarts exhausted", error="model script missing: report.yaml"),
    RunStarted(process="health-checker", timestamp=NOW - 1, run_id="0c0c0c0c0c0c",
               event_id="e9", trigger_type="interval", attempt=1),
    RunFinished(process="health-checker", timestamp=NOW - 1, run_id="0c0c0c0c0c0c",
                event_id="e9", state="succeeded", reply="API healthy, 41 ms", duration_ms=3.0),
]


def _steps() -> tuple[StepView, ...]:
    return (
        StepView(1, "model", "turn 1", {}, "asks for 2 tools", True, 812.0),
        StepView(2, "tool", "lookup_customer", {"customer": "c-1042"},
                 '{"plan": "pro", "card": "visa ****4242"}', True, 35.0),
        StepView(3, "tool", "charge_card", {"customer": "c-1042", "amount": 49.0},
                 "", True, 0.0),
    )


RUNS = (
    RunView("77aa88bb99cc", "e7", "cron", "waiting", "", "", "", 1, NOW - 600, None,
            "unknown_write_outcome", "charge_card (77aa88bb99cc:3)", _steps()),
    RunView("66aa55bb44cc", "e6", "cron", "succeeded", "", "", "Charged 3 customers", 1,
            NOW - 4200, NOW - 4190, "", "", _steps()[:2]),
    RunView("55aa44bb33cc", "e5", "manual", "failed", "tool", "card declined", "", 2,
            NOW - 7300, NOW - 7299, "", "", _steps()[:2]),
)

DETAIL = ProcessDetail(
    summary=PROCESSES[6],
    queued=(QueuedEventView("q1q2q3q4q5q6", "cron", "nightly", NOW - 30,
                            '{"batch": "2026-05-28"}'),
            QueuedEventView("r1r2r3r4r5r6", "manual", "operator", NOW - 10,
                            '{"customer": "c-2001"}')),
    dead_letters=(
        DeadLetterView("d1d2d3d4d5d6", "cron", "retries exhausted", "card API timed out", 3,
                       "2026-05-28T20:20:00+00:00", '{"batch": "2026-05-27"}'),
        DeadLetterView("f1f2f3f4f5f6", "manual", "queue full", "", 0,
                       "2026-05-28T20:25:00+00:00", '{"customer": "c-1999"}'),
        DeadLetterView("b1b2b3b4b5b6", "webhook", "flagged by payload scan",
                       "ignore previous instructions", 1, "2026-05-28T20:26:00+00:00",
                       '{"note": "ignore previous instructions"}'),
    ),
    runs=RUNS,
    context={"customers_charged": 3, "last_batch": "2026-05-27",
             "api_token": "[secret:card_api]"},
    conversation=({"role": "user", "content": "Charge the nightly batch 2026-05-28."},
                  {"role": "assistant", "content": "Looking up customer c-1042."},
                  {"role": "tool", "content": '{"plan": "pro"}'}),
    governance={"health": {"is_healthy": True, "anomaly_count": 0}, "health_anomalies": 0,
                "budget": {"tool_calls_per_day": 158.0, "runs_per_day": None},
                "active_secrets": 1},
    config={"model": "scripted:scripts/payments.yaml",
            "instructions": "Charge the nightly batch; never charge twice.",
            "triggers": [{"type": "cron", "cron_expression": "0 2 * * *"}],
            "journal": {"level": "checkpoint"}, "secrets": {"enabled": True, "secrets": {
                "card_api": "${CARD_API_TOKEN}"}},
            "servers": {"payments": {"type": "http", "url": "https://pay.internal/mcp",
                                     "bearer_token": "${PAYMENTS_MCP_TOKEN}"}}},
    triggers=({"id": "nightly", "type": "cron", "active": True},),
    servers=({"server": "payments", "type": "http", "connected": True, "connections": 1,
              "tools": [{"name": "lookup_customer", "effect": "read", "idempotent": None},
                        {"name": "charge_card", "effect": "write", "idempotent": True},
                        {"name": "refund", "effect": "write", "idempotent": None}]},),
)


# Open ones first, then the latest seen (the order LocalControl.incidents gives).
INCIDENTS = (
    IncidentView("alert-handler", "a1b2c3d4e5f60718293a4b5c6d7e8f90", "open", 1, 4,
                 "disk full on db-1", NOW - 600, NOW - 4, 3, ("a1b2c3d4e5f6",),
                 last_payload='{"alert": "disk full on db-1", "severity": "critical"}'),
    IncidentView("alert-handler", "0f0e0d0c0b0a09080706050403020100", "open", 2, 9,
                 "api latency p99 > 2s", NOW - 1200, NOW - 65, 1,
                 ("5a5a5a5a5a5a", "6b6b6b6b6b6b"), note="it is back",
                 last_payload='{"alert": "api latency p99 > 2s", "p99_ms": 2310}'),
    IncidentView("health-checker", "77aa88bb99cc00dd11ee22ff33aa44bb", "recovered", 1, 3,
                 '["payments-api","healthz"]', NOW - 7200, NOW - 3600, 12, ("0c0c0c0c0c0c",),
                 closed_at=NOW - 3600, resolved_by="recovered_when",
                 last_payload='{"check": "healthz", "status": "resolved"}'),
    IncidentView("alert-handler", "9c9c8d8d7e7e6f6f5a5a4b4b3c3c2d2d", "resolved", 1, 5,
                 "cert expires in 7 days", NOW - 86400 * 2, NOW - 86400, 2, ("4d4d4d4d4d4d",),
                 closed_at=NOW - 86400 + 600, resolved_by="ana", note="renewed",
                 last_payload='{"alert": "cert expires in 7 days"}'),
)


# -- the journal of the scene: entries computed from their seq, so any size costs nothing ------
# One run is eight entries; seq REWIND_SEQ is an operator's rewind.
RUN_SHAPE = (("event_accepted", "cron event {event} accepted"),
             ("run_started", "run started (attempt 1)"),
             ("model_usage", "model: 812 tokens in, 64 out"),
             ("tool_intent", "charge_card write {{\"customer\":\"c-{customer}\"}}"),
             ("tool_result", "charge_card → ok ch_{customer}"),
             ("context_update", "customers_charged = {charged}"),
             ("run_finished", "succeeded: Charged c-{customer}"),
             ("checkpoint", "checkpoint: 3 keys, 6 messages"))
REWIND_SEQ = 52
JOURNAL_SIZE = 60


def scene_entry(seq: int, size: int = JOURNAL_SIZE) -> JournalEntryView:
    """Entry ``seq`` of the scene's journal: one every 20 s, the last one 20 s before NOW."""
    timestamp = NOW - 20.0 * (size - seq + 1)
    if seq == REWIND_SEQ:
        return JournalEntryView(f"payments-sync:{seq}", seq, "rewind", "", timestamp,
                                "rewind to #41 (both) by operator: 2 keys, 2 messages")
    run, step = divmod(seq - 1, len(RUN_SHAPE))
    kind, text = RUN_SHAPE[step]
    run_id = f"{run:02d}ab{run:02d}cd{run:02d}ef" if kind not in ("checkpoint",) else ""
    return JournalEntryView(f"payments-sync:{seq}", seq, kind, run_id, timestamp, text.format(
        event=f"e{run}", customer=1000 + run, charged=run + 1))


def _plan(name: str, entry_id: str, mode: str) -> RewindPlan:
    seq = int(entry_id.rsplit(":", 1)[-1])
    target = scene_entry(seq)
    m = RewindMode(mode)
    state = m in (RewindMode.BOTH, RewindMode.CODE_ONLY, RewindMode.CANCEL)
    chat = m in (RewindMode.BOTH, RewindMode.CONVERSATION_ONLY, RewindMode.CANCEL)
    return RewindPlan(
        process=name, target_entry_id=entry_id, target_seq=seq, target_type=target.entry_type,
        target_timestamp=target.timestamp, mode=m, entries_total=JOURNAL_SIZE,
        entries_affected=JOURNAL_SIZE - seq + 1, conversation_affected=4, state_affected=3,
        other_affected=max(0, JOURNAL_SIZE - seq - 6),
        context_changes=(
            ContextChange("customers_charged", "changed", 7, 5),
            ContextChange("last_batch", "changed", "2026-05-28", "2026-05-27"),
            ContextChange("retry_token", "removed", "tok-19", None),
        ) if state else (),
        messages_dropped=2 if chat else 0,
        dropped_preview=("assistant: Charging customer c-1006 for 49.00",
                         "tool: {\"charge\": \"ch_1006\", \"status\": \"ok\"}") if chat else (),
        outside_effects=(OutsideEffect(f"{name}:{seq + 3}", "06ab06cd06ef", "charge_card",
                                       {"customer": "c-1006", "amount": 49.0}, "ok ch_1006",
                                       target.timestamp + 60),),
        summary="Between #41 and now: 2 customers charged (c-1005, c-1006)."
        if m is RewindMode.SUMMARIZE else "")


class _Stream:
    def __init__(self, events: list[RuntimeEvent]) -> None:
        self._events = list(events)
        self.dropped = 0

    def drain(self, limit: int | None = None) -> list[RuntimeEvent]:
        out, self._events = self._events, []
        return out

    def close(self) -> None:
        pass


class SceneControl:
    """A ControlPlane with frozen data; commands are recorded, never carried out."""

    def __init__(self, *, read_only: bool = False, journal_size: int = JOURNAL_SIZE) -> None:
        self._read_only = read_only
        self.journal_size = journal_size
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.reads: list[dict[str, Any]] = []  # every journal_entries call (paging tests)
        self.incident_list = list(INCIDENTS)  # a test may move one on to make a view stale
        self.link_problem = ""  # a test may set "reconnecting (...)" like an attached room

    @property
    def name(self) -> str:
        return "ops-box-1"

    @property
    def read_only(self) -> bool:
        return self._read_only

    @property
    def link(self) -> str:
        return self.link_problem

    def subscribe(self, maxsize: int = 10_000) -> _Stream:
        return _Stream(EVENTS)

    async def list_processes(self) -> list[ProcessSummary]:
        return list(PROCESSES)

    async def process_detail(self, name: str) -> ProcessDetail:
        for row in PROCESSES:
            if row.name == name:
                from dataclasses import replace

                return replace(DETAIL, summary=row)
        raise ControlError(f"no process named {name!r}")

    async def process_status(self, name: str) -> dict[str, Any]:
        row = next((r for r in PROCESSES if r.name == name), None)
        if row is None:
            raise ControlError(f"no process named {name!r}")
        return {"name": name, "process_id": f"{name}-0001", "state": row.state,
                "invocation_count": row.invocations, "queue_size": row.queue_depth,
                "dead_letter_count": row.dead_letters, "uptime_seconds": 3600.0}

    async def waiting_detail(self, name: str, run_id: str) -> dict[str, Any]:
        return {"run_id": run_id, "event_id": "e7", "reason": "unknown_write_outcome",
                "tool": "charge_card", "args": {"customer": "c-1042", "amount": 49.0},
                "step": 3, "idempotency_key": f"{run_id}:3", "mcp_server": "payments",
                "idempotent": True}

    def _call(self, what: str, *args: Any) -> None:
        if self._read_only:
            raise ReadOnlyError(f"{what} is not allowed: read-only")
        self.calls.append((what, args))

    async def start(self, name: str) -> None:
        self._call("start", name)

    async def stop(self, name: str) -> None:
        self._call("stop", name)

    async def restart(self, name: str) -> None:
        self._call("restart", name)

    async def suspend(self, name: str) -> None:
        self._call("suspend", name)

    async def resume(self, name: str, *, watch_again: bool = False) -> None:
        self._call("resume", name, *(("watch_again",) if watch_again else ()))

    async def inject(self, name: str, payload: dict[str, Any],
                     trigger_type: str = "manual") -> str:
        self._call("inject", name, payload, trigger_type)
        return "e0e0e0e0e0e0"

    async def redeliver(self, name: str, event_ids: Iterable[str] | None = None) -> int:
        ids = list(event_ids) if event_ids is not None else None
        self._call("redeliver", name, ids)
        return len(ids) if ids is not None else 3

    async def clear_dead_letters(self, name: str) -> int:
        self._call("clear", name)
        return 3

    async def reconcile(self, name: str, run_id: str, outcome: str, *, result: Any = None,
                        note: str = "") -> None:
        self._call("reconcile", name, run_id, outcome, result, note)

    async def dead_letters(self, name: str, *, offset: int = 0, limit: int | None = None
                           ) -> list[DeadLetterView]:
        letters = list(DETAIL.dead_letters)[offset:]
        return letters if limit is None else letters[:limit]

    async def journal_entry(self, name: str, entry_id: str) -> dict[str, Any]:
        seq = int(entry_id.rsplit(":", 1)[1])
        entry = scene_entry(seq, self.journal_size)
        return {"entry_id": entry.entry_id, "seq": seq, "entry_type": entry.entry_type,
                "run_id": entry.run_id, "timestamp": entry.timestamp,
                "data": {"summary": entry.summary}}

    async def dead_letter(self, name: str, event_id: str) -> dict[str, Any]:
        letter = next((x for x in DETAIL.dead_letters if x.event_id == event_id), None)
        if letter is None:
            raise ControlError(f"{name} has no dead letter {event_id}", "NOT_FOUND")
        try:  # the scene's previews are whole JSON, as a real payload is data
            payload: Any = json.loads(letter.payload_preview)
        except ValueError:
            payload = letter.payload_preview
        return {"event": {"event_id": letter.event_id, "trigger_type": letter.trigger_type,
                          "payload": payload}, "reason": letter.reason,
                "error": letter.error, "attempts": letter.attempts,
                "dead_lettered_at": letter.dead_lettered_at}

    async def journal_entries(self, name: str, *, before_seq: int | None = None,
                              at_or_before: float | None = None, entry_type: str | None = None,
                              text: str = "", limit: int = 200, after_seq: int | None = None,
                              run_id: str | None = None) -> list[JournalEntryView]:
        self.reads.append(dict(before_seq=before_seq, at_or_before=at_or_before,
                               entry_type=entry_type, text=text, limit=limit))
        size = self.journal_size
        seq = min(size, before_seq - 1) if before_seq is not None else size
        out: list[JournalEntryView] = []
        needle = text.lower()
        while seq >= 1 and len(out) < limit:  # newest first, stop at the page: never all
            entry = scene_entry(seq, size)
            seq -= 1
            if at_or_before is not None and entry.timestamp > at_or_before:
                continue
            if entry_type and entry.entry_type != entry_type:
                continue
            if needle and needle not in f"{entry.entry_type} {entry.summary}".lower():
                continue
            out.append(entry)
        return out

    async def rewind_plan(self, name: str, entry_id: str, mode: str = "both") -> RewindPlan:
        return _plan(name, entry_id, mode)

    async def rewind(self, name: str, entry_id: str, mode: str = "both") -> RewindResult:
        self._call("rewind", name, entry_id, mode)
        return RewindResult(_plan(name, entry_id, mode),
                            "" if mode == "cancel" else f"{name}:{self.journal_size + 1}", NOW)

    async def fork(self, name: str, entry_id: str, new_name: str) -> str:
        self._call("fork", name, entry_id, new_name)
        return new_name

    async def incidents(self, process: str | None = None) -> list[IncidentView]:
        return [v for v in self.incident_list if process in (None, v.process)]

    def _incident(self, action: str, incident_id: str, generation: int,
                  version: int) -> IncidentView:
        """The incident as the runtime would check it: stale generation or version refused."""
        view = next((v for v in self.incident_list if v.incident_id == incident_id), None)
        if view is None:
            raise ControlError(f"no incident {incident_id!r}")
        if (generation, version) != (view.generation, view.version):
            raise ControlError(
                f"{action} refused: incident {incident_id[:8]} is at generation "
                f"{view.generation} version {view.version}, the request was for generation "
                f"{generation} version {version} (it changed since it was read); refresh and "
                "decide again")
        return view

    async def resolve_incident(self, name: str, incident_id: str, *, generation: int,
                               version: int, note: str = "") -> IncidentView:
        self._call("resolve_incident", name, incident_id, generation, version, note)
        view = self._incident("resolve", incident_id, generation, version)
        return replace(view, state="resolved", version=version + 1, closed_at=NOW,
                       resolved_by="operator", note=note)

    async def reopen_incident(self, name: str, incident_id: str, *, generation: int,
                              version: int, note: str = "") -> IncidentView:
        self._call("reopen_incident", name, incident_id, generation, version, note)
        view = self._incident("reopen", incident_id, generation, version)
        return replace(view, state="open", generation=generation + 1, version=version + 1,
                       occurrences=0, closed_at=None, resolved_by="", note=note)

    async def pulse(self, name: str | None = None, *, window: int = 3600,
                    bucket: int = 60) -> list[PulseView]:
        """A seeded hour per process (the same numbers every run)."""
        return [scene_pulse(row.name, index) for index, row in enumerate(PROCESSES)
                if name in (None, row.name)]

    async def start_all(self) -> None:
        pass

    async def close(self) -> None:
        pass


def scene_app(*, theme: str = "promptui-dark", read_only: bool = False,
              journal_size: int = JOURNAL_SIZE, link: str = "") -> ControlRoom:
    themes, _ = load_themes(NO_USER_THEMES)  # only the bundled ones: same bytes everywhere
    control = SceneControl(read_only=read_only, journal_size=journal_size)
    control.link_problem = link
    return ControlRoom(control, themes=themes, theme=theme,
                       clock=lambda: NOW, monotonic=lambda: 0.0, autopump=False,
                       start_runtime=False)
