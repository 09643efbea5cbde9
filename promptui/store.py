"""What the control room knows, fed by the UI pump: the latest process rows, a bounded anomaly
feed, a bounded activity log and short histories for the sparklines. Widgets read from here;
nothing here touches a widget or a runtime object."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from runtime_core.control import ProcessSummary
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
    "mission.failed": "critical",
    "mission.complete": "info",
    "health.recovered": "info",
    "escalation.sent": "warning",
}


@dataclass(frozen=True, slots=True)
class FeedLine:
    at: float
    severity: str  # "info", "warning", "critical"
    process: str
    kind: str
    text: str


def describe(event: RuntimeEvent) -> str:
    """One line a person can read, for the feed and the activity log."""
    d: dict[str, Any] = event.to_dict()
    kind = event.kind
    if kind == "health.anomaly":
        return f"{d['anomaly_type']}: {d['description']}"
    if kind in ("budget.exceeded", "budget.warning"):
        tool = f" ({d['tool']})" if d.get("tool") else ""
        verb = "exceeded" if kind == "budget.exceeded" else "at 80%"
        return f"budget {d['limit_type']} {verb}: {d['current']:g}/{d['limit']:g}{tool}"
    if kind == "process.failed":
        return f"failed: {d.get('error') or d.get('reason', '')}"
    if kind == "process.restarted":
        return f"restarted (attempt {d.get('attempt')}): {d.get('reason', '')}"
    if kind == "process.restart_exhausted":
        return "restarts exhausted; the process stays failed"
    if kind == "event.dead_lettered":
        return f"dead letter {str(d.get('event_id', ''))[:8]}: {d.get('reason', '')}"
    if kind == "run.waiting":
        return f"run {str(d.get('run_id', ''))[:8]} waits: {d.get('reason', '')}"
    if kind == "journal.damaged":
        return f"journal damaged: {d.get('reason', '')}"
    if kind.startswith("mission."):
        return f"mission {d.get('state', '')}: {d.get('reason', '')}"
    if kind == "health.recovered":
        return "healthy again"
    if kind == "process.recovered":
        return "recovered from the journal"
    if kind == "escalation.sent":
        return (f"escalation {d.get('reason', '')} via {d.get('channels', '')}: "
                + (d.get("error") or "delivered"))
    if kind == "run.started":
        return f"run {str(d.get('run_id', ''))[:8]} started ({d.get('trigger_type', '')})"
    if kind == "run.finished":
        tail = d.get("reply") if d.get("state") == "succeeded" else d.get("error") or d.get(
            "reason")
        return (f"run {str(d.get('run_id', ''))[:8]} {d.get('state', '')} "
                f"{float(d.get('duration_ms') or 0):.0f}ms: {str(tail or '')[:120]}")
    return kind


class UIStore:
    def __init__(self) -> None:
        self.processes: dict[str, ProcessSummary] = {}
        self.feed: deque[FeedLine] = deque(maxlen=FEED_LINES)
        self.activity: deque[str] = deque(maxlen=ACTIVITY_LINES)
        self.queue_history: dict[str, deque[float]] = {}
        self.rate_history: dict[str, deque[float]] = {}
        self.events_per_second = 0.0
        self.dropped = 0
        self._window: deque[tuple[float, int]] = deque(maxlen=20)  # (time, events) per tick

    def ingest(self, events: list[RuntimeEvent], now: float,
               elapsed: float) -> tuple[list[FeedLine], list[str]]:
        """Take one tick's events; returns the new feed lines and activity lines."""
        feed: list[FeedLine] = []
        activity: list[str] = []
        per_process: dict[str, int] = {}
        for event in events:
            per_process[event.process] = per_process.get(event.process, 0) + 1
            severity = FEED_KINDS.get(event.kind)
            if severity is not None:
                if event.kind == "escalation.sent" and not event.to_dict().get("error"):
                    severity = "info"
                line = FeedLine(event.timestamp, severity, event.process, event.kind,
                                describe(event))
                feed.append(line)
                self.feed.append(line)
            if event.kind in ("run.started", "run.finished", "process.recovered"):
                text = f"{event.process}: {describe(event)}"
                activity.append(text)
                self.activity.append(text)
        self._window.append((max(elapsed, 1e-6), len(events)))
        seconds = sum(t for t, _ in self._window)
        self.events_per_second = sum(n for _, n in self._window) / seconds if seconds else 0.0
        for name in self.processes:
            rate = per_process.get(name, 0) / max(elapsed, 1e-6)
            self.rate_history.setdefault(name, deque(maxlen=HISTORY_POINTS)).append(rate)
        return feed, activity

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
        self.processes = fresh
        return changed

    def counts_by_state(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for summary in self.processes.values():
            counts[summary.state] = counts.get(summary.state, 0) + 1
        return counts

    @property
    def total_queued(self) -> int:
        return sum(s.queue_depth for s in self.processes.values())
