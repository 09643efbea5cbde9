"""The runtime's Prometheus metrics, for ``GET /metrics`` (metrics_route.py). One registry per
served runtime, never the library's global one (a test interpreter starts many runtimes).

Two sources, both outside the hot paths:

- counters and histograms fed by the runtime's event notifier (the road the API's event log
  and the room take): runs by outcome and their durations, events queued or dead-lettered by
  trigger type, model tokens by model;
- gauges read at scrape time from what the runtime already keeps: each process's status
  snapshot (state, queue, dead letters, waiting runs), the journals' commit-time histograms
  (kept by their writers) and faults, and a cluster node's leases.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from runtime_core.events import (
    EventDeadLettered,
    EventNotifier,
    RunFinished,
    RunQueued,
    RunStep,
    RuntimeEvent,
    RunWaiting,
)
from runtime_core.journal.commit_times import CommitTimes, CommitTimesSnapshot
from runtime_core.lifecycle import ProcessState

if TYPE_CHECKING:  # psycopg loads only for a cluster node
    from runtime_core.cluster.host import ClusterHost
    from runtime_core.runtime import AgentRuntime

log = logging.getLogger("promptui.metrics")

#: Run durations in seconds: a scripted run takes ms, a model's turns seconds to minutes.
RUN_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
               600.0, 1800.0)
#: The run outcomes ``promptui_runs_total`` counts: a run's terminal states, and ``waiting``
#: for a run that parked for an operator (it may finish later and count again).
OUTCOMES = ("succeeded", "failed", "cancelled")


class Metrics:
    """The registry of one served runtime. ``attach`` it to the runtime's notifier (the API
    does when it builds its app); ``exposition()`` is the text a scrape gets."""

    def __init__(self, runtime: AgentRuntime, cluster: ClusterHost | None = None) -> None:
        self.registry = CollectorRegistry()
        self.runs = Counter("promptui_runs", "Runs that ended, by outcome (waiting: parked for "
                            "an operator)", ["process", "outcome"], registry=self.registry)
        self.run_seconds = Histogram("promptui_run_duration_seconds", "How long runs took, "
                                     "from start to end", ["process"], buckets=RUN_BUCKETS,
                                     registry=self.registry)
        self.events = Counter("promptui_events", "Events by trigger type: accepted (queued, "
                              "also by a redelivery) or dead_lettered",
                              ["process", "trigger_type", "result"], registry=self.registry)
        self.tokens = Counter("promptui_model_tokens", "Model tokens used, by model and kind "
                              "(input or output)", ["process", "model", "kind"],
                              registry=self.registry)
        self.registry.register(RuntimeCollector(runtime, cluster))
        self._notifier: EventNotifier | None = None

    def attach(self, notifier: EventNotifier) -> None:
        """Count the events ``notifier`` emits from now on."""
        self.detach()
        self._notifier = notifier
        notifier.add_callback(self.on_event)

    def detach(self) -> None:
        """Stop counting (the server is stopping)."""
        if self._notifier is not None:
            self._notifier.remove_callback(self.on_event)
            self._notifier = None

    def on_event(self, event: RuntimeEvent) -> None:
        """Count one runtime event (a notifier callback: quick, never raises)."""
        try:
            self._count(event)
        except Exception:  # a metric must never break the notifier's other listeners
            log.exception("metrics: cannot count a %s event", event.kind)

    def _count(self, event: RuntimeEvent) -> None:
        process = event.process
        if isinstance(event, RunFinished):
            if event.state in OUTCOMES:
                self.runs.labels(process, event.state).inc()
                self.run_seconds.labels(process).observe(event.duration_ms / 1000.0)
        elif isinstance(event, RunWaiting):
            self.runs.labels(process, "waiting").inc()
        elif isinstance(event, RunQueued):
            self.events.labels(process, event.trigger_type, "accepted").inc()
        elif isinstance(event, EventDeadLettered):
            self.events.labels(process, event.trigger_type, "dead_lettered").inc()
        elif isinstance(event, RunStep) and event.step_kind == "model":
            model = event.name or "model"
            if event.input_tokens:
                self.tokens.labels(process, model, "input").inc(event.input_tokens)
            if event.output_tokens:
                self.tokens.labels(process, model, "output").inc(event.output_tokens)

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric, now."""
        return generate_latest(self.registry)


#: a trigger's status count -> the reason label of promptui_events_refused_total
REFUSAL_FIELDS = (("rejected", "rejected"), ("duplicates", "duplicate"), ("ignored", "filtered"))


