"""The shared state of one process, and what the optional features (``Part``) offer.

Every part of a process (intake, dispatch, supervisor, journaling, the optional features) gets
the same ``ProcessCore``: nobody reads another part's private attributes, and what one part
must tell another goes through a port (ports.py) the facade (process.py) hands it. Every part
may read the core; each counter in it has one writer, named beside it."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from runtime_core.bus import EventBus, MessageBroker
from runtime_core.clock import Clock
from runtime_core.config import ProcessConfig
from runtime_core.context import AgentContext, ConversationBuffer
from runtime_core.delivery.dead_letters import DeadLetterReason
from runtime_core.delivery.queue import Delivery
from runtime_core.events import EventNotifier
from runtime_core.governance.hooks import DispatchResult, HookEvent, HookManager
from runtime_core.incidents.keeper import Admission
from runtime_core.journal.faults import journal_fault
from runtime_core.journal.provider import JournalProvider
from runtime_core.journal.recorder import ProcessRecorder
from runtime_core.lifecycle import ProcessLifecycle, ProcessState
from runtime_core.runs.recovery import RecoveredRun
from runtime_core.runs.run import Run
from runtime_core.runs.waiting import WaitingRuns
from runtime_core.triggers.base import TriggerEvent
from runtime_core.triggers.config import TriggerConfig

if TYPE_CHECKING:
    from runtime_core.agent.tools import AgentTool
    from runtime_core.governance.budget import Budget
    from runtime_core.governance.secrets import SecretScope
    from runtime_core.runs.executor import RunExecutor
    from runtime_core.runs.identity import ProfileStamp
    from runtime_core.runs.services import MemoryBlock

S = ProcessState
RECENT_RUNS = 100
#: The suspensions a restart keeps (who suspended it): the others (idle, a rewind, the spec's
#: ``suspend()`` with its default "manual") end with the process object, as the spec has it.
KEPT_SUSPENSIONS = ("health", "budget", "operator")


@dataclass(frozen=True, slots=True)
class SuspensionRecord:
    """Why a process is suspended (``by``: health, budget, operator, idle, rewind, manual),
    with what ``reason`` and ``since`` when (epoch seconds). One ``kept`` (by health, budget
    or an operator) is journaled in every checkpoint (one is written when it begins and when
    it ends) and taken back by the next start."""

    by: str
    reason: str
    since: float

    @property
    def kept(self) -> bool:
        """A restart keeps it."""
        return self.by in KEPT_SUSPENSIONS

    def as_dict(self) -> dict[str, Any]:
        return {"by": self.by, "reason": self.reason, "since": self.since,
                "kept_across_restarts": self.kept}

    @classmethod
    def from_dict(cls, data: Any) -> SuspensionRecord | None:
        """The record a checkpoint kept, or None (none kept, or not one of ours)."""
        if not isinstance(data, dict) or data.get("by") not in KEPT_SUSPENSIONS:
            return None
        try:
            return cls(str(data["by"]), str(data.get("reason") or data["by"]),
                       float(data["since"]))
        except (KeyError, TypeError, ValueError):
            return None


class ProcessHost(Protocol):
    """What a process needs of the runtime it belongs to (open mode's spawn, fork)."""

    def add_process(self, name: str, config: ProcessConfig | dict[str, Any], *,
                    model: Any = None, tools: Iterable[Any] | None = None,
                    base_dir: str | Path | None = None, process_id: str | None = None) -> Any: ...

    async def remove_process(self, name: str) -> None: ...

    @property
    def processes(self) -> dict[str, Any]:
        """The processes by name."""
        ...


class Hooks:
    """The process's own hooks, then the runtime's shared ones."""

    def __init__(self, process: str, own: HookManager, shared: HookManager | None,
                 process_id: str = "") -> None:
        self.process = process
        self.process_id = process_id
        self.own = own
        self.shared = shared

    def any(self, event: HookEvent) -> bool:
        return self.own.has(event) or (self.shared is not None and self.shared.has(event))

    async def dispatch(self, event: HookEvent, data: dict[str, Any]) -> DispatchResult:
        if not self.any(event):
            return DispatchResult(data=data)
        return await self.own.dispatch(event, process=self.process, data=data,
                                       then=self.shared, process_id=self.process_id)

    def listen_for(self, name: str) -> bool:
        """Whether a hook listens for the tool event ``name`` (pre_tool, post_tool)."""
        return self.any(HookEvent(name))

    async def for_tools(self, name: str, data: dict[str, Any]
                        ) -> tuple[bool, str, dict[str, Any]]:
        result = await self.dispatch(HookEvent(name), data)
        return result.blocked, result.reason, result.data


@dataclass(frozen=True, slots=True)
class TriggerStatus:
    """One trigger of a process, as its status shows it."""

    trigger_id: str
    trigger_type: str
    source: str  # "config" or "dynamic" (added by the agent in open mode)
    active: bool
    details: dict[str, Any] = field(default_factory=dict)  # the trigger's own (a file watch's)
    config: TriggerConfig | None = None  # what it was made from (not part of as_dict)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.trigger_id, "type": self.trigger_type, "source": self.source,
                "active": self.active, **self.details}


