"""Typed runtime events and the notifier the control room subscribes to.

The runtime never waits for a subscriber: each subscription is a bounded buffer that drops its
oldest event when full and counts the drop, so a slow UI cannot slow the agents down.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ClassVar, Literal

from runtime_core.event_sinks import CallbackSink

log = logging.getLogger(__name__)

Severity = Literal["debug", "info", "warning", "critical"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeEvent:
    """Base of every event. ``kind`` names the event type on the wire (e.g. ``run.finished``)."""

    kind: ClassVar[str] = "runtime.event"
    severity: ClassVar[Severity] = "info"

    process: str
    timestamp: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["kind"] = self.kind
        data["severity"] = self.severity
        return data

    @property
    def event_type(self) -> str:
        """The type, e.g. ``process.started`` (the reference's name for ``kind``)."""
        return self.kind

    @property
    def agent_id(self) -> str:
        """The process's name (the reference's name for ``process``)."""
        return self.process

    @property
    def data(self) -> dict[str, Any]:
        """The fields but ``process`` and ``timestamp`` (the reference's ``data``)."""
        return {k: v for k, v in asdict(self).items() if k not in ("process", "timestamp")}

    def redacted(self, redact: Callable[[str], str]) -> RuntimeEvent:
        """This event with ``redact`` applied to every text in it (itself when none changes)."""
        changes = {}
        for item in fields(self):
            value = getattr(self, item.name)
            shown = _redact_value(value, redact)
            if shown != value:
                changes[item.name] = shown
        return replace(self, **changes) if changes else self


def _redact_value(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redact_value(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_redact_value(v, redact) for v in value)
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessStateChanged(RuntimeEvent):
    kind: ClassVar[str] = "process.state"
    from_state: str
    to_state: str
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessStarted(RuntimeEvent):
    kind: ClassVar[str] = "process.started"
    process_id: str
    restart: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessStopped(RuntimeEvent):
    kind: ClassVar[str] = "process.stopped"
    process_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessDraining(RuntimeEvent):
    """A stop that lets the runs in flight finish first (up to ``timeout`` seconds)."""

    kind: ClassVar[str] = "process.draining"
    process_id: str
    runs: int
    timeout: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessFailed(RuntimeEvent):
    kind: ClassVar[str] = "process.failed"
    severity: ClassVar[Severity] = "critical"
    process_id: str
    reason: str
    error: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessRestarted(RuntimeEvent):
    kind: ClassVar[str] = "process.restarted"
    severity: ClassVar[Severity] = "warning"
    process_id: str
    reason: str
    attempt: int | None
    max_restarts: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RestartExhausted(RuntimeEvent):
    kind: ClassVar[str] = "process.restart_exhausted"
    severity: ClassVar[Severity] = "critical"
    process_id: str
    restarts: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueDepth(RuntimeEvent):
    kind: ClassVar[str] = "queue.depth"
    severity: ClassVar[Severity] = "debug"
    queued: int
    pending_retries: int
    dead_letters: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQueued(RuntimeEvent):
    kind: ClassVar[str] = "run.queued"
    severity: ClassVar[Severity] = "debug"
    event_id: str
    trigger_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(RuntimeEvent):
    kind: ClassVar[str] = "run.started"
    run_id: str
    event_id: str
    trigger_type: str
    attempt: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStep(RuntimeEvent):
    kind: ClassVar[str] = "run.step"
    severity: ClassVar[Severity] = "debug"
    run_id: str
    step: int
    step_kind: str  # "model", "tool", "refused"
    name: str = ""
    detail: str = ""
    input_tokens: int = 0  # a model step's usage (/metrics counts it by model)
    output_tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolProgress(RuntimeEvent):
    """How far a running tool call is (an MCP server's progress notification, or a Python
    tool's ``ctx.progress``); ``total`` is None when the server does not know it."""

    kind: ClassVar[str] = "tool.progress"
    severity: ClassVar[Severity] = "debug"
    run_id: str
    step: int
    tool: str
    progress: float
    total: float | None = None
    message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerLog(RuntimeEvent):
    """A log message an MCP server sent (``notifications/message``), rate-limited per server:
    past the limit one line says how many were left out."""

    kind: ClassVar[str] = "mcp.log"
    server: str
    level: str  # the server's: debug, info, notice, warning, error, critical, alert, emergency
    text: str
    logger: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(RuntimeEvent):
    kind: ClassVar[str] = "run.finished"
    run_id: str
    event_id: str
    state: str
    reason: str = ""
    error: str = ""
    reply: str = ""
    duration_ms: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class EventDeadLettered(RuntimeEvent):
    kind: ClassVar[str] = "event.dead_lettered"
    severity: ClassVar[Severity] = "warning"
    event_id: str
    trigger_type: str
    reason: str
    error: str = ""
    attempts: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextUpdated(RuntimeEvent):
    kind: ClassVar[str] = "context.updated"
    severity: ClassVar[Severity] = "debug"
    key: str
    source: str
    run_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunWaiting(RuntimeEvent):
    kind: ClassVar[str] = "run.waiting"
    severity: ClassVar[Severity] = "warning"
    run_id: str
    event_id: str
    reason: str
    tool: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessRecovered(RuntimeEvent):
    kind: ClassVar[str] = "process.recovered"
    summary: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalDamaged(RuntimeEvent):
    kind: ClassVar[str] = "journal.damaged"
    severity: ClassVar[Severity] = "critical"
    path: str
    reason: str
    moved_to: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalFault(RuntimeEvent):
    """A journal could not be written (degraded: events are refused) or writes again."""

    kind: ClassVar[str] = "journal.fault"
    severity: ClassVar[Severity] = "critical"
    path: str
    reason: str  # empty: it writes again
    processes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnershipChanged(RuntimeEvent):
    """A scale-out node took a process on (``gained``: it runs here now, under lease ``epoch``)
    or stepped down from it (it stopped its copy: handed over, its lease lost or fenced)."""

    kind: ClassVar[str] = "cluster.ownership"
    severity: ClassVar[Severity] = "warning"
    node: str
    epoch: int
    gained: bool
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthAnomaly(RuntimeEvent):
    kind: ClassVar[str] = "health.anomaly"
    severity: ClassVar[Severity] = "warning"
    anomaly_type: str
    description: str
    details: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthRecovered(RuntimeEvent):
    kind: ClassVar[str] = "health.recovered"


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetExceeded(RuntimeEvent):
    kind: ClassVar[str] = "budget.exceeded"
    severity: ClassVar[Severity] = "critical"
    limit_type: str
    limit: float
    current: float
    tool: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetWarning(RuntimeEvent):
    kind: ClassVar[str] = "budget.warning"
    severity: ClassVar[Severity] = "warning"
    limit_type: str
    limit: float
    current: float


@dataclass(frozen=True, slots=True, kw_only=True)
class MissionEvent(RuntimeEvent):
    kind: ClassVar[str] = "mission.progress"
    state: str
    invocations: int
    reason: str = ""
    confidence: float | None = None  # the judge's, when this follows an evaluation


@dataclass(frozen=True, slots=True, kw_only=True)
class MissionComplete(MissionEvent):
    kind: ClassVar[str] = "mission.complete"


@dataclass(frozen=True, slots=True, kw_only=True)
class MissionFailed(MissionEvent):
    kind: ClassVar[str] = "mission.failed"
    severity: ClassVar[Severity] = "critical"


@dataclass(frozen=True, slots=True, kw_only=True)
class EscalationSent(RuntimeEvent):
    """An escalation went out (or could not): ``error`` says what failed, empty when delivered."""

    kind: ClassVar[str] = "escalation.sent"
    severity: ClassVar[Severity] = "warning"
    reason: str  # the payload's type: health_anomaly, budget_violation, low_confidence
    channels: str  # "event", "webhook" or "event+webhook"
    webhook_status: int | None = None
    error: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentChanged(RuntimeEvent):
    """An incident opened, saw another occurrence, was resolved, recovered or reopened, or got
    a run linked (``action``); the numbers are the incident's after the change."""

    kind: ClassVar[str] = "incident.changed"
    incident_id: str
    action: str
    state: str
    generation: int
    version: int
    occurrences: int
    fingerprint: str = ""  # the fingerprint's value, as text


class BoundedBuffer:
    """Events kept for one reader. When full, the oldest event goes (and is counted in
    ``dropped``), so a slow reader never slows the writer."""

    def __init__(self, maxsize: int) -> None:
        self._buffer: deque[RuntimeEvent] = deque()
        self._maxsize = maxsize
        self.dropped = 0

    def push(self, event: RuntimeEvent) -> None:
        if len(self._buffer) >= self._maxsize:
            self._buffer.popleft()
            self.dropped += 1
        self._buffer.append(event)

    def __len__(self) -> int:
        return len(self._buffer)

    def drain(self, limit: int | None = None) -> list[RuntimeEvent]:
        """Take what is buffered now (up to ``limit``) without waiting."""
        if limit is None or limit >= len(self._buffer):
            items = list(self._buffer)
            self._buffer.clear()
            return items
        return [self._buffer.popleft() for _ in range(limit)]


class Subscription(BoundedBuffer):
    """A bounded buffer of events for one subscriber. Oldest events are dropped when it is full."""

    def __init__(
        self, notifier: EventNotifier, maxsize: int, kinds: frozenset[str] | None
    ) -> None:
        super().__init__(maxsize)
        self._notifier = notifier
        self.kinds = kinds
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False

    def _offer(self, event: RuntimeEvent) -> None:
        if self.kinds is not None and event.kind not in self.kinds:
            return
        self.push(event)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> RuntimeEvent:
        while not self._buffer:
            if self.closed:
                raise EOFError("subscription closed")
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._buffer.popleft()

    async def wait(self) -> None:
        """Wait until at least one event is buffered (or the subscription closes)."""
        if self._buffer or self.closed:
            return
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        self.closed = True
        self._notifier._remove(self)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


EventCallback = Callable[[RuntimeEvent], None]


class EventNotifier:
    """Fans runtime events out to subscriptions and synchronous callbacks, and to the
    reference runtime's sinks: ``EventNotifier(sinks=[CallbackSink(fn, events=[...])])``."""

    def __init__(self, sinks: Iterable[CallbackSink] | None = None) -> None:
        self._subscriptions: list[Subscription] = []
        self._callbacks: list[EventCallback] = []
        self.emitted = 0
        #: Applied to every event before anyone sees it (the control plane hides secrets).
        self.redact: Callable[[RuntimeEvent], RuntimeEvent] | None = None
        for sink in sinks or ():
            self.add_sink(sink)

    def add_sink(self, sink: CallbackSink) -> None:
        """Deliver every event to ``sink`` from now on. The reference's other sinks (webhook,
        log, ...) are not here: a CallbackSink around your code does what they did."""
        if not isinstance(sink, CallbackSink):
            raise TypeError(f"EventNotifier takes CallbackSink sinks, not {type(sink).__name__}:"
                            " wrap your handler, CallbackSink(handler, events=[...])")
        if sink not in self._callbacks:
            self._callbacks.append(sink)

    def subscribe(self, maxsize: int = 10_000, kinds: Iterable[str] | None = None) -> Subscription:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        sub = Subscription(self, maxsize, frozenset(kinds) if kinds is not None else None)
        self._subscriptions.append(sub)
        return sub

    def add_callback(self, callback: EventCallback) -> None:
        """Call ``callback`` synchronously for every event. It must be quick and must not raise."""
        self._callbacks.append(callback)

    def remove_callback(self, callback: EventCallback) -> None:
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    def _remove(self, sub: Subscription) -> None:
        if sub in self._subscriptions:
            self._subscriptions.remove(sub)

    @property
    def has_listeners(self) -> bool:
        return bool(self._subscriptions or self._callbacks)

    def emit(self, event: RuntimeEvent) -> None:
        self.emitted += 1
        if self.redact is not None:
            try:
                event = self.redact(event)
            except Exception:  # never shown unredacted: dropped, and said so
                log.exception("could not redact %s; the event is dropped", event.kind)
                return
        for sub in self._subscriptions:
            sub._offer(event)
        for callback in self._callbacks:
            try:
                callback(event)
            except Exception:
                log.exception("event callback failed for %s", event.kind)