class RuntimeCollector(Collector):
    """The gauges read at scrape time: each one a cheap synchronous read of what the runtime
    keeps (status snapshots, the journals' commit histograms, a node's leases)."""

    def __init__(self, runtime: AgentRuntime, cluster: ClusterHost | None) -> None:
        self.runtime = runtime
        self.cluster = cluster

    def collect(self) -> Iterable[Metric]:
        """The metrics of this scrape."""
        yield from self._processes()
        yield self._refused()
        yield from self._journals()
        if self.cluster is not None:
            yield from self._leases(self.cluster)

    def _processes(self) -> Iterator[Metric]:
        state = GaugeMetricFamily("promptui_process_state", "1 for the process's lifecycle "
                                  "state, 0 for the others", labels=["process", "state"])
        queued = GaugeMetricFamily("promptui_queue_depth", "Events queued, not yet running",
                                   labels=["process"])
        retries = GaugeMetricFamily("promptui_pending_retries", "Events waiting to be "
                                    "retried", labels=["process"])
        dead = GaugeMetricFamily("promptui_dead_letters", "Dead letters held (redeliver them "
                                 "from the room or the API)", labels=["process"])
        waiting = GaugeMetricFamily("promptui_runs_waiting", "Runs parked for an operator",
                                    labels=["process"])
        active = GaugeMetricFamily("promptui_runs_active", "Runs in flight",
                                   labels=["process"])
        for process in list(self.runtime.processes.values()):
            status = process.status_snapshot()
            name = status.name
            for each in ProcessState:
                state.add_metric([name, each.value], 1.0 if status.state == each.value else 0.0)
            queued.add_metric([name], status.queue_size)
            retries.add_metric([name], status.pending_retries)
            dead.add_metric([name], status.dead_letter_total)
            waiting.add_metric([name], status.waiting_runs)
            active.add_metric([name], status.active_runs)
        yield from (state, queued, retries, dead, waiting, active)

    def _refused(self) -> Metric:
        """What the webhook triggers answered without taking an event: refused (a bad
        signature or source, too large, 503 while there is no room or the journal cannot
        take it), a sender's duplicate (200 with the first event's id), filtered out. Read
        from the triggers' own counts (a node's standbys too), so a restart starts them at 0."""
        refused = CounterMetricFamily("promptui_events_refused", "Requests a trigger answered "
                                      "without taking an event, by reason: rejected (4xx, or "
                                      "503 when it had no room), duplicate, filtered",
                                      labels=["process", "trigger_type", "reason"])
        counts: dict[tuple[str, str, str], float] = {}

        def add(process: str, trigger_type: str, details: dict[str, object]) -> None:
            for field, reason in REFUSAL_FIELDS:
                value = details.get(field)
                if isinstance(value, int) and not isinstance(value, bool):
                    key = (process, trigger_type, reason)
                    counts[key] = counts.get(key, 0.0) + value

        for process in list(self.runtime.processes.values()):
            for trigger in process.status_snapshot().triggers:
                add(process.name, trigger.trigger_type, trigger.details)
        if self.cluster is not None:
            for standby in self.cluster.webhooks.status():
                add(str(standby.get("process")), "webhook", standby)
        for labels, value in sorted(counts.items()):
            refused.add_metric(list(labels), value)
        return refused

    def _journals(self) -> Iterator[Metric]:
        faulty = bool(self.runtime.journal_faults())
        journal_state = GaugeMetricFamily("promptui_journal_state", "1 for the journals' "
                                          "state: ok, or degraded while one cannot commit "
                                          "(it retries and heals by itself)",
                                          labels=["state"])
        journal_state.add_metric(["ok"], 0.0 if faulty else 1.0)
        journal_state.add_metric(["degraded"], 1.0 if faulty else 0.0)
        yield journal_state
        commits = HistogramMetricFamily("promptui_journal_commit_seconds", "How long a journal "
                                        "group commit took (one batch of entries, its fsync "
                                        "or network round trip included)")
        merged = merge(self._commit_times())
        if merged is not None:
            commits.add_metric([], buckets(merged), merged.total_seconds)
        yield commits

    def _commit_times(self) -> Iterator[CommitTimesSnapshot]:
        seen: set[int] = set()
        journals = [p.journal for p in list(self.runtime.processes.values())]
        if self.cluster is not None:  # a node's journals, also of processes starting here
            journals += [owned.journal for owned in list(self.cluster.owned.values())]
        for journal in journals:
            if journal is None or id(journal) in seen:
                continue
            seen.add(id(journal))  # processes may share one journal
            times = getattr(journal, "commit_times", None)
            if isinstance(times, CommitTimes):
                yield times.snapshot()

    def _leases(self, cluster: ClusterHost) -> Iterator[Metric]:
        owned = dict(cluster.owned)
        held = GaugeMetricFamily("promptui_cluster_leases", "Process leases this node holds",
                                 labels=["node"])
        held.add_metric([cluster.node_id], len(owned))
        epochs = GaugeMetricFamily("promptui_cluster_lease_epoch", "The fencing epoch of each "
                                   "lease this node holds", labels=["process"])
        for name, lease in sorted(owned.items()):
            epochs.add_metric([name], lease.epoch)
        yield from (held, epochs)


def merge(snapshots: Iterable[CommitTimesSnapshot]) -> CommitTimesSnapshot | None:
    """The sum of histograms with the same bounds (every journal uses COMMIT_BUCKETS)."""
    merged: CommitTimesSnapshot | None = None
    for snap in snapshots:
        if merged is None:
            merged = snap
        elif snap.bounds == merged.bounds:
            merged = CommitTimesSnapshot(
                merged.bounds, tuple(a + b for a, b in zip(merged.counts, snap.counts,
                                                            strict=True)),
                merged.total_seconds + snap.total_seconds, merged.count + snap.count)
    return merged


def buckets(snap: CommitTimesSnapshot) -> list[tuple[str, float]]:
    """Cumulative (le, count) pairs, ending with +Inf, as the text format wants them."""
    pairs: list[tuple[str, float]] = []
    running = 0
    for bound, count in zip((*map(repr, snap.bounds), "+Inf"), snap.counts, strict=True):
        running += count
        pairs.append((bound, float(running)))
    return pairs
