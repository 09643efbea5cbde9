"""AgentProcess: one long-running agent. It wires the lifecycle, the queue, the run executor,
triggers and the restart policy together, and keeps little logic of its own."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from runtime_core import crashpoints
from runtime_core.agent.factory import build_model, build_tools
from runtime_core.agent.mcp_config import check_server
from runtime_core.agent.mcp_tools import McpToolbox
from runtime_core.agent.model import Model
from runtime_core.agent.tools import AgentTool, Tool
from runtime_core.bus import EventBus, MessageBroker
from runtime_core.clock import Clock, SystemClock
from runtime_core.config import ProcessConfig
from runtime_core.context import AgentContext, ConversationBuffer
from runtime_core.delivery.dead_letters import DeadLetterReason
from runtime_core.delivery.queue import Delivery
from runtime_core.events import (
    BudgetExceeded,
    ContextUpdated,
    EscalationSent,
    EventNotifier,
    JournalDamaged,
    MissionComplete,
    MissionEvent,
    MissionFailed,
    ProcessFailed,
    ProcessRecovered,
    ProcessRestarted,
    ProcessStarted,
    ProcessStateChanged,
    ProcessStopped,
    RestartExhausted,
    RunFinished,
    RunQueued,
    RunStarted,
)
from runtime_core.events import BudgetWarning as BudgetWarningEvent
from runtime_core.governance.budget import Budget, BudgetViolation
from runtime_core.governance.config_patch import apply_patch
from runtime_core.governance.escalation import EscalationTarget, Escalator
from runtime_core.governance.health import HealthConfig, HealthMonitor, args_hash
from runtime_core.governance.health_actions import HealthKeeper
from runtime_core.governance.hooks import DispatchResult, HookEvent, HookManager
from runtime_core.governance.inbox import Inbox
from runtime_core.governance.mission import Mission, MissionEvaluation
from runtime_core.governance.mission_judge import build_evidence, judge
from runtime_core.governance.payload_scan import scan_payload
from runtime_core.governance.secrets import SecretScope
from runtime_core.incidents.book import Incident
from runtime_core.incidents.keeper import Admission, IncidentKeeper
from runtime_core.journal.entry import EntryType
from runtime_core.journal.factory import make_journal
from runtime_core.journal.provider import JournalError, JournalProvider
from runtime_core.journal.recorder import ProcessRecorder
from runtime_core.journal.rewind_plan import RewindMode, RewindPlan, RewindResult
from runtime_core.journal.sqlite import DamagedJournal, SQLiteJournal
from runtime_core.lifecycle import ProcessLifecycle, ProcessState, ProcessTransition, StateError
from runtime_core.memory import (
    MemoryInjector,
    MemoryProvider,
    memory_status,
    memory_tools,
    open_memory,
)
from runtime_core.open_mode import meta_tools
from runtime_core.rewinding import ProcessRewinder
from runtime_core.runs import evidence
from runtime_core.runs.executor import RunExecutor
from runtime_core.runs.identity import ProfileStamp, profile_stamp
from runtime_core.runs.recovery import RecoveredRun, recover_process
from runtime_core.runs.run import ResumePoint, Run, RunState, render_event_message
from runtime_core.runs.services import RunServices
from runtime_core.runs.waiting import WaitingRuns
from runtime_core.trigger_set import TriggerSet
from runtime_core.triggers.base import AcceptResult, TriggerEvent
from runtime_core.triggers.config import TriggerConfig

if TYPE_CHECKING:
    from runtime_core.runtime import AgentRuntime

log = logging.getLogger(__name__)

S = ProcessState
MAX_RESTART_BACKOFF = 60.0
RECENT_RUNS = 100


class AgentProcess:
    def __init__(
        self,
        name: str,
        config: ProcessConfig | dict[str, Any],
        *,
        process_id: str | None = None,
        event_bus: EventBus | None = None,
        broker: MessageBroker | None = None,
        runtime: AgentRuntime | None = None,
        event_notifier: EventNotifier | None = None,
        hooks: Any = None,
        model: Model | None = None,
        tools: Iterable[Tool | Any] | None = None,
        clock: Clock | None = None,
        base_dir: str | Path | None = None,
        journal: JournalProvider | None = None,
    ) -> None:
        if not name or not isinstance(name, str):
            raise ValueError("a process needs a non-empty name")
        self.name = name
        self.config = config if isinstance(config, ProcessConfig) else ProcessConfig.model_validate(
            config
        )
        self.process_id = process_id or str(uuid.uuid4())
        self.runtime = runtime
        self.hooks = HookManager()  # this process's own; ``hooks=`` is the runtime's shared set
        self._shared_hooks: HookManager | None = hooks if isinstance(hooks, HookManager) \
            else None
        self._bus = event_bus or EventBus()
        self._broker = broker or MessageBroker()
        self._notifier = event_notifier or EventNotifier()
        self._clock: Clock = clock or SystemClock()
        self._base_dir = Path(base_dir) if base_dir is not None else None
        self._model_override = model
        self._extra_tools = list(tools or ())
        for server_name, server in self.config.servers.items():
            check_server(server_name, server, self._base_dir)  # ValueError: unusable entry
        self._toolbox = McpToolbox(self.config.servers, base_dir=self._base_dir) \
            if self.config.servers else None

        self._lifecycle = ProcessLifecycle()
        self._lifecycle.add_listener(self._on_transition)
        ctx_cfg = self.config.context
        self._context = AgentContext(
            writable_keys=ctx_cfg.writable_keys, initial_state=ctx_cfg.initial_state
        )
        self._context.add_listener(self._on_context_update)
        self._conversation = ConversationBuffer(
            ctx_cfg.conversation_max_messages, enabled=ctx_cfg.conversation_history
        )
        self._delivery = Delivery(
            process=name,
            maxsize=self.config.queue_size,
            dead_letter_size=self.config.trigger_delivery.dead_letter_size,
            notifier=self._notifier,
            clock=self._clock,
        )
        self._instructions = self.config.instructions
        self._executor: RunExecutor | None = None
        self._refusing_all = False  # shutting down for a service restart
        self._stamp: ProfileStamp | None = None  # profile, policy, config digest, budget
        self._rebuild_count = 0
        self._spawned: list[str] = []
        self._lock = asyncio.Lock()

        self._invocation_count = 0
        self._consecutive_failures = 0
        self._restart_count = 0
        self._suspend_reason: str | None = None
        self._stop_requested = False
        self._stopping = False
        self._background: set[asyncio.Task[Any]] = set()
        self._escalations: set[asyncio.Task[None]] = set()
        self._escalator = Escalator(self._bus, source=name)
        self._started_at: float | None = None
        self._last_activity = self._clock.monotonic()
        self._restart_task: asyncio.Task[None] | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._triggers = TriggerSet(
            name, self.config.triggers, clock=self._clock, event_bus=self._bus,
            broker=self._broker, accept_pulled=self._accept_from_trigger,
            accept_pushed=self._accept_pushed,
            dead_letter=lambda event, reason: self._delivery.dead_letter(event, reason, "", 0),
        )
        self._inflight: dict[str, Run] = {}
        self._recent_runs: deque[Run] = deque(maxlen=RECENT_RUNS)
        self.recovered: dict[str, Any] | None = None
        self._journal = journal
        self._recorder: ProcessRecorder | None = None
        self._journal_prepared = False
        self._owns_journal = False
        self._resume: dict[str, RecoveredRun] = {}  # event id -> run to continue
        self._waiting = WaitingRuns(name, self._notifier)
        self._budget = Budget(self.config.budget, self._clock) if self.config.budget.enabled \
            else None
        self._secrets = SecretScope(self.config.secrets, self._clock,
                                    on_access=self._on_secret_access) \
            if self.config.secrets.enabled else None
        self._inbox = Inbox(self.config.inbox, self._clock) if self.config.inbox.enabled \
            else None
        self._mission = Mission(self.config.mission, self._clock) \
            if self.config.mission.enabled else None
        self._mission_judge: Model | None = None
        self._judge_calls = 0
        self._memory: MemoryProvider | None = None  # opened by start(), closed by close()
        incidents = self.config.incidents
        self._incidents = IncidentKeeper(name, incidents, self._notifier, self._clock) \
            if incidents is not None and incidents.enabled else None
        self._health: HealthKeeper | None = None
        if self.config.health.enabled:
            monitor = HealthMonitor(self.config.health, process_id=name, clock=self._clock)
            self._health = HealthKeeper(name, self.process_id, monitor, self._notifier,
                                        pause=self._pause_for_health, stop=self._stop_on_purpose,
                                        escalate=self._escalate)

    # -- read-only views ---------------------------------------------------------------------
    @property
    def state(self) -> ProcessState:
        return self._lifecycle.state

    @property
    def lifecycle(self) -> ProcessLifecycle:
        return self._lifecycle

    @property
    def context(self) -> AgentContext:
        return self._context

    @property
    def conversation(self) -> ConversationBuffer:
        return self._conversation

    @property
    def notifier(self) -> EventNotifier:
        return self._notifier

    @property
    def event_bus(self) -> EventBus:
        return self._bus

    @property
    def broker(self) -> MessageBroker:
        return self._broker

    @property
    def suspend_reason(self) -> str | None:
        return self._suspend_reason

    @property
    def instructions(self) -> str | None:
        return self._instructions

    @property
    def dead_letters(self) -> list[dict[str, Any]]:
        return [letter.as_dict() for letter in self._delivery.dead_letters]

    @property
    def invocation_count(self) -> int:
        return self._invocation_count

    @property
    def restart_count(self) -> int:
        return self._restart_count

    @property
    def journal(self) -> JournalProvider | None:
        return self._journal

    @property
    def memory(self) -> MemoryProvider | None:
        """The long-term memory provider: None before the first start or without one."""
        return self._memory

    def redact(self, text: str) -> str:
        """``text`` with every active secret value replaced by ``[secret:name]``."""
        return self._secrets.redact(text) if self._secrets is not None else text

    def recent_runs(self) -> list[Run]:
        """Finished runs, oldest first (the last 100)."""
        return list(self._recent_runs)

    def tools(self) -> dict[str, AgentTool]:
        """The tools runs get since the last start, by name (empty before the first start)."""
        return dict(self._executor.tools) if self._executor is not None else {}

    def active_runs(self) -> list[Run]:
        return list(self._inflight.values())

    def resuming_runs(self) -> list[Run]:
        """Runs recovered or reconciled that wait in the queue to continue where they stopped."""
        return [recovered.run for recovered in self._resume.values()]

    def queued_events(self) -> list[TriggerEvent]:
        return self._delivery.queued_events()

    def status(self) -> dict[str, Any]:
        uptime = None
        if self._started_at is not None and self.state in (S.RUNNING, S.SUSPENDED, S.STARTING):
            uptime = round(self._clock.monotonic() - self._started_at, 3)
        return {
            "name": self.name,
            "process_id": self.process_id,
            "state": self.state.value,
            "suspend_reason": self._suspend_reason,
            "execution_mode": self.config.execution_mode,
            "invocation_count": self._invocation_count,
            "consecutive_failures": self._consecutive_failures,
            "restart_count": self._restart_count,
            "journal_enabled": self._recorder is not None,
            "trigger_count": self._triggers.config_count,
            "dynamic_trigger_count": self.dynamic_trigger_count,
            "triggers": self._triggers.status(),
            "custom_tool_count": 0,
            "rebuild_count": self._rebuild_count,
            "spawned_process_count": len(self._spawned),
            "conversation_messages": len(self._conversation),
            "has_memory": self.config.memory.enabled,
            "queue_size": self._delivery.queue_size,
            "dead_letter_count": len(self._delivery.dead_letters),
            "filtered_count": self._triggers.filtered_count,
            "pending_retries": self._delivery.pending_retries,
            "uptime_seconds": uptime,
            "hook_count": len(self.hooks),
            "active_runs": len(self._inflight),
            "waiting_runs": len(self._waiting),
            **({"servers": self._toolbox.describe()} if self._toolbox else {}),
            **({"recovered": self.recovered} if self.recovered is not None else {}),
            **({"budget": self._budget.remaining()} if self._budget else {}),
            **({"active_secrets": self._secrets.active_count} if self._secrets else {}),
            **({"inbox": self._inbox.status()} if self._inbox else {}),
            **({"memory": memory_status(self.config.memory, self._memory)}
               if self.config.memory.enabled else {}),
            **({"mission_state": self._mission.state} if self._mission else {}),
            **({"open_incidents": self._incidents.open_count()} if self._incidents else {}),
            **({"health_anomalies": len(self._health.monitor.anomalies),
                "health": self._health.monitor.health_status()} if self._health else {}),
        }

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        async with self._lock:
            state = self.state
            if state not in (S.CREATED, S.STOPPED, S.FAILED):
                raise StateError(state, S.STARTING, f"start() on process {self.name!r}")
            if state is S.FAILED:
                await self._cancel_restart()
                await self._teardown(DeadLetterReason.PROCESS_FAILED, keep_queue=True)
            self._stop_requested = False
            self._consecutive_failures = 0
            await self._start_locked(restart=False)

    async def stop(self) -> None:
        self._stop_requested = True
        await self._cancel_restart()
        if self.state is S.CREATED:
            self._lifecycle.transition(S.STOPPED, reason="stop() before start")
            self._delivery.dead_letter_all(DeadLetterReason.PROCESS_STOPPED)
            return
        if self.state is S.STOPPED or self._stopping:
            return
        if self._delivery.current_task_is_worker() and self._lock.locked():
            return  # a run stopping its own process while a restart holds the lock
        async with self._lock:
            if self._already_down():
                return
            self._stopping = True
            await self._hook(HookEvent.SESSION_END, {"state": self.state.value})
            try:
                if self.state is not S.STOPPING:  # STOPPING here: a restart cut short by stop()
                    self._lifecycle.transition(S.STOPPING, reason="stop()")
                await self._teardown(DeadLetterReason.PROCESS_STOPPED, keep_queue=False)
                self._lifecycle.transition(S.STOPPED, reason="stopped")
                await self._checkpoint(durable=True)
            finally:
                self._stopping = False
            self._started_at = None
            self._suspend_reason = None
            if self._secrets is not None and self.config.secrets.revoke_on_stop:
                self._secrets.revoke_all()
            if self.config.context.conversation_clear_on_stop:
                self._conversation.clear()
            self._notifier.emit(ProcessStopped(process=self.name, process_id=self.process_id))

    def _already_down(self) -> bool:
        # Re-read after waiting for the lock: another task may have stopped the process.
        return self.state in (S.STOPPED, S.CREATED)

    async def close(self) -> None:
        """stop(), then release what lives as long as the process object."""
        await self.stop()
        if self._escalations:  # each send is bounded by its target's timeout
            await asyncio.gather(*self._escalations, return_exceptions=True)
        self._conversation.clear()
        if self._secrets is not None:
            self._secrets.revoke_all()
        if self._inbox is not None:
            self._inbox.clear()
        if self._memory is not None:  # the next start() opens a new provider
            await self._memory.close()
        if self._journal is not None and self._owns_journal:
            await self._journal.close()
        if self._toolbox is not None:
            self._toolbox.release()

    async def shutdown(self) -> dict[str, int]:
        """Close for a service restart (SIGTERM): like a crash at a safe point. Triggers stop
        taking events, everything journaled so far is made durable, then nothing more is
        journaled while the process closes. The next start (same journal) re-queues what was
        accepted and not finished, in order, and resumes runs in flight from their durable
        steps, where stop() would dead-letter them "process stopped". Without a journal this
        is close(). Returns how many events were left for the next start ("pending") and the
        dead letters kept."""
        if self._recorder is None or self._journal is None or self.state is S.CREATED:
            await self.close()
            return {"pending": 0, "dead_letters": len(self.dead_letters)}
        self._refusing_all = True  # an inject from here on is refused, never half-accepted
        for event in await self._triggers.stop_all(keep_leftovers=True):
            self._delivery.offer(event)  # journaled as accepted: the next start takes it back
        counts = {"pending": self._delivery.queue_size + self._delivery.pending_retries
                  + len(self._inflight), "dead_letters": len(self.dead_letters)}
        await self._recorder.append(EntryType.SHUTDOWN, {"pending": counts["pending"]})
        await self._journal.flush()
        self._recorder.sealed = True
        try:
            await self.close()
        finally:
            self._refusing_all = False  # the recorder stays sealed: its journal is closed now
        return counts

    async def suspend(self, reason: str = "manual") -> None:
        if self.state is not S.RUNNING:
            raise StateError(self.state, S.SUSPENDED, f"suspend() on process {self.name!r}")
        self._delivery.close()
        self._suspend_reason = reason
        self._lifecycle.transition(S.SUSPENDED, reason=f"suspended: {reason}")

    async def resume(self, reason: str = "manual") -> None:
        if self.state is not S.SUSPENDED:
            raise StateError(self.state, S.RUNNING, f"resume() on process {self.name!r}")
        self._suspend_reason = None
        self._last_activity = self._clock.monotonic()
        self._lifecycle.transition(S.RUNNING, reason=f"resumed: {reason}")
        self._delivery.open()
        self._restart_heartbeat()  # the idle clock counts from the resume

    def _restart_heartbeat(self) -> None:
        task = self._heartbeat_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        self._heartbeat_task = asyncio.create_task(self._heartbeat(), name=f"{self.name}-heartbeat")

    async def __aenter__(self) -> AgentProcess:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- events in -------------------------------------------------------------------------------
    def _refusal(self) -> str | None:
        """Why an arriving event cannot be queued now, as a dead-letter reason, or None."""
        state = self.state
        if self._refusing_all:
            return DeadLetterReason.PROCESS_STOPPED
        if state is S.FAILED:
            return DeadLetterReason.PROCESS_FAILED
        if state in (S.STOPPING, S.STOPPED):
            return DeadLetterReason.PROCESS_STOPPED
        return None

    async def inject(self, event: TriggerEvent) -> bool:
        """Queue ``event`` as if a trigger had fired. Returns False if it was dead-lettered."""
        if not isinstance(event, TriggerEvent):
            raise TypeError(f"inject() takes a TriggerEvent, not {type(event).__name__}")
        refusal = self._refusal()
        if refusal is not None:
            self._delivery.dead_letter(event, refusal, "", 0)
            return False
        if not await self._journal_accepted(event):  # durable before it is acknowledged
            return True  # an occurrence of an open incident: recorded, no run
        if self._recorder is not None:
            crashpoints.reached("event_acknowledged")
        if self.state is S.SUSPENDED and self._suspend_reason == "idle":
            await self.resume("event arrived")
        if not self._delivery.offer(event):
            return False
        await self._announce_queued(event)
        return True

    # -- hooks -------------------------------------------------------------------------------------
    def _any_hooks(self, event: HookEvent) -> bool:
        return self.hooks.has(event) or (
            self._shared_hooks is not None and self._shared_hooks.has(event))

    async def _hook(self, event: HookEvent, data: dict[str, Any]) -> DispatchResult:
        if not self._any_hooks(event):
            return DispatchResult(data=data)
        return await self.hooks.dispatch(event, process=self.name, data=data,
                                         then=self._shared_hooks)

    async def _tool_hooks(self, name: str, data: dict[str, Any]
                          ) -> tuple[bool, str, dict[str, Any]]:
        result = await self._hook(HookEvent(name), data)
        return result.blocked, result.reason, result.data

    async def _announce_queued(self, event: TriggerEvent) -> None:
        kind = HookEvent.FILE_CHANGED if event.trigger_type == "file_watch" \
            else HookEvent.TASK_CREATED
        if self._any_hooks(kind):
            await self._hook(kind, {"event": event.to_dict()})
        if self._notifier.has_listeners:
            self._notifier.emit(
                RunQueued(process=self.name, event_id=event.event_id,
                          trigger_type=event.trigger_type)
            )

    async def _accept_from_trigger(self, event: TriggerEvent) -> None:
        refusal = self._refusal()
        if refusal is not None:
            self._delivery.dead_letter(event, refusal, "", 0)
            return
        if not await self._journal_accepted(event):
            return  # an occurrence of an open incident: recorded, no run
        if self.state is S.SUSPENDED and self._suspend_reason == "idle":
            await self.resume("event arrived")
        await self._delivery.put(event)
        await self._announce_queued(event)

    async def _accept_pushed(self, event: TriggerEvent) -> tuple[AcceptResult, str]:
        """A push trigger (webhook) hands over an event and must answer its sender: only
        ACCEPTED makes the event ours, and only once it is durable."""
        refusal = self._refusal()
        if refusal is not None:
            return AcceptResult.UNAVAILABLE, refusal
        if self._delivery.is_full:
            return AcceptResult.QUEUE_FULL, DeadLetterReason.QUEUE_FULL
        try:
            if not await self._journal_accepted(event):
                return AcceptResult.ACCEPTED, "recorded as an incident occurrence"
        except JournalError as exc:
            log.critical("process %s: cannot journal an event: %s", self.name, exc)
            return AcceptResult.UNAVAILABLE, "journal unavailable"
        if self.state is S.SUSPENDED and self._suspend_reason == "idle":
            await self.resume("event arrived")
        if self._delivery.offer(event):  # if the queue filled meanwhile it is dead-lettered
            await self._announce_queued(event)
        return AcceptResult.ACCEPTED, "accepted"

    async def _journal_accepted(self, event: TriggerEvent) -> bool:
        """Make an arriving event durable before it is acknowledged. False: it only updated an
        open incident (journaled as such) and starts no run."""
        if self._incidents is not None:
            admission = await self._incidents.admit(event, self._recorder)
            if admission is not Admission.PASS:  # journaled with its incident
                return admission is Admission.QUEUE
        if self._recorder is not None:
            await self._recorder.event_accepted(event)
        return True

    # -- incidents (runtime_core/incident_keeper.py does the work) ------------------------------
    def incidents(self) -> list[Incident]:
        """This process's incidents, in the order they opened (empty without ``incidents``)."""
        return self._incidents.incidents() if self._incidents is not None else []

    def _incident_keeper(self) -> IncidentKeeper:
        if self._incidents is None:
            raise RuntimeError(f"process {self.name!r} keeps no incidents; add 'incidents: "
                               "{fingerprint: ...}' to its manifest")
        return self._incidents

    async def resolve_incident(self, incident_id: str, *, generation: int, version: int,
                               note: str = "", actor: str = "operator") -> Incident:
        """Mark an open incident resolved. ``generation`` and ``version`` are the ones the
        decision was made on: StaleIncidentError when the incident moved since."""
        return await self._incident_keeper().resolve(incident_id, generation, version, note,
                                                      actor, self._recorder)

    async def reopen_incident(self, incident_id: str, *, generation: int, version: int,
                              note: str = "", actor: str = "operator") -> Incident:
        """Reopen a resolved or recovered incident as a new generation and start a run on its
        last payload; refused when stale (StaleIncidentError) or still open."""
        keeper = self._incident_keeper()
        if self._refusal() is not None or self.state is S.CREATED:
            raise RuntimeError(f"process {self.name!r} is {self.state.value}: start it first "
                               "(a reopened incident starts a run)")
        incident, event = await keeper.reopen(incident_id, generation, version, note, actor,
                                              self._recorder)
        if self.state is S.SUSPENDED and self._suspend_reason == "idle":
            await self.resume("incident reopened")
        if self._delivery.offer(event):  # a full queue dead-letters it, ready to redeliver
            await self._announce_queued(event)
        return incident

    # -- the operator inbox ----------------------------------------------------------------------
    def _open_inbox(self) -> Inbox:
        if self._inbox is None:
            raise RuntimeError(f"process {self.name!r} has no inbox; set inbox.enabled")
        if self.state in (S.STOPPED, S.STOPPING, S.FAILED):
            raise RuntimeError(f"process {self.name!r} is {self.state.value}: start it first")
        return self._inbox

    async def send_message(self, content: str, *, message_type: str = "context",
                           priority: str = "normal", sender_id: str | None = None,
                           ttl: float | None = None) -> str:
        """Leave a message for the agent's next run; returns its id."""
        message = self._open_inbox().add(content, message_type=message_type, priority=priority,
                                         sender_id=sender_id, ttl=ttl)
        return message.message_id

    async def ask(self, content: str, *, sender_id: str | None = None,
                  timeout: float = 120.0) -> str:  # noqa: ASYNC109  (the spec API)
        """Ask the agent a question and wait for its answer. The question wakes the agent with
        an ``inbox`` event instead of waiting for the next trigger."""
        inbox = self._open_inbox()
        message = inbox.add(content, message_type="question", priority="high",
                            sender_id=sender_id, ttl=timeout + 60)
        assert message.answer is not None
        await self.inject(TriggerEvent("inbox", "inbox", {"question": content,
                                                          "question_id": message.message_id}))
        try:
            return await asyncio.wait_for(asyncio.shield(message.answer), timeout)
        except TimeoutError:
            raise TimeoutError(f"process {self.name!r} did not answer within {timeout:g} s"
                               ) from None

    # -- live triggers ---------------------------------------------------------------------------
    async def add_trigger(self, config: TriggerConfig | dict[str, Any]) -> str:
        """Add a config trigger. It starts at once on a RUNNING or SUSPENDED process (its events
        queue while suspended), otherwise with the next start(). Invalid config: ValueError."""
        return await self._triggers.add(config, running=self.state in (S.RUNNING, S.SUSPENDED))

    async def remove_trigger(self, trigger_id: str) -> None:
        """Remove a trigger (KeyError if unknown); events it still held are dead-lettered
        "trigger removed"."""
        await self._triggers.remove(trigger_id)

    # -- behavioral health, changed live ---------------------------------------------------------
    def update_health(self, patch: Mapping[str, Any]) -> HealthConfig:
        """Apply a JSON merge patch to the health config (ConfigPatchError, changing nothing,
        on an unknown field or a bad value). It holds from the next recorded signal; ``enabled``
        builds the monitor or drops it with its history."""
        config = apply_patch(self.config.health, patch)
        self.config.health = config
        if not config.enabled:
            self._health = None
        elif self._health is None:
            monitor = HealthMonitor(config, process_id=self.name, clock=self._clock)
            self._health = HealthKeeper(self.name, self.process_id, monitor, self._notifier,
                                        pause=self._pause_for_health, stop=self._stop_on_purpose,
                                        escalate=self._escalate)
        else:
            self._health.monitor.apply_config(config)
        if self._executor is not None:
            self._executor.services.watch_tool_call = \
                self._health.tool_call if self._health else None
        return config

    def health_anomalies(self) -> list[dict[str, Any]] | None:
        """The anomaly history, oldest first; None when monitoring is off."""
        if self._health is None:
            return None
        return [a.to_dict() for a in self._health.monitor.anomalies]

    def clear_health_anomalies(self) -> int:
        """Forget the anomaly history; ValueError when monitoring is off."""
        if self._health is None:
            raise ValueError(f"process {self.name!r} has no health monitoring "
                             "(health: {enabled: true})")
        return self._health.monitor.clear_anomalies()

    # -- dead letters ----------------------------------------------------------------------------
    async def redeliver_dead_letters(self, event_ids: Iterable[str] | None = None) -> int:
        if self.state is S.SUSPENDED and self._suspend_reason == "idle":
            await self.resume("redelivery")
        return self._delivery.redeliver(event_ids)

    def clear_dead_letters(self) -> int:
        return self._delivery.clear_dead_letters()

    def update_instructions(self, text: str) -> None:
        """Replace the system prompt from the next run on (the agent is rebuilt before it: the
        executor reads the instructions per run, and the connected MCP tools are kept)."""
        self._instructions = text
        self._rebuild_count += 1
        if self._recorder is not None:
            self._recorder.submit(EntryType.INSTRUCTIONS_UPDATED, {"length": len(text)})

    # -- open mode (runtime_core/open_mode.py holds the meta-tools and their limits) ------------
    @property
    def dynamic_trigger_count(self) -> int:
        return len(self._triggers.dynamic)

    @property
    def spawned_processes(self) -> list[str]:
        """Names of the child processes this process spawned (open mode)."""
        return list(self._spawned)

    async def add_dynamic_trigger(self, config: dict[str, Any]) -> str:
        """An agent-added trigger: started now, stopped and dropped at stop(), not restored."""
        return await self._triggers.add(config, running=self.state in (S.RUNNING, S.SUSPENDED),
                                        dynamic=True)

    async def remove_dynamic_trigger(self, trigger_id: str) -> None:
        if trigger_id not in self._triggers.dynamic:
            mine = ", ".join(sorted(self._triggers.dynamic)) or "none"
            raise KeyError(f"{trigger_id!r} is not a trigger this process added (its own: "
                           f"{mine})")
        await self._triggers.remove(trigger_id)

    async def spawn_child(self, name: str, instructions: str,
                          triggers: list[dict[str, Any]]) -> str:
        """Start a strict-mode child through the parent runtime, with the parent's model and
        journal settings."""
        if self.runtime is None:
            raise RuntimeError("spawning needs the process to belong to an AgentRuntime")
        config = ProcessConfig.model_validate({
            "model": self.config.model, "instructions": instructions, "triggers": triggers,
            "journal": self.config.journal.model_dump()})
        child = self.runtime.add_process(name, config, base_dir=self._base_dir)
        self._spawned.append(name)
        try:
            await child.start()
        except Exception:
            self._spawned.remove(name)
            await self.runtime.remove_process(name)
            raise
        return name

    # -- internals: start, teardown, restart ---------------------------------------------------
    async def _start_locked(self, *, restart: bool) -> None:
        self._lifecycle.transition(S.STARTING, reason="restart" if restart else "start()")
        try:
            if not self._journal_prepared:
                await self._prepare_journal()
            elif self._journal is not None:
                await self._journal.open()  # reopened after close(); no second recovery
            if self._secrets is not None:
                self._secrets.resolve()  # a missing variable fails the start, loudly
            model = self._model_override or build_model(self.config.model,
                                                         base_dir=self._base_dir)
            tools: dict[str, AgentTool] = dict(build_tools(self.config.tools, self._extra_tools))
            journal_file = self._journal.path if isinstance(self._journal, SQLiteJournal) else None
            self._memory = await open_memory(self._memory, self.config.memory, self.name,
                                             journal_file)  # kept open across stop()/start()
            if self._memory is not None and self.config.memory.tools:
                tools.update(memory_tools(self._memory, taken=tools))
            if self.config.execution_mode == "open":
                for meta in meta_tools(self):
                    if meta.name in tools:
                        raise ValueError(f"tool {meta.name!r} clashes with an open-mode "
                                         "meta-tool; rename it")
                    tools[meta.name] = meta
            if self._toolbox is not None:  # connected before any trigger can start a run
                tools.update(await self._toolbox.connect(set(tools)))
            self._stamp = profile_stamp(self.name, self.config, tools)
            self._flag_config_changes()
            self._executor = RunExecutor(RunServices(
                process=self.name,
                model=model,
                tools=tools,
                allowed_tools=self.config.allowed_tools,
                budget=self.config.run_budget,
                context=self._context,
                conversation=self._conversation,
                instructions=lambda: self._instructions,
                notifier=self._notifier,
                recorder=self._recorder,
                event_bus=self._bus,
                broker=self._broker,
                watch_tool_call=self._health.tool_call if self._health else None,
                autonomy=self._budget,
                secrets=self._secrets,
                hooks=self._tool_hooks,
                prompt_lines=[line for line in (
                    self._budget.prompt_line if self._budget
                    and self.config.budget.inject_remaining else None,
                    self._mission.prompt_line if self._mission else None,
                    self._inbox.prompt_block if self._inbox else None) if line is not None],
                completion=self.config.profile.completion if self.config.profile else None,
                memory_block=MemoryInjector(self._memory, self.config.memory)
                if self._memory is not None and self.config.memory.auto_inject else None,
            ))
            await self._triggers.start_all()
        except asyncio.CancelledError:
            await self._close_servers()
            raise
        except Exception as exc:
            await self._close_servers()
            self._lifecycle.transition(S.FAILED, reason=f"startup failed: {exc}",
                                       metadata={"error": str(exc)})
            self._notifier.emit(ProcessFailed(process=self.name, process_id=self.process_id,
                                              reason="startup failed", error=str(exc)[:500]))
            raise
        self._started_at = self._clock.monotonic()
        self._last_activity = self._started_at
        self._suspend_reason = None
        self._delivery.start_workers(self.config.concurrency, self._handle_event)
        self._restart_heartbeat()
        self._lifecycle.transition(S.RUNNING, reason="started")
        self._delivery.open()
        await self._hook(HookEvent.SESSION_START, {"restart": restart})
        self._notifier.emit(ProcessStarted(process=self.name, process_id=self.process_id,
                                           restart=restart))

    async def _teardown(self, reason: str, *, keep_queue: bool) -> None:
        """Stop triggers, workers and the heartbeat. Events that have not run are dead-lettered
        with ``reason``; with ``keep_queue`` the queue itself is kept for the next start."""
        self._delivery.close()
        heartbeat = self._heartbeat_task
        if heartbeat is not None and heartbeat is not asyncio.current_task():
            heartbeat.cancel()
            await asyncio.gather(heartbeat, return_exceptions=True)
        self._heartbeat_task = None
        self._triggers.cancel_reason = reason
        leftovers = await self._triggers.stop_all(keep_leftovers=True)
        await self._delivery.stop_workers(reason)
        self._delivery.dead_letter_all(reason, include_queue=not keep_queue)
        for event in leftovers:
            if keep_queue:
                self._delivery.offer(event)
            else:
                self._delivery.dead_letter(event, reason, "", 0)
        await self._close_servers()
        self._triggers.forget_dynamic()  # agent-added triggers do not outlive a stop

    async def _close_servers(self) -> None:
        """Close the MCP connections (stdio servers exit); the next start reconnects."""
        if self._toolbox is not None:
            await self._toolbox.close()

    async def _cancel_restart(self) -> None:
        task = self._restart_task
        self._restart_task = None
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _enter_failed(self, reason: str, error: str) -> None:
        if self.state not in (S.RUNNING, S.SUSPENDED):
            return
        self._delivery.close()
        if self._heartbeat_task is not None:  # no idle or lifetime actions on a failed process
            self._heartbeat_task.cancel()
            self._heartbeat_task = None
        self._lifecycle.transition(S.FAILED, reason=reason, metadata={"error": error})
        self._delivery.dead_letter_all(DeadLetterReason.PROCESS_FAILED)
        self._notifier.emit(ProcessFailed(process=self.name, process_id=self.process_id,
                                          reason=reason, error=error[:500]))
        if self._toolbox is not None:  # a failed process keeps no servers running
            task = asyncio.create_task(self._close_servers(), name=f"{self.name}-mcp-close")
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        self._schedule_restart(reason)

    def _schedule_restart(self, reason: str) -> None:
        if self.config.restart_policy == "never" or self._stop_requested:
            return
        if self._restart_count >= self.config.max_restarts:
            if self._recorder is not None:
                self._recorder.restart_exhausted(reason, self._restart_count)
            self._notifier.emit(RestartExhausted(process=self.name, process_id=self.process_id,
                                                 restarts=self._restart_count, reason=reason))
            return
        delay = min(self.config.restart_backoff * 2**self._restart_count, MAX_RESTART_BACKOFF)
        self._restart_task = asyncio.create_task(
            self._restart_after(delay, reason, counts=True), name=f"{self.name}-restart"
        )

    async def _restart_after(self, delay: float, reason: str, *, counts: bool) -> None:
        await self._clock.sleep(delay)
        if self._stop_requested:
            return
        async with self._lock:
            if self._stop_requested or self.state not in (S.FAILED, S.RUNNING, S.SUSPENDED):
                return
            if counts:
                self._restart_count += 1
            if self._recorder is not None:
                self._recorder.restart(reason, self._restart_count if counts else None)
            self._notifier.emit(ProcessRestarted(
                process=self.name, process_id=self.process_id, reason=reason,
                attempt=self._restart_count if counts else None,
                max_restarts=self.config.max_restarts,
            ))
            if self.state is S.FAILED:
                await self._teardown(DeadLetterReason.PROCESS_RESTARTING, keep_queue=True)
            else:  # recycle: let runs in flight finish, keep the queue
                self._delivery.close()
                self._lifecycle.transition(S.STOPPING, reason="stopping for restart")
                await self._delivery.wait_runs_finished()
                await self._teardown(DeadLetterReason.PROCESS_RESTARTING, keep_queue=True)
                self._lifecycle.transition(S.STOPPED, reason="stopped for restart")
            self._consecutive_failures = 0
            try:
                await self._start_locked(restart=True)
            except Exception as exc:
                log.warning("process %s: restart attempt failed: %s", self.name, exc)
                self._schedule_restart(f"restart failed: {exc}")

    # -- internals: workers, triggers, heartbeat -------------------------------------------------
    async def _handle_event(self, event: TriggerEvent, attempt: int) -> None:
        executor = self._executor
        assert executor is not None
        resume: ResumePoint | None = None
        recovered = self._resume.pop(event.event_id, None)
        if recovered is not None:  # a run a crash or an operator left half-way: continue it
            run = recovered.run
            run.state = RunState.QUEUED
            resume = recovered.resume_point()
        else:
            run = Run(self.name, event, attempt)
            delivery_cfg = self.config.trigger_delivery
            if delivery_cfg.scan_payloads:
                flagged = scan_payload(event.payload, delivery_cfg.max_payload_chars)
                if flagged:  # refused, not failed: no retry and no failure counted
                    self._delivery.dead_letter(event, DeadLetterReason.FLAGGED_BY_PAYLOAD_SCAN,
                                               ", ".join(flagged), attempt)
                    return
            if self._budget is not None and self._budget.begin_run() is not None:
                await self._refuse_for_budget(event, attempt)
                return
            if self._any_hooks(HookEvent.USER_PROMPT_SUBMIT):
                verdict = await self._hook(HookEvent.USER_PROMPT_SUBMIT,
                                           {"event": event.to_dict()})
                if verdict.blocked:  # refused, not failed: no retry, no failure counted
                    self._delivery.dead_letter(event, DeadLetterReason.BLOCKED_BY_HOOK,
                                               verdict.reason, attempt)
                    return
            if self._stamp is not None:  # frozen now: what this run executes
                run.identity = self._stamp.for_goal(render_event_message(event))
            if self._recorder is not None:
                self._recorder.run_started(run.run_id, event.event_id, attempt,
                                           run.identity.to_dict() if run.identity else None)
        self._inflight[run.run_id] = run
        if self._incidents is not None:  # an incident's event: its run is linked to it
            self._incidents.link_run(run.run_id, event, self._recorder)
        self._last_activity = self._clock.monotonic()
        if self._health is not None:
            self._health.begin_run()
        if self._notifier.has_listeners:
            self._notifier.emit(RunStarted(process=self.name, run_id=run.run_id,
                                           event_id=event.event_id,
                                           trigger_type=event.trigger_type, attempt=run.attempt))
        try:
            await executor.execute(run, resume)
        except asyncio.CancelledError:
            self._record_run_end(run, event_done=False)
            error = "run cancelled"
            if run.write_in_flight:  # say so: redelivering blindly could repeat that write
                error += (f" while write tool {run.write_in_flight} was running; its outcome is "
                          "unknown, check before redelivering")
            self._delivery.dead_letter(event, self._delivery.cancel_reason, error, run.attempt)
            self._run_done(run)
            raise
        if run.state is RunState.WAITING:  # a final reply without its completion evidence
            await self._park_for_evidence(run)
            return
        succeeded = run.state is RunState.SUCCEEDED
        self._record_run_end(run, event_done=succeeded)
        if crashpoints.armed("run_end") and self._recorder is not None:
            await self._recorder.journal.flush()  # the end is durable, its checkpoint is not
            crashpoints.reached("run_end")
        if succeeded:
            if self._inbox is not None:
                self._inbox.after_run(run.reply)
            self._delivery.succeeded(event)
            self._invocation_count += 1
            self._consecutive_failures = 0
            self._restart_count = 0
        else:
            self._on_run_failed(run)
        self._run_done(run)
        if self._health is not None:
            await self._feed_health(run)
        if self._budget is not None:
            await self._act_on_budget()
        if self._mission is not None and succeeded:
            await self._advance_mission(run)
        if self._any_hooks(HookEvent.RUN_END):
            await self._hook(HookEvent.RUN_END, {"run_id": run.run_id, "state": run.state.value,
                                                 "reason": run.reason, "reply": run.reply})
        self._checkpoint_soon()

    async def _park_for_evidence(self, run: Run) -> None:
        """The run waits for an operator: its event stays accepted, nothing is retried. It is
        listed as waiting (with its detail) before the journal write is awaited, so no reader
        sees a waiting run it cannot open; an answer is journaled after this entry anyway."""
        self._inflight.pop(run.run_id, None)
        self._waiting.add(evidence.parked(run))
        if self._recorder is not None:
            try:
                await self._recorder.run_waiting(run.run_id, run.last_step, "",
                                                 run.waiting_reason, **evidence.waiting_entry(run))
            except JournalError:
                log.critical("process %s: could not journal that run %s waits for evidence",
                             self.name, run.run_id, exc_info=True)
        self._checkpoint_soon()

    def _flag_config_changes(self) -> None:
        """A run resumed under another configuration than it started with is marked, so the
        operator sees it; it is never continued silently."""
        assert self._stamp is not None
        runs = [*self.resuming_runs(), *self._waiting.runs()]
        for run in runs:
            started = run.identity.config_digest if run.identity else ""
            if started and started != self._stamp.config_digest and not run.config_changed:
                run.config_changed = f"{started} -> {self._stamp.config_digest}"
                log.warning("process %s: run %s started under configuration %s and resumes "
                            "under %s", self.name, run.run_id, started,
                            self._stamp.config_digest)
                if self._recorder is not None:
                    self._recorder.submit(EntryType.CONFIG_CHANGED, {
                        "started_under": started, "resumed_under": self._stamp.config_digest},
                        run_id=run.run_id)

    async def _feed_health(self, run: Run) -> None:
        assert self._health is not None
        if run.state is RunState.SUCCEEDED:
            await self._health.run_succeeded(run.reply)
        elif run.attempt > self.config.trigger_delivery.max_retries:  # retries used up
            await self._health.run_failed()
        else:
            await self._health.act()

    async def _refuse_for_budget(self, event: TriggerEvent, attempt: int) -> None:
        """The day's runs are used up: the event waits in the dead letters for redelivery."""
        violations, _ = self._budget.take() if self._budget else ([], [])
        error = violations[0].message() if violations else "budget exceeded"
        self._delivery.dead_letter(event, DeadLetterReason.BUDGET_EXCEEDED, error, attempt)
        await self._apply_budget_action(violations)

    async def _act_on_budget(self) -> None:
        assert self._budget is not None
        violations, warnings = self._budget.take()
        for warning in warnings:
            self._notifier.emit(BudgetWarningEvent(
                process=self.name, limit_type=warning.limit, limit=warning.limit_value,
                current=warning.current))
        await self._apply_budget_action(violations)

    async def _apply_budget_action(self, violations: list[BudgetViolation]) -> None:
        if not violations:
            return
        first = violations[0]
        self._notifier.emit(BudgetExceeded(process=self.name, limit_type=first.limit,
                                           limit=first.limit_value, current=first.would_be,
                                           tool=first.tool))
        action = self.config.budget.on_exceeded
        target = self.config.budget.escalation
        if action == "escalate":
            self._escalate(target, {
                "type": "budget_violation", "process_id": self.process_id,
                "process_name": self.name, "violation": {
                    "limit_name": first.limit, "limit_value": first.limit_value,
                    "current_value": first.would_be, "tool_name": first.tool}})
        if action in ("pause", "escalate") and self.state is S.RUNNING:
            await self.suspend("budget")
        elif action == "stop":
            await self._stop_on_purpose()

    def _on_secret_access(self, name: str) -> None:
        if self._recorder is not None:  # the name, never the value
            self._recorder.secret_access(name)

    async def _advance_mission(self, run: Run) -> None:
        assert self._mission is not None
        mission = self._mission
        evaluation: MissionEvaluation | None = None
        if mission.count_run():
            if mission.uses_model_judge:
                evaluation = await self._judge_mission(run)
            else:
                evaluation = mission.check_state(self._context.state_snapshot())
        outcome = mission.apply(evaluation)
        if outcome is None:
            return
        kind = {"complete": MissionComplete, "failed": MissionFailed}.get(outcome, MissionEvent)
        self._notifier.emit(kind(
            process=self.name, state=mission.state, invocations=mission.invocations,
            reason=mission.reason,
            confidence=evaluation.confidence if evaluation is not None else None))
        if outcome == "paused" and evaluation is not None:
            self._escalate(self.config.mission.escalation, {
                "type": "low_confidence", "process_id": self.process_id,
                "process_name": self.name, "confidence": evaluation.confidence,
                "reasoning": evaluation.reasoning})
        if outcome == "complete" and self.config.mission.auto_complete:
            await self._stop_on_purpose()  # a mission achieved is not restarted
        elif outcome == "failed":
            await self._stop_on_purpose()

    async def _judge_mission(self, run: Run) -> MissionEvaluation:
        assert self._mission is not None and self.config.mission.eval_model is not None
        if self._mission_judge is None:
            self._mission_judge = build_model(self.config.mission.eval_model,
                                                   base_dir=self._base_dir)
        tool_calls = [f"{step.name}({args_hash(step.args or {})[:8]})"
                      for step in run.steps if step.kind == "tool"]
        evidence = build_evidence(self.config.mission, self._context.state_snapshot(),
                                  tool_calls, run.event, self._conversation.messages(),
                                  self._mission.invocations)
        if self._secrets is not None:
            evidence = self._secrets.redact(evidence)
        self._judge_calls += 1
        return await judge(self._mission_judge, evidence, self._mission.invocations,
                           judged_before=self._judge_calls - 1)

    def resume_mission(self) -> None:
        """Let a mission paused by an unsure judge be evaluated again."""
        if self._mission is None:
            raise RuntimeError(f"process {self.name!r} has no mission enabled")
        self._mission.resume()
        self._notifier.emit(MissionEvent(process=self.name, state="active",
                                         invocations=self._mission.invocations,
                                         reason="resumed by the operator"))
        self._checkpoint_soon()

    async def fail_mission(self, reason: str = "") -> None:
        """Give up on the mission: it is marked failed and the process stops on purpose."""
        if self._mission is None:
            raise RuntimeError(f"process {self.name!r} has no mission enabled")
        self._mission.fail(reason)
        self._notifier.emit(MissionFailed(process=self.name, state="failed",
                                          invocations=self._mission.invocations,
                                          reason=self._mission.reason))
        self._checkpoint_soon()
        await self._stop_on_purpose()

    def _escalate(self, target: EscalationTarget | None, payload: dict[str, Any]) -> None:
        """Send an escalation without holding up the run that caused it; the outcome is
        announced as an ``escalation.sent`` event. close() waits for sends in flight."""
        if target is None:
            return
        channels = "+".join(name for name, on in (("event", target.event_type),
                                                   ("webhook", target.webhook_url)) if on)

        async def send() -> None:
            outcome = await self._escalator.escalate(target, payload)
            self._notifier.emit(EscalationSent(
                process=self.name, reason=str(payload.get("type", "")), channels=channels,
                webhook_status=outcome.webhook_status, error=outcome.error))

        task = asyncio.create_task(send(), name=f"{self.name}-escalate")
        self._escalations.add(task)
        task.add_done_callback(self._escalations.discard)

    async def _pause_for_health(self) -> None:
        if self.state is S.RUNNING:  # pause and escalate suspend only a running process
            await self.suspend("health")

    async def _stop_on_purpose(self) -> None:
        """A stop the process decides itself (health, later budget and mission): never
        restarted. Run as its own task so it can cancel the worker that asked for it."""
        task = asyncio.create_task(self.stop(), name=f"{self.name}-stop")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _record_run_end(self, run: Run, *, event_done: bool) -> None:
        if self._recorder is None:
            return
        try:
            self._recorder.run_finished(run.run_id, run.event.event_id, run.state.value,
                                        run.reason, run.error, run.reply, event_done,
                                        run.messages)
        except Exception:  # the run's outcome is already decided; a journal fault is logged
            log.critical("process %s: could not journal the end of run %s", self.name,
                         run.run_id, exc_info=True)

    def checkpoint_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "context_state": self._context.state_snapshot(),
            "lifecycle_state": self.state.value,
            "invocation_count": self._invocation_count,
            "consecutive_failures": self._consecutive_failures,
            "restart_count": self._restart_count,
        }
        if self._health is not None:  # a restart must not forget a stuck agent's history
            state["health"] = self._health.monitor.to_dict()
        if self._budget is not None:  # nor reset the day's spending
            state["budget"] = self._budget.to_dict()
        if self._mission is not None:
            state["mission"] = self._mission.to_dict()
        return state

    def _checkpoint_soon(self) -> None:
        if self._recorder is not None:
            try:
                self._recorder.checkpoint(self.checkpoint_state())
            except Exception:
                log.critical("process %s: checkpoint failed", self.name, exc_info=True)

    async def _checkpoint(self, *, durable: bool) -> None:
        if self._recorder is None:
            return
        self._checkpoint_soon()
        if durable:
            await self._recorder.journal.flush()

    # -- journal and recovery --------------------------------------------------------------------
    async def _prepare_journal(self) -> None:
        """First start: open the journal (if any) and take back what it holds for this name."""
        cfg = self.config.journal
        if self._journal is None and cfg.level == "none":
            self._journal_prepared = True
            return
        self._owns_journal = self._journal is None
        if self._journal is None:
            self._journal = make_journal(cfg, self._on_journal_damage)
        await self._journal.open()
        level = cfg.level if cfg.level != "none" else "checkpoint"
        self._recorder = ProcessRecorder(self._journal, self.name, self.process_id, level)
        if self._secrets is not None:
            self._recorder.redact = self._secrets.redact_any
        self._delivery.recorder = self._recorder
        if cfg.recover_on_start:
            recovery = await recover_process(self._journal, self._recorder, self.name,
                                             self.config.context.conversation_max_messages)
            if recovery is not None:
                state = dict(self.config.context.initial_state)
                state.update(recovery.context_state)
                self._context.replace_state(state)
                self._conversation.set_messages(recovery.conversation)
                self._invocation_count = recovery.invocation_count
                saved_mission = (recovery.checkpoint or {}).get("mission")
                if self._mission is not None and isinstance(saved_mission, dict):
                    self._mission.restore(saved_mission)
                    recovery.summary["mission_restored"] = True
                saved_budget = (recovery.checkpoint or {}).get("budget")
                if self._budget is not None and isinstance(saved_budget, dict):
                    self._budget.restore(saved_budget)
                    recovery.summary["budget_restored"] = True
                saved_health = (recovery.checkpoint or {}).get("health")
                if self._health is not None and isinstance(saved_health, dict):
                    self._health.monitor = HealthMonitor.from_dict(
                        saved_health, self.config.health, process_id=self.name,
                        clock=self._clock)
                self._delivery.restore(recovery.queued, recovery.dead)
                self._resume = recovery.resumable
                for waiting in recovery.waiting.values():
                    self._waiting.add(waiting)
                for failed in recovery.failed:
                    self._finish_reconciled_failure(failed)
                self.recovered = recovery.summary
                self._notifier.emit(ProcessRecovered(process=self.name,
                                                     summary=dict(recovery.summary)))
        if cfg.recover_on_start and self._incidents is not None:
            await self._incidents.restore(self._journal)
        # After recovery, which reports the state the journal last recorded.
        self._recorder.transition(S.CREATED.value, S.STARTING.value, "start()")
        self._journal_prepared = True

    def _on_journal_damage(self, damage: DamagedJournal) -> None:
        self._notifier.emit(JournalDamaged(
            process=self.name, path=str(damage.path), reason=damage.reason,
            moved_to=str(damage.moved_to or ""),
        ))

    def _finish_reconciled_failure(self, failed: RecoveredRun) -> None:
        run = failed.run
        run.state = RunState.FAILED
        run.reason = "reconciled"
        why = failed.rebuild.failed_by_operator
        run.error = f"an operator reconciled the write as failed: {why}"
        self._record_run_end(run, event_done=False)
        self._delivery.dead_letter(run.event, DeadLetterReason.RETRIES_EXHAUSTED,
                                   f"{run.reason}: {run.error}", run.attempt)
        self._recent_runs.append(run)

    # -- rewind and fork (runtime_core/rewinding.py does the work) ------------------------------
    async def rewind_plan(self, entry_id: str | int,
                          mode: RewindMode | str = RewindMode.BOTH) -> RewindPlan:
        """What rewinding to just before ``entry_id`` would change; changes nothing."""
        return await ProcessRewinder(self).plan(entry_id, mode)

    async def rewind(self, entry_id: str | int, mode: RewindMode | str = RewindMode.BOTH, *,
                     actor: str = "operator") -> RewindResult:
        """Restore the context state and/or conversation to just before ``entry_id``.

        A running process is suspended (reason "rewind") while it happens, waits for a run in
        flight, and is resumed after. History is kept: a ``rewind`` entry and a checkpoint are
        appended. Outside effects, memory, budget, mission and secrets are not rolled back."""
        return await ProcessRewinder(self).rewind(entry_id, mode, actor=actor)

    async def fork(self, entry_id: str | int, new_name: str) -> AgentProcess:
        """A new process (same configuration, ``new_name``) that starts from this one's state
        just before ``entry_id``; its journal records where it came from. Not started."""
        return await ProcessRewinder(self).fork(entry_id, new_name)

    def waiting_runs(self) -> list[Run]:
        """Runs that wait for an operator, e.g. a write whose outcome a crash left unknown."""
        return self._waiting.runs()

    def waiting_detail(self, run_id: str) -> dict[str, Any]:
        """What an operator needs to reconcile ``run_id``: the tool, its arguments and key."""
        return self._waiting.detail(run_id)

    async def reconcile(
        self, run_id: str, outcome: str, *, result: Any = None, note: str = "",
        actor: str = "operator",
    ) -> None:
        """Settle a write whose outcome is unknown, then let the run continue (or fail).

        ``applied``: the model sees ``result`` as the tool's output. ``not_applied``: the model
        sees that it did not happen. ``failed``: the run fails with that reason."""
        if self._waiting.get(run_id).rebuild.waiting_evidence:
            raise ValueError(f"run {run_id} waits for completion evidence, not for a write to "
                             "be reconciled: supply_evidence(), return_to_model() or "
                             "fail_waiting_run()")
        decision = self._waiting.decision(run_id, outcome, result, note, actor)
        assert self._recorder is not None  # only a journaled process has waiting runs
        await self._recorder.reconciled(run_id, decision)
        settled = self._waiting.settle(run_id, decision)
        if outcome == "failed":
            self._finish_reconciled_failure(settled)
            self._checkpoint_soon()
            return
        self._resume[settled.run.event.event_id] = settled
        if not self._delivery.offer(settled.run.event):
            self._resume.pop(settled.run.event.event_id, None)

    # -- runs waiting for completion evidence (runtime_core/evidence.py) -------------------------
    async def supply_evidence(self, run_id: str, evidence_data: Any, *,
                              kind: str = "verification", links: list[str] | None = None,
                              note: str = "", actor: str = "operator") -> None:
        """Evidence for the run's latest action (``links`` defaults to it; evidence for an
        earlier action is refused as stale). The run is judged again: it succeeds if the
        evaluator is now satisfied, else it waits again with what is still missing."""
        waiting = self._evidence_wait(run_id)
        await self._answer(waiting, evidence.supplied(waiting, evidence_data, kind=kind,
                                                      links=links, note=note, actor=actor))

    async def return_to_model(self, run_id: str, note: str, *, actor: str = "operator") -> None:
        """Send the reply back to the model with a note; the run goes on from there."""
        await self._answer(self._evidence_wait(run_id), evidence.returned(note, actor))

    async def fail_waiting_run(self, run_id: str, note: str = "", *,
                               actor: str = "operator") -> None:
        """End a run waiting for evidence as failed (reason ``operator``)."""
        await self._answer(self._evidence_wait(run_id), evidence.failed(note, actor))

    def _evidence_wait(self, run_id: str) -> RecoveredRun:
        finished = next((r for r in self._recent_runs if r.run_id == run_id), None)
        if finished is not None:  # a terminal run is returned as it is, never reopened
            raise ValueError(f"run {run_id} is {finished.state.value}: a finished run is never "
                             "reopened")
        waiting = self._waiting.get(run_id)
        if not waiting.rebuild.waiting_evidence:
            raise ValueError(f"run {run_id} waits for a write to be reconciled, not for "
                             "evidence: use reconcile()")
        return waiting

    async def _answer(self, waiting: RecoveredRun, decision: evidence.EvidenceDecision) -> None:
        run_id = waiting.run.run_id
        if self._recorder is not None:
            await self._recorder.evidence(run_id, decision.data)
        self._waiting.pop(run_id)
        settled = evidence.apply(waiting, decision)
        if decision.data["action"] == "failed":
            run = settled.run
            run.state = RunState.FAILED
            run.reason = "operator"
            run.error = f"an operator failed the run: {settled.rebuild.failed_by_operator}"
            self._record_run_end(run, event_done=True)
            self._delivery.succeeded(run.event)  # settled by the operator: not a dead letter
            self._recent_runs.append(run)
            self._checkpoint_soon()
            return
        self._resume[settled.run.event.event_id] = settled
        if not self._delivery.offer(settled.run.event):
            self._resume.pop(settled.run.event.event_id, None)

    def _run_done(self, run: Run) -> None:
        """Bookkeeping once a run ends; announced after the counters it changed are updated."""
        self._inflight.pop(run.run_id, None)
        self._recent_runs.append(run)
        self._last_activity = self._clock.monotonic()
        if self._notifier.has_listeners:
            self._notifier.emit(RunFinished(
                process=self.name, run_id=run.run_id, event_id=run.event.event_id,
                state=run.state.value, reason=run.reason, error=run.error,
                reply=run.reply[:500], duration_ms=run.duration_ms,
            ))

    def _on_run_failed(self, run: Run) -> None:
        delivery = self.config.trigger_delivery
        event = run.event
        if run.attempt <= delivery.max_retries:
            delay = min(delivery.retry_backoff_max,
                        delivery.retry_backoff * 2 ** (run.attempt - 1))
            self._delivery.schedule_retry(event, delay, self._refusal)
            return
        error = f"{run.reason}: {run.error}"
        self._delivery.dead_letter(event, DeadLetterReason.RETRIES_EXHAUSTED, error, run.attempt)
        self._consecutive_failures += 1
        if self._consecutive_failures >= self.config.max_consecutive_failures:
            self._enter_failed("max consecutive failures", error)

    async def _heartbeat(self) -> None:
        cfg = self.config
        clock = self._clock
        while True:
            wait = cfg.heartbeat_interval
            now = clock.monotonic()
            if cfg.idle_timeout > 0 and self.state is S.RUNNING:
                if self._delivery.is_idle:
                    remaining = cfg.idle_timeout - (now - self._last_activity)
                    if remaining <= 0:
                        await self.suspend("idle")
                    else:
                        wait = min(wait, remaining)
                else:
                    wait = min(wait, cfg.idle_timeout)
            if cfg.max_lifetime > 0 and self._started_at is not None:
                age = now - self._started_at
                if age >= cfg.max_lifetime:
                    self._on_lifetime_reached()
                    return
                wait = min(wait, cfg.max_lifetime - age)
            await clock.sleep(wait)

    def _on_lifetime_reached(self) -> None:
        if self.state not in (S.RUNNING, S.SUSPENDED):
            return
        if self.config.restart_policy == "always":
            self._restart_task = asyncio.create_task(
                self._restart_after(0.0, "max lifetime reached", counts=False),
                name=f"{self.name}-recycle",
            )
        else:  # a stop on purpose: never restarted
            task = asyncio.create_task(self.stop(), name=f"{self.name}-lifetime-stop")
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    # -- listeners -------------------------------------------------------------------------------
    def _on_transition(self, record: ProcessTransition) -> None:
        if self._recorder is not None:
            try:
                self._recorder.transition(record.from_state.value, record.to_state.value,
                                          record.reason)
            except Exception:
                log.critical("process %s: could not journal a transition", self.name,
                             exc_info=True)
        self._notifier.emit(ProcessStateChanged(
            process=self.name, from_state=record.from_state.value,
            to_state=record.to_state.value, reason=record.reason,
        ))

    def _on_context_update(self, key: str, value: Any, source: str, record: bool) -> None:
        if record and self._recorder is not None:
            self._recorder.context_update(key, value, source)
        if self._notifier.has_listeners:
            self._notifier.emit(ContextUpdated(process=self.name, key=key, source=source))

    def __repr__(self) -> str:
        return (f"AgentProcess(name={self.name!r}, state={self.state.value!r}, "
                f"invocations={self._invocation_count})")