@dataclass(slots=True)
class PartStatus:
    """What the optional features add to a status (None: the feature is off)."""

    budget: dict[str, Any] | None = None
    active_secrets: int | None = None
    inbox: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    mission_state: str | None = None
    open_incidents: int | None = None
    health_anomalies: int | None = None
    health: dict[str, Any] | None = None


class Part:
    """One optional feature of a process: budget, mission, health, inbox, incidents, memory or
    secrets. The process loops over the enabled ones at each point of its life; a part does
    what it needs there and leaves the rest at these defaults."""

    #: Its key in checkpoints.
    key: ClassVar[str] = ""

    def report(self, into: PartStatus) -> None:
        """Fill in this part's fields of the process status."""

    def snapshot(self) -> dict[str, Any] | None:
        """What a checkpoint keeps of it, so a restart does not forget it."""
        return None

    def restore(self, saved: dict[str, Any]) -> bool:
        """Take back a checkpoint's snapshot; True if it did."""
        return False

    async def journal_ready(self, journal: JournalProvider, recorder: ProcessRecorder,
                            recover: bool) -> None:
        """The journal is open (first start): redact what it writes, read back its own."""

    async def start(self) -> None:
        """Each start, before the tools are built (secrets resolve, memory opens)."""

    def tools(self, taken: set[str]) -> dict[str, AgentTool]:
        """Tools this feature offers the agent."""
        return {}

    def prompt_line(self) -> str | None:
        """A system line for each run's prompt, or None."""
        return None

    async def admit(self, event: TriggerEvent) -> Admission:
        """An arriving event, before it is journaled as accepted (incidents)."""
        return Admission.PASS

    async def refuse_run(self, event: TriggerEvent, attempt: int) -> bool:
        """Before a run starts: True if this feature dead-lettered the event instead."""
        return False

    def run_started(self, run: Run) -> None:
        """A run of an event has started."""

    async def tool_call(self, name: str, args: dict[str, Any]) -> None:
        """A tool call of a run is about to run."""

    async def after_run(self, run: Run) -> None:
        """A run has ended (its event settled or up for a retry)."""

    def stopped(self) -> None:
        """The process stopped (it may start again)."""

    async def close(self) -> None:
        """The process object is done: release what lives as long as it."""


P = TypeVar("P", bound=Part)


