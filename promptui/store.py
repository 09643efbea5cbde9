"""What the control room knows, fed by the UI pump: the latest process rows, a bounded anomaly
feed, a bounded activity log and short histories for the sparklines. Widgets read from here;
nothing here touches a widget or a runtime object."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from runtime_core.control.pulse import PulseBuckets
from runtime_core.control.views import ProcessSummary
from runtime_core.events import RuntimeEvent

FEED_LINES = 2000
ACTIVITY_LINES = 2000
HISTORY_POINTS = 60

# Events an operator must see, and how loudly.
FEED_KINDS = {
    "health.anomaly": "warning",
    "budget.exceeded": "critical",
    "budget.warning": "warning",
    "process.failed": "critical",
    "process.restart_exhausted": "critical",
    "process.restarted": "warning",
    "event.dead_lettered": "warning",
    "run.waiting": "critical",
    "journal.damaged": "critical",
    "journal.fault": "critical",
    "process.draining": "info",
    "mission.failed": "critical",
    "mission.complete": "info",
    "health.recovered": "info",
    "escalation.sent": "warning",
    "cluster.ownership": "warning",  # info when the process was gained
}
# Incidents reach the feed when they open, reopen or close; an occurrence or a linked run
# only refreshes the incidents screen.
INCIDENT_FEED = {"opened": "warning", "reopened": "warning", "recovered": "info",
                 "resolved": "info"}


@dataclass(frozen=True, slots=True)
class FeedLine:
    at: float
    severity: str  # "info", "warning", "critical"
    process: str
    kind: str
    text: str
    run_id: str = ""  # the run it is about, when there is one: Enter drills down to it


@dataclass(frozen=True, slots=True)
class ActivityLine:
    """One line of the activity log or the live tail (rendered with its time by a widget)."""

    at: float
    process: str  # "" for a summary line
    kind: str
    text: str
    run_id: str = ""


def describe(event: RuntimeEvent) -> str:
    """One line a person can read, for the feed and the activity log. Reads attributes
    directly: this runs for thousands of events a second."""
    kind = event.kind
    get = event.__getattribute__
    if kind == "run.started":
        return f"run {get('run_id')[:8]} started ({get('trigger_type')})"
    if kind == "run.finished":
        ok = get("state") == "succeeded"
        tail = get("reply") if ok else get("error") or get("reason")
        return (f"run {get('run_id')[:8]} {get('state')} {get('duration_ms'):.0f}ms: "
                f"{str(tail or '')[:120]}")
    if kind == "health.anomaly":
        return f"{get('anomaly_type')}: {get('description')}"
    if kind in ("budget.exceeded", "budget.warning"):
        tool = f" ({get('tool')})" if getattr(event, "tool", "") else ""
        verb = "exceeded" if kind == "budget.exceeded" else "at 80%"
        return f"budget {get('limit_type')} {verb}: {get('current'):g}/{get('limit'):g}{tool}"
    if kind == "process.failed":
        return f"failed: {get('error') or get('reason')}"
    if kind == "process.restarted":
        return f"restarted (attempt {get('attempt')}): {get('reason')}"
    if kind == "process.restart_exhausted":
        return "restarts exhausted; the process stays failed"
    if kind == "event.dead_lettered":
        return f"dead letter {get('event_id')[:8]}: {get('reason')}"
    if kind == "run.waiting":
        if get("reason") == "elicitation":  # the tool call is open: somebody must answer
            return f"run {get('run_id')[:8]} asks the operator: {get('tool')} (enter: answer)"
        return f"run {get('run_id')[:8]} waits: {get('reason')}"
    if kind == "journal.damaged":
        moved = get("moved_to")
        return (f"journal damaged: {get('reason')}" + (
            f"; left behind at {moved} (promptui journal salvage {moved})" if moved else ""))
    if kind == "journal.fault":
        reason = get("reason")
        return (f"journal {get('path')} cannot be written: {reason}; events are refused"
                if reason else f"journal {get('path')} writes again")
    if kind == "process.draining":
        return f"draining: {get('runs')} run(s) may finish, up to {get('timeout'):g} s"
    if kind.startswith("mission."):
        return f"mission {get('state')}: {get('reason')}"
    if kind == "health.recovered":
        return "healthy again"
    if kind == "process.recovered":
        return "recovered from the journal"
    if kind == "incident.changed":
        return (f"incident {get('incident_id')[:8]} {get('action')} (generation "
                f"{get('generation')}): {str(get('fingerprint'))[:80]}")
    if kind == "mcp.log":
        return f"{get('server')} [{get('level')}] {get('text')}"
    if kind == "escalation.sent":
        return (f"escalation {get('reason')} via {get('channels')}: "
                + (get("error") or "delivered"))
    if kind == "cluster.ownership":
        if get("gained"):
            return f"runs on node {get('node')} now (lease epoch {get('epoch')})"
        return f"node {get('node')} stepped down (epoch {get('epoch')}): {get('reason')}"
    return kind


# What rings the bell and counts as "new since you last looked" (alerts).
ALERT_KINDS = frozenset({"health.anomaly", "run.waiting"})
PULSE_KINDS = frozenset({"run.finished", "run.step"})  # folded into the pulse's minutes
ACTIVITY_PER_TICK = 40  # more than this in one tick is summarised: nobody reads 4,000 lines/s
TAIL_LINES = 5000  # the live tail keeps this many lines
TAIL_PER_TICK = 400  # the live tail shows every event up to this many a tick, then counts
# What the live tail shows: every process's runs and steps, and what happens to its events.
TAIL_KINDS = frozenset({"run.queued", "run.started", "run.step", "run.finished", "run.waiting",
                        "event.dead_lettered", "process.state", "process.recovered",
                        "process.draining", "journal.fault", "health.anomaly",
                        "budget.exceeded", "incident.changed", "escalation.sent", "mcp.log",
                        "cluster.ownership"})
# What the activity log shows (server logs come rate-limited by the runtime).
ACTIVITY_KINDS = frozenset({"run.started", "run.finished", "process.recovered", "mcp.log",
                            "cluster.ownership"})
PROGRESS_KEPT = 500  # running tool calls whose progress is remembered
PROGRESS_KINDS = frozenset({"tool.progress", "run.step", "run.finished", "run.waiting"})


@dataclass(frozen=True, slots=True)
class ProgressLine:
    """The latest progress of a running tool call (a ``tool.progress`` event)."""

    process: str
    run_id: str
    step: int
    tool: str
    progress: float
    total: float | None
    message: str

    @property
    def fraction(self) -> float | None:
        if self.total is None or self.total <= 0:
            return None
        return max(0.0, min(1.0, self.progress / self.total))


def tail_text(event: RuntimeEvent) -> str:
    """The live tail's words for an event: the activity's, plus steps and queueing."""
    kind = event.kind
    get = event.__getattribute__
    if kind == "run.step":
        detail = f": {get('detail')}" if get("detail") else ""
        return (f"run {get('run_id')[:8]} step {get('step')} {get('step_kind')} "
                f"{get('name')}{detail}")
    if kind == "run.queued":
        return f"event {get('event_id')[:8]} queued ({get('trigger_type')})"
    if kind == "process.state":
        reason = f" ({get('reason')})" if get("reason") else ""
        return f"{get('from_state')} -> {get('to_state')}{reason}"
    return describe(event)


class ProcessFilter:
    """The dashboard's `/` filter: a regex on a process's name or state; `!re` inverts it.
    Shared by the process table and the live tail, so both show the same processes."""

    def __init__(self, text: str = "") -> None:
        self.text = ""
        self.error = ""
        self._pattern: re.Pattern[str] | None = None
        self._invert = False
        self.set(text)

    def set(self, text: str) -> str:
        """Take a new filter text; returns the error ("" when it is a valid regex). An invalid
        one keeps the previous filter."""
        invert = text.startswith("!")
        try:
            pattern = re.compile(text[1:] if invert else text, re.IGNORECASE) if text else None
        except re.error as exc:
            self.error = f"bad filter {text!r}: {exc}"
            return self.error
        self.text, self.error, self._pattern, self._invert = text, "", pattern, invert
        return ""

    def matches(self, name: str, state: str = "") -> bool:
        if self._pattern is None:
            return True
        found = bool(self._pattern.search(name) or (state and self._pattern.search(state)))
        return found != self._invert


class UIStore:
    def __init__(self) -> None:
        self.processes: dict[str, ProcessSummary] = {}
        self.feed: deque[FeedLine] = deque(maxlen=FEED_LINES)
        self.activity: deque[ActivityLine] = deque(maxlen=ACTIVITY_LINES)
        self.tail: deque[ActivityLine] = deque(maxlen=TAIL_LINES)
        self.tail_count = 0  # every tail line ever added: a screen keeps its place by it
        self.process_filter = ProcessFilter()
        self.queue_history: dict[str, deque[float]] = {}
        self.rate_history: dict[str, deque[float]] = {}
        self.events_per_second = 0.0
        self.dropped = 0
        self.incident_changes = 0  # incident events seen: the incidents screen re-reads on news
        self.progress: dict[str, ProgressLine] = {}  # run id -> its running tool's progress
        #: How every widget shows times ("iso" or "relative"): the room's time key toggles it.
        self.time_mode: Literal["iso", "relative"] = "iso"  # format.TimeMode (a sibling layer)
        self._window: deque[tuple[float, int]] = deque(maxlen=20)  # (time, events) per tick
        #: Each process's last hour by the minute (the pulse screen), live from the events and
        #: seeded from the journal when the pulse screen opens.
        self.pulse: dict[str, PulseBuckets] = {}
        #: Every process together, folded as the events come (combining 200 processes' hours
        #: every second would cost the event loop what the pulse screen is for).
        self.pulse_all = PulseBuckets("all")
        #: New anomalies and waiting runs since the operator last looked (``seen_alerts``);
        #: ``alerts_rung`` counts every one ever seen (the app rings the bell on news).
        self.unseen_alerts = 0
        self.alerts_rung = 0

    def recall_anomalies(self, process: str, anomalies: list[dict[str, object]]) -> int:
        """Put anomalies found before the room opened (a health monitor's recent ones, read
        on attach) into the feed, in time order before what arrived since; one the feed
        already holds is not added twice. Returns how many were added."""
        held = {(line.process, line.text) for line in self.feed if line.kind == "health.anomaly"}
        recalled = []
        for anomaly in anomalies:
            text = f"{anomaly.get('type')}: {anomaly.get('description')}"
            if (process, text) in held:
                continue
            held.add((process, text))
            recalled.append(FeedLine(_epoch(anomaly.get("timestamp")), "warning", process,
                                     "health.anomaly", text))
        if recalled:
            lines = sorted([*recalled, *self.feed], key=lambda line: line.at)
            self.feed.clear()
            self.feed.extend(lines[-(self.feed.maxlen or len(lines)):])
        return len(recalled)

    def ingest(self, events: list[RuntimeEvent], now: float,
               elapsed: float) -> tuple[list[FeedLine], list[ActivityLine]]:
        """Take one tick's events; returns the new feed lines and activity lines."""
        feed: list[FeedLine] = []
        activity: list[ActivityLine] = []
        per_process: dict[str, int] = {}
        activity_events: list[RuntimeEvent] = []
        tail: list[ActivityLine] = []
        tail_skipped = 0
        for event in events:
            if event.kind in TAIL_KINDS:
                if len(tail) < TAIL_PER_TICK:
                    tail.append(ActivityLine(event.timestamp, event.process, event.kind,
                                             tail_text(event), _run_of(event)))
                else:
                    tail_skipped += 1
            per_process[event.process] = per_process.get(event.process, 0) + 1
            severity = FEED_KINDS.get(event.kind)
            if event.kind == "incident.changed":
                self.incident_changes += 1
                severity = INCIDENT_FEED.get(getattr(event, "action", ""))
            if severity is not None:
                if event.kind == "escalation.sent" and not getattr(event, "error", ""):
                    severity = "info"  # delivered
                if event.kind == "journal.fault" and not getattr(event, "reason", ""):
                    severity = "info"  # writing again
                if event.kind == "cluster.ownership" and getattr(event, "gained", False):
                    severity = "info"
                line = FeedLine(event.timestamp, severity, event.process, event.kind,
                                describe(event), _run_of(event))
                feed.append(line)
                self.feed.append(line)
            if event.kind in ACTIVITY_KINDS:
                activity_events.append(event)
            if event.kind in PROGRESS_KINDS:
                self._progress(event)
            if event.kind in PULSE_KINDS:
                self._pulse(event)
            if event.kind in ALERT_KINDS:
                self.unseen_alerts += 1
                self.alerts_rung += 1
        skipped = len(activity_events) - ACTIVITY_PER_TICK
        if skipped > 0:
            activity.append(ActivityLine(now, "", "summary",
                                         f"… {skipped} more lines this tick (runs started or "
                                         "finished, server logs)"))
            activity_events = activity_events[-ACTIVITY_PER_TICK:]
        activity.extend(ActivityLine(e.timestamp, e.process, e.kind, describe(e), _run_of(e))
                        for e in activity_events)
        self.activity.extend(activity)
        if tail_skipped:
            tail.append(ActivityLine(now, "", "summary",
                                     f"… {tail_skipped} more events this tick (not shown)"))
        self.tail.extend(tail)
        self.tail_count += len(tail)
        self._window.append((max(elapsed, 1e-6), len(events)))
        seconds = sum(t for t, _ in self._window)
        self.events_per_second = sum(n for _, n in self._window) / seconds if seconds else 0.0
        queued = 0
        for name in self.processes:
            rate = per_process.get(name, 0) / max(elapsed, 1e-6)
            self.rate_history.setdefault(name, deque(maxlen=HISTORY_POINTS)).append(rate)
            depth = self.processes[name].queue_depth
            queued += depth
            if depth or name in self.pulse:  # the pulse's queue series: each minute's deepest
                self.pulse_of(name).queue(now, depth)
        self.pulse_all.queue(now, queued)
        return feed, activity

    def _progress(self, event: RuntimeEvent) -> None:
        """Keep the latest progress of each running tool call; the step's end clears it."""
        run_id = _run_of(event)
        if event.kind == "tool.progress":
            get = event.__getattribute__
            self.progress.pop(run_id, None)  # re-inserted last: the oldest go first
            self.progress[run_id] = ProgressLine(
                event.process, run_id, int(get("step")), str(get("tool")),
                float(get("progress")), get("total"), str(get("message") or ""))
            while len(self.progress) > PROGRESS_KEPT:
                del self.progress[next(iter(self.progress))]
            return
        shown = self.progress.get(run_id)
        if shown is not None and (event.kind != "run.step" or
                                  int(getattr(event, "step", 0)) >= shown.step):
            del self.progress[run_id]

    def _pulse(self, event: RuntimeEvent) -> None:
        """A run's end (its run time) or a model step's tokens, into its process's minute."""
        buckets = self.pulse_of(event.process)
        get = event.__getattribute__
        for into in (buckets, self.pulse_all):
            if event.kind == "run.finished":
                into.run(event.timestamp, str(get("state")), float(get("duration_ms")))
            elif get("step_kind") == "model":
                into.usage(event.timestamp, int(get("input_tokens")) + int(get("output_tokens")))

    def pulse_of(self, process: str) -> PulseBuckets:
        buckets = self.pulse.get(process)
        if buckets is None:
            buckets = self.pulse[process] = PulseBuckets(process)
        return buckets

    def seen_alerts(self) -> None:
        """The operator looked (the anomaly feed focused, or the inbox opened)."""
        self.unseen_alerts = 0

    def progress_of(self, process: str) -> dict[str, ProgressLine]:
        return {k: v for k, v in self.progress.items() if v.process == process}

    def update_processes(self, summaries: list[ProcessSummary]) -> set[str]:
        """Replace the rows; returns the names whose row changed (added ones included)."""
        changed: set[str] = set()
        fresh: dict[str, ProcessSummary] = {}
        for summary in summaries:
            fresh[summary.name] = summary
            if self.processes.get(summary.name) != summary:
                changed.add(summary.name)
            self.queue_history.setdefault(
                summary.name, deque(maxlen=HISTORY_POINTS)).append(float(summary.queue_depth))
        for gone in set(self.processes) - set(fresh):
            changed.add(gone)
            self.queue_history.pop(gone, None)
            self.rate_history.pop(gone, None)
            self.pulse.pop(gone, None)
        self.processes = fresh
        return changed

    def counts_by_state(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for summary in self.processes.values():
            counts[summary.state] = counts.get(summary.state, 0) + 1
        return counts

    @property
    def journal_faults(self) -> int:
        """Processes whose journal cannot be written now."""
        return sum(1 for s in self.processes.values() if s.journal_fault)

    @property
    def journals_left_behind(self) -> list[str]:
        """Damaged journals moved aside at start (on_damage: start_fresh), one line each."""
        return sorted({line for s in self.processes.values() for line in s.journal_left_behind})

    @property
    def draining(self) -> tuple[int, int]:
        """Processes draining, and the runs they still let finish."""
        rows = [s for s in self.processes.values() if s.draining]
        return len(rows), sum(s.active_runs for s in rows)

    @property
    def total_queued(self) -> int:
        return sum(s.queue_depth for s in self.processes.values())


def _run_of(event: RuntimeEvent) -> str:
    run_id = getattr(event, "run_id", None)
    return run_id if isinstance(run_id, str) else ""


def _epoch(stamp: object) -> float:
    """An ISO 8601 time (as the health monitor writes them) in epoch seconds; 0 if none."""
    try:
        return datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return 0.0
