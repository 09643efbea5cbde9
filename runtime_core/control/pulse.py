"""Pulse: a process's last hour by the minute (runs, failures, p50/p95 run time, tokens and
cost), as the control plane answers it from the journal (``ControlPlane.pulse``) and as the room
keeps it live from the runtime's events after that. ``PulseBuckets`` is the one fold both use,
so the figures read after a restart or an attach and the ones folded live cannot disagree."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

#: The window and the bucket a pulse read covers unless asked otherwise: an hour by the minute.
WINDOW_SECONDS = 3600
BUCKET_SECONDS = 60
#: A run ending in one of these states counts as a failure.
FAILED_STATES = frozenset({"failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class PulseView:
    """One process's minutes, oldest first: ``start`` is the first bucket's start (epoch
    seconds) and every list has one value per bucket. ``p50_ms``/``p95_ms`` are 0 for a minute
    with no run time known; ``cost`` is what the model usage entries recorded as their cost
    (``cost_recorded`` False: no entry in the window recorded one, so there is no figure)."""

    process: str
    start: float
    bucket_seconds: int
    runs: list[int]
    failures: list[int]
    p50_ms: list[float]
    p95_ms: list[float]
    tokens: list[int]
    cost: list[float]
    cost_recorded: bool = False


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile of ``values`` (0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


#: Run times a minute keeps to estimate its p50/p95: a uniform sample of them once there are
#: more (reservoir sampling), so a busy minute (thousands of runs) costs what a quiet one does.
SAMPLES = 256
_SAMPLING = random.Random(36)  # a sample, not a secret: reproducible


@dataclass(slots=True)
class _Minute:
    runs: int = 0
    failures: int = 0
    durations: list[float] = field(default_factory=list)  # at most SAMPLES of them
    timed: int = 0  # run times offered, sampled or not
    tokens: int = 0
    cost: float = 0.0
    queue: int = 0  # the deepest queue seen in the minute (live only: not in the journal)
    quantiles: tuple[float, float] | None = None  # (p50, p95), until a run time arrives

    def add_duration(self, duration_ms: float) -> None:
        self.timed += 1
        self.quantiles = None
        if len(self.durations) < SAMPLES:
            self.durations.append(duration_ms)
            return
        slot = _SAMPLING.randrange(self.timed)  # each of the run times kept as likely
        if slot < SAMPLES:
            self.durations[slot] = duration_ms

    def p50_p95(self) -> tuple[float, float]:
        if self.quantiles is None:
            self.quantiles = (percentile(self.durations, 0.5), percentile(self.durations, 0.95))
        return self.quantiles


class PulseBuckets:
    """A process's minutes over a sliding window. Fold runs and model usage in (any order,
    from the journal or from events); ``view(now)`` gives the window ending at ``now``."""

    def __init__(self, process: str, *, window: int = WINDOW_SECONDS,
                 bucket: int = BUCKET_SECONDS) -> None:
        self.process = process
        self.window = window
        self.bucket = bucket
        self.cost_recorded = False
        self._minutes: dict[int, _Minute] = {}

    def _at(self, ts: float) -> _Minute:
        key = int(ts // self.bucket)
        minute = self._minutes.get(key)
        if minute is None:
            minute = self._minutes[key] = _Minute()
            if len(self._minutes) > self.window // self.bucket + 2:  # a new minute: the
                self.trim(ts)  # oldest leave, so a fold running for days stays an hour long
        return minute

    def run(self, ts: float, state: str, duration_ms: float | None = None, count: int = 1,
            failures: int | None = None) -> None:
        """``count`` runs ended at ``ts`` in ``state`` (``failures`` overrides how many of
        them failed, for a journal's grouped counts); a known run time adds to p50/p95."""
        minute = self._at(ts)
        minute.runs += count
        minute.failures += (count if state in FAILED_STATES else 0) if failures is None \
            else failures
        if duration_ms is not None and duration_ms > 0:
            minute.add_duration(duration_ms)

    def duration(self, ts: float, duration_ms: float) -> None:
        """A run time alone (the journal gives counts and run times in separate reads)."""
        if duration_ms > 0:
            self._at(ts).add_duration(duration_ms)

    def usage(self, ts: float, tokens: int, cost: float | None = None) -> None:
        """Model usage at ``ts``: tokens in and out, and its cost when it recorded one."""
        minute = self._at(ts)
        minute.tokens += tokens
        if cost is not None:
            minute.cost += cost
            self.cost_recorded = True

    def queue(self, ts: float, depth: int) -> None:
        """A queue depth seen at ``ts`` (the room samples it every tick; the minute keeps its
        deepest)."""
        minute = self._at(ts)
        minute.queue = max(minute.queue, depth)

    def queue_series(self, now: float) -> list[int]:
        """The deepest queue of each minute of the window, oldest first (0: not seen)."""
        last = int(now // self.bucket)
        count = max(1, self.window // self.bucket)
        return [self._minutes[k].queue if k in self._minutes else 0
                for k in range(last - count + 1, last + 1)]

    def trim(self, now: float) -> None:
        """Forget the minutes that left the window (keeps a live fold bounded)."""
        first = int(now // self.bucket) - self.window // self.bucket + 1
        for key in [k for k in self._minutes if k < first]:
            del self._minutes[key]

    def view(self, now: float) -> PulseView:
        last = int(now // self.bucket)
        count = max(1, self.window // self.bucket)
        keys = range(last - count + 1, last + 1)
        empty = _Minute()
        minutes = [self._minutes.get(k, empty) for k in keys]
        quantiles = [m.p50_p95() for m in minutes]
        return PulseView(
            self.process, float(keys[0] * self.bucket), self.bucket,
            [m.runs for m in minutes], [m.failures for m in minutes],
            [q[0] for q in quantiles], [q[1] for q in quantiles],
            [m.tokens for m in minutes], [round(m.cost, 6) for m in minutes],
            self.cost_recorded)

    @classmethod
    def combined(cls, process: str, parts: list[PulseBuckets], *, window: int = WINDOW_SECONDS,
                 bucket: int = BUCKET_SECONDS) -> PulseBuckets:
        """Every process together: counts, tokens, cost and queues added up, run times pooled
        (so the p95 of all is the p95 of every run, not an average of p95s)."""
        total = cls(process, window=window, bucket=bucket)
        for part in parts:
            total.cost_recorded = total.cost_recorded or part.cost_recorded
            for key, minute in part._minutes.items():
                into = total._minutes.setdefault(key, _Minute())
                into.runs += minute.runs
                into.failures += minute.failures
                for duration in minute.durations:  # a sample of the samples past SAMPLES
                    into.add_duration(duration)
                into.tokens += minute.tokens
                into.cost += minute.cost
                into.queue += minute.queue
        return total

    @classmethod
    def from_view(cls, view: PulseView, *, window: int = WINDOW_SECONDS) -> PulseBuckets:
        """Buckets that go on from a read (the room folds live events on top of it). The
        read's p50/p95 stand in as one run time each for their minute."""
        return cls(view.process, window=window, bucket=view.bucket_seconds).seed(view)

    def seed(self, view: PulseView) -> PulseBuckets:
        """Take the journal's figures for the minutes ``view`` covers (the live queue depths
        stay: the journal has none)."""
        self.cost_recorded = self.cost_recorded or view.cost_recorded
        for index, runs in enumerate(view.runs):
            if not (runs or view.tokens[index] or view.cost[index]):
                continue
            minute = self._at(view.start + index * view.bucket_seconds)
            minute.runs, minute.failures = runs, view.failures[index]
            minute.tokens, minute.cost = view.tokens[index], view.cost[index]
            minute.durations = [d for d in (view.p50_ms[index], view.p95_ms[index]) if d > 0]
            minute.timed, minute.quantiles = len(minute.durations), None
        return self