@dataclass(eq=False)
class ProcessCore:
    """Everything the parts of one process share. Counters and flags live here, not in the
    parts, so a status or a checkpoint reads them in one place."""

    name: str
    process_id: str
    config: ProcessConfig
    clock: Clock
    notifier: EventNotifier
    bus: EventBus
    broker: MessageBroker
    base_dir: Path | None
    lifecycle: ProcessLifecycle
    context: AgentContext
    conversation: ConversationBuffer
    delivery: Delivery
    waiting: WaitingRuns
    hooks: Hooks
    journal: JournalProvider | None = None
    recorder: ProcessRecorder | None = None
    host: ProcessHost | None = None
    parts: list[Part] = field(default_factory=list)
    # Services some parts offer the runs; set by those parts when they are enabled.
    secrets: SecretScope | None = None
    autonomy: Budget | None = None
    memory_block: MemoryBlock | None = None
    instructions: str | None = None
    executor: RunExecutor | None = None
    stamp: ProfileStamp | None = None  # profile, policy, config digest, budget: per start
    recovered: dict[str, Any] | None = None
    # The counters, each with one writer; everyone else reads them.
    invocation_count: int = 0  # runs that succeeded: journaling (restored, then counted)
    consecutive_failures: int = 0  # events given up on in a row: the supervisor
    restart_count: int = 0  # restarts since the last success: the supervisor
    rebuild_count: int = 0  # instruction updates: open mode
    suspend_reason: str | None = None
    suspension: SuspensionRecord | None = None  # while suspended (a kept one: stopped too)
    started_at: float | None = None
    last_activity: float = 0.0
    refusing_all: bool = False  # shutting down for a service restart
    keeping_queue: bool = False  # a host's stop under way: what a pull trigger fires is kept
    drain_deadline: float | None = None  # a draining stop's deadline (clock.monotonic)
    stop_requested: bool = False
    inflight: dict[str, Run] = field(default_factory=dict)
    recent_runs: deque[Run] = field(default_factory=lambda: deque(maxlen=RECENT_RUNS))
    resume: dict[str, RecoveredRun] = field(default_factory=dict)  # event id -> run to go on

    @property
    def state(self) -> ProcessState:
        return self.lifecycle.state

    @property
    def idle_suspended(self) -> bool:
        return self.state is S.SUSPENDED and self.suspend_reason == "idle"

    @property
    def up(self) -> bool:
        """RUNNING or SUSPENDED: a trigger added now starts at once (a suspended process
        queues its events)."""
        return self.state in (S.RUNNING, S.SUSPENDED)

    def refusal(self) -> str | None:
        """Why an arriving event cannot be queued now, as a dead-letter reason, or None."""
        state = self.state
        if self.refusing_all:
            return DeadLetterReason.PROCESS_STOPPED
        if state is S.FAILED:
            return DeadLetterReason.PROCESS_FAILED
        if state in (S.STOPPING, S.STOPPED):
            return DeadLetterReason.PROCESS_STOPPED
        if self.journal_fault is not None:  # nothing can be made durable: promise nothing
            return DeadLetterReason.JOURNAL_UNAVAILABLE
        return None

    @property
    def journal_fault(self) -> str | None:
        """Why this process's journal cannot be written now (degraded), or None."""
        return journal_fault(self.journal) if self.recorder is not None else None

    @property
    def draining(self) -> dict[str, Any] | None:
        """While a stop lets the runs in flight finish: how many are left and for how long."""
        if self.drain_deadline is None:
            return None
        left = max(0.0, self.drain_deadline - self.clock.monotonic())
        return {"runs_left": self.delivery.in_flight, "seconds_left": round(left, 1)}

    def refusal_detail(self) -> str:
        """The words to go with refusal(): the journal's fault, when that is the reason."""
        fault = self.journal_fault
        if fault:
            return f"journal {getattr(self.journal, 'path', '')}: {fault}"
        if self.drain_deadline is not None:
            return f"process stopping: {self.delivery.in_flight} run(s) finishing first"
        return ""

    def touch(self) -> None:
        self.last_activity = self.clock.monotonic()

    def redact(self, text: str) -> str:
        return self.secrets.redact(text) if self.secrets is not None else text

    def part(self, kind: type[P]) -> P | None:
        return next((p for p in self.parts if isinstance(p, kind)), None)

    def need(self, kind: type[P], missing: str, error: type[Exception] = RuntimeError) -> P:
        """The part of ``kind``; ``error`` saying the process ``missing`` it when it is off."""
        part = self.part(kind)
        if part is None:
            raise error(f"process {self.name!r} {missing}")
        return part



def new_core(name: str, process_id: str, config: ProcessConfig, *, clock: Clock,
             notifier: EventNotifier, bus: EventBus, broker: MessageBroker,
             base_dir: str | Path | None, journal: JournalProvider | None,
             host: ProcessHost | None, hooks: Hooks) -> ProcessCore:
    """A process's shared state, fresh from its config: no run, nothing queued."""
    core = ProcessCore(
        name=name, process_id=process_id, config=config, clock=clock, notifier=notifier,
        bus=bus, broker=broker, base_dir=Path(base_dir) if base_dir is not None else None,
        lifecycle=ProcessLifecycle(),
        context=AgentContext(writable_keys=config.context.writable_keys,
                             initial_state=config.context.initial_state),
        conversation=ConversationBuffer(config.context.conversation_max_messages,
                                        enabled=config.context.conversation_history),
        delivery=Delivery(process=name, maxsize=config.queue_size, notifier=notifier,
                          dead_letter_size=config.trigger_delivery.dead_letter_size,
                          clock=clock),
        waiting=WaitingRuns(name, notifier), hooks=hooks, journal=journal, host=host,
        instructions=config.instructions)
    core.touch()
    return core
