"""AgentProcess: one long-running agent, a facade over the parts that do its work (see the
class docstring for how they fit)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from runtime_core.config import ProcessConfig
from runtime_core.journal.rewind_plan import RewindMode, RewindPlan, RewindResult
from runtime_core.lifecycle import AlreadyDone, ProcessLifecycle, ProcessState

if TYPE_CHECKING:
    from runtime_core.agent.model import Model
    from runtime_core.agent.tools import AgentTool, Tool
    from runtime_core.bus import EventBus, MessageBroker
    from runtime_core.clock import Clock
    from runtime_core.context import AgentContext, ConversationBuffer
    from runtime_core.events import EventNotifier
    from runtime_core.governance.config import HealthConfig
    from runtime_core.incidents.book import Incident
    from runtime_core.journal.provider import JournalProvider
    from runtime_core.memory.provider import MemoryProvider
    from runtime_core.process import parts
    from runtime_core.process.core import ProcessHost
    from runtime_core.process.status import ProcessStatus
    from runtime_core.runs.run import Run
    from runtime_core.triggers.base import AcceptResult, TriggerEvent
    from runtime_core.triggers.config import TriggerConfig

class AgentProcess(AlreadyDone):
    """One long-running agent: its triggers feed a queue, workers run each event as a durable,
    journaled run, and a supervisor keeps it alive by its config's restart policy.

    A facade: it builds the parts and delegates its public API to them. They share one
    ``ProcessCore`` (core.py: the config, the lifecycle, context and conversation, the delivery
    queue, the counters) and ask each other through the small protocols of ports.py, never
    through another part's attributes. The parts, in the order ``__init__`` builds them:

    - journaling (journaling.py): opens the journal, takes back what it holds on the first
      start, journals transitions, context updates and run ends, writes checkpoints;
    - the supervisor (supervisor.py): start, stop, suspend, resume, failure and the restart
      policy, the idle and lifetime heartbeat;
    - intake (intake.py): every road in; an event is made durable before it is acknowledged;
      the triggers (triggers.py) feed it;
    - dispatch (dispatch.py): what a worker does with an event: refuse, run, settle;
    - the optional parts (parts/: secrets, memory, incidents, health, budget, mission, inbox),
      each on only when its config enables it;
    - open mode (open_mode.py): the meta-tools that let the agent change its own triggers,
      spawn children and rewrite its instructions;
    - assembly (assembly.py): each start's model, tools, MCP servers and run executor;
    - the operator (operator.py): answers for runs that wait (reconcile, evidence, questions)
      and redelivery; rewinding (rewinding.py): rewind plans, rewinds and forks.
    """

    def __init__(self, name: str, config: ProcessConfig | dict[str, Any], *,
                 process_id: str | None = None, event_bus: EventBus | None = None,
                 broker: MessageBroker | None = None, runtime: ProcessHost | None = None,
                 event_notifier: EventNotifier | None = None, hooks: Any = None,
                 model: Model | None = None, tools: Iterable[Tool | Any] | None = None,
                 clock: Clock | None = None, base_dir: str | Path | None = None,
                 journal: JournalProvider | None = None) -> None:
        from runtime_core.bus import EventBus, MessageBroker
        from runtime_core.clock import SystemClock
        from runtime_core.events import EventNotifier
        from runtime_core.governance.escalation import Escalator
        from runtime_core.governance.hooks_config import HookManager, configured_hooks
        from runtime_core.process import parts
        from runtime_core.process.assembly import Assembly
        from runtime_core.process.core import Hooks, new_core
        from runtime_core.process.dispatch import Dispatch
        from runtime_core.process.intake import Intake
        from runtime_core.process.journaling import ProcessJournal
        from runtime_core.process.open_mode import OpenModeHost
        from runtime_core.process.operator import Operator
        from runtime_core.process.parts.actions import Escalations
        from runtime_core.process.rewinding import ProcessRewinder
        from runtime_core.process.supervisor import Supervisor
        from runtime_core.process.takeover import Takeover
        from runtime_core.process.triggers import TriggerSet
        if not name or not isinstance(name, str):
            raise ValueError("a process needs a non-empty name")
        self.name = name
        self.config = config if isinstance(config, ProcessConfig) else \
            ProcessConfig.model_validate(config)
        self.process_id = process_id or str(uuid.uuid4())
        self.runtime = runtime
        self.hooks = configured_hooks(self.config.hooks, base_dir)  # own; hooks=: shared
        # The shared state; the journaling listens to it from here on (transitions, context).
        core = self._core = new_core(
            name, self.process_id, self.config, clock=clock or SystemClock(),
            notifier=event_notifier or EventNotifier(), bus=event_bus or EventBus(),
            broker=broker or MessageBroker(), base_dir=base_dir, journal=journal, host=runtime,
            hooks=Hooks(name, self.hooks, hooks if isinstance(hooks, HookManager) else None,
                        self.process_id))
        self._journal = ProcessJournal(core)
        # The supervisor before the parts that act: each holds it through a port (ports.py).
        self._escalations = Escalations(name, Escalator(core.bus, source=name), core.notifier)
        self._supervisor = supervisor = Supervisor(core, self._journal, self._escalations)
        # Events in, and what runs them: an event wakes an idle process; outcomes: restarts.
        self._intake = Intake(core, waker=supervisor)
        self._triggers = TriggerSet(name, self.config.triggers, clock=core.clock,
                                    event_bus=core.bus, broker=core.broker, intake=self._intake,
                                    dead_letters=core.delivery)
        self._dispatch = Dispatch(core, self._journal, outcomes=supervisor)
        # The optional parts: they may pause or stop the process, escalate, inject an event.
        self._actions = parts.PartActions(control=supervisor, escalations=self._escalations,
                                    injector=self._intake)
        core.parts = parts.build_parts(core, self._actions)
        # What each start assembles for the runs: open mode's meta-tools join the agent's.
        self._open = OpenModeHost(core, self._triggers)
        self._assembly = Assembly(core, model=model, tools=tools or (), extra_tools=self._open)
        # What the supervisor starts and stops exists now: handed over, the one late step.
        supervisor.attach(self._assembly, self._triggers, runner=self._dispatch)
        # What an operator asks: answers for waiting runs, redelivery, rewind and fork.
        self._operator = Operator(core, self._journal)
        self.takeover = Takeover(core)  # a scale-out node's side of a change of owner
        self._rewinder = ProcessRewinder(core, self._journal, suspension=supervisor,
                                         fork_model=model, fork_tools=self._assembly.python_tools)
        self.lineage = self._rewinder  # a host's start takes this one's forks back (adopt_forks)

    # -- read-only views ---------------------------------------------------------------------
    @property
    def state(self) -> ProcessState:
        """Where the process is in its lifecycle."""
        return self._core.state

    @property
    def lifecycle(self) -> ProcessLifecycle:
        """The state machine, with its transition history."""
        return self._core.lifecycle

    @property
    def context(self) -> AgentContext:
        """The agent's context state, kept across runs."""
        return self._core.context

    @property
    def conversation(self) -> ConversationBuffer:
        """The conversation the runs share (when the config keeps one)."""
        return self._core.conversation

    @property
    def notifier(self) -> EventNotifier:
        """Where this process's typed events go (the runtime's, when it has one)."""
        return self._core.notifier

    @property
    def event_bus(self) -> EventBus:
        """The event bus its ``event`` triggers listen on."""
        return self._core.bus

    @property
    def broker(self) -> MessageBroker:
        """The message broker its ``message`` triggers listen on."""
        return self._core.broker

    @property
    def suspend_reason(self) -> str | None:
        """Why it is suspended ("manual", "idle", "health", ...), or None."""
        return self._core.suspend_reason

    @property
    def instructions(self) -> str | None:
        """The system prompt the next run gets."""
        return self._core.instructions

    @property
    def recovered(self) -> dict[str, Any] | None:
        """What the first start took back from the journal, or None."""
        return self._core.recovered

    @property
    def dead_letters(self) -> list[dict[str, Any]]:
        """The dead letters it keeps at hand (the journal may keep older ones), as dicts."""
        return [letter.as_dict() for letter in self._core.delivery.dead_letters]

    @property
    def invocation_count(self) -> int:
        """How many runs succeeded (restored from the journal)."""
        return self._core.invocation_count

    @property
    def restart_count(self) -> int:
        """Restarts after a failure since the last successful run."""
        return self._core.restart_count

    @property
    def journal(self) -> JournalProvider | None:
        """The journal it writes to, or None without one."""
        return self._core.journal

    @property
    def memory(self) -> MemoryProvider | None:
        """The long-term memory provider: None before the first start or without one."""
        from runtime_core.process import parts
        return part.provider if (part := self._core.part(parts.MemoryPart)) is not None else None

    def redact(self, text: str) -> str:
        """``text`` with every active secret value replaced by ``[secret:name]``."""
        return self._core.redact(text)

    def recent_runs(self) -> list[Run]:
        """The finished runs, oldest first (the last 100)."""
        return list(self._core.recent_runs)

    def active_runs(self) -> list[Run]:
        """The runs in flight now."""
        return list(self._core.inflight.values())

    def resuming_runs(self) -> list[Run]:
        """Runs recovered or reconciled, queued to go on from where they stopped."""
        return [recovered.run for recovered in self._core.resume.values()]

    def tools(self) -> dict[str, AgentTool]:
        """The tools the runs get since the last start, by name."""
        return dict(executor.tools) if (executor := self._core.executor) is not None else {}

    def queued_events(self) -> list[TriggerEvent]:
        """The events waiting in the queue, in order."""
        return self._core.delivery.queued_events()

    def status_snapshot(self) -> ProcessStatus:
        """The status as a typed, frozen object."""
        from runtime_core.process.status import build_status
        t = self._triggers
        return build_status(self._core, triggers=t.status(), trigger_count=t.config_count,
                            filtered_count=t.filtered_count, spawned=len(self._open.spawned),
                            servers=self._assembly.describe_servers())

    def status(self) -> dict[str, Any]:
        """The status as the spec's JSON-serializable dict."""
        return self.status_snapshot().as_dict()

    def checkpoint_state(self) -> dict[str, Any]:
        """What a checkpoint of the process holds now."""
        return self._journal.checkpoint_state()

    # -- lifecycle (process/supervisor.py) -------------------------------------------------------
    async def start(self) -> None:
        """Start it, or again after a stop or a failure (StateError in any other state)."""
        await self._supervisor.start()

    async def stop(self, drain_timeout: float | None = None, *, keep_queue: bool = False) -> None:
        """Stop. With ``drain_timeout`` (default: the config's, else 0) the runs in flight may
        finish first, up to that long, no new event taken; then the rest is cancelled and
        dead-lettered "process stopped". ``keep_queue`` (promptui's hosts): nothing is
        dead-lettered, the next start (of this object or on its journal) runs each kept once."""
        await self._supervisor.stop(drain_timeout, keep_queue=keep_queue)

    async def close(self, drain_timeout: float | None = None) -> None:
        """stop(), then release what lives as long as the process object."""
        await self._supervisor.close(drain_timeout)

    def end_drain(self) -> None:
        """Cut a draining stop short: the runs still in flight are cancelled now."""
        self._supervisor.cut_drain()

    async def shutdown(self, drain_timeout: float | None = None) -> dict[str, int]:
        """Close for a service restart (SIGTERM): stop(keep_queue=True), the journal sealed,
        close() (see Supervisor.shutdown). Returns {"pending": kept, "dead_letters": ...}."""
        return await self._supervisor.shutdown(drain_timeout)

    async def suspend(self, reason: str = "manual") -> None:
        """Stop taking events off the queue (they keep queueing); only when RUNNING."""
        await self._supervisor.suspend(reason)

    async def resume(self, reason: str = "manual") -> None:
        """Take events off the queue again; only when SUSPENDED."""
        await self._supervisor.resume(reason)

    async def __aenter__(self) -> AgentProcess:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    # -- events in (process/intake.py) and dead letters ----------------------------------------
    async def inject(self, event: TriggerEvent) -> bool:
        """Queue ``event`` as if a trigger had fired. Returns False if it was dead-lettered."""
        return await self._intake.inject(event)

    async def accept_pushed(self, event: TriggerEvent) -> tuple[AcceptResult, str]:
        """Take ``event`` as a webhook would: journaled, then acknowledged."""
        return await self._intake.accept_pushed(event)

    async def redeliver_dead_letters(self, event_ids: Iterable[str] | None = None) -> int:
        """Queue dead letters again (those of ``event_ids``, else all); returns how many."""
        await self._supervisor.wake("redelivery")
        return await self._operator.redeliver(event_ids)

    def clear_dead_letters(self) -> int:
        """Forget the dead letters; returns how many."""
        return self._core.delivery.clear_dead_letters()

    # -- triggers, live ------------------------------------------------------------------------
    async def add_trigger(self, config: TriggerConfig | dict[str, Any]) -> str:
        """Add a config trigger. It starts at once on a RUNNING or SUSPENDED process (its events
        queue while suspended), otherwise with the next start(). Invalid config: ValueError."""
        return await self._triggers.add(config, running=self._core.up)

    async def remove_trigger(self, trigger_id: str) -> None:
        """Remove a trigger (KeyError if unknown); events it still held are dead-lettered
        "trigger removed"."""
        await self._triggers.remove(trigger_id)

    # -- the optional features ------------------------------------------------------------------
    def incidents(self) -> list[Incident]:
        """This process's incidents, in the order they opened (empty without ``incidents``)."""
        from runtime_core.process import parts
        return part.keeper.incidents() if (part := self._core.part(parts.IncidentsPart)) else []

    def _incidents(self) -> parts.IncidentsPart:
        from runtime_core.process import parts
        return self._core.need(parts.IncidentsPart, "keeps no incidents; add 'incidents: "
                               "{fingerprint: ...}' to its manifest")

    async def resolve_incident(self, incident_id: str, *, generation: int, version: int,
                               note: str = "", actor: str = "operator") -> Incident:
        """Mark an open incident resolved; StaleIncidentError when it moved since the
        ``generation`` and ``version`` the decision was made on."""
        return await self._incidents().resolve(incident_id, generation, version, note, actor)

    async def reopen_incident(self, incident_id: str, *, generation: int, version: int,
                              note: str = "", actor: str = "operator") -> Incident:
        """Reopen a resolved or recovered incident as a new generation and start a run on its
        last payload; refused when stale (StaleIncidentError) or still open."""
        incident, event = await self._incidents().reopen(incident_id, generation, version,
                                                         note, actor)
        await self._intake.queue_accepted(event, "incident reopened")
        return incident

    async def send_message(self, content: str, *, message_type: str = "context",
                           priority: str = "normal", sender_id: str | None = None,
                           ttl: float | None = None) -> str:
        """Leave a message for the agent's next run; returns its id."""
        from runtime_core.process import parts
        return self._core.need(parts.InboxPart, "has no inbox; set inbox.enabled").send(
            content, message_type=message_type, priority=priority, sender_id=sender_id,
            ttl=ttl)

    async def ask(self, content: str, *, sender_id: str | None = None,
                  timeout: float = 120.0) -> str:  # noqa: ASYNC109  (the spec API)
        """Ask the agent a question and wait for its answer; the question wakes the agent."""
        from runtime_core.process import parts
        return await self._core.need(parts.InboxPart, "has no inbox; set inbox.enabled").ask(
            content, sender_id=sender_id, timeout=timeout)

    def update_health(self, patch: Mapping[str, Any]) -> HealthConfig:
        """Apply a JSON merge patch to ``config.health`` (ConfigPatchError, changing nothing, on
        a bad one), then as apply_governance_config("health") does."""
        from runtime_core.process import parts
        return parts.patch_health(self._core, self._actions, patch)

    def apply_governance_config(self, section: str) -> None:
        """Apply a changed ``config.budget``, ``config.health`` or ``config.mission`` now (see
        parts.apply_governance); another ``section`` is a ValueError naming these."""
        from runtime_core.process import parts
        parts.apply_governance(self._core, self._actions, section)

    def health_anomalies(self) -> list[dict[str, Any]] | None:
        """The anomaly history, oldest first; None when monitoring is off."""
        from runtime_core.process import parts
        return part.anomaly_dicts() if (part := self._core.part(parts.HealthPart)) else None

    def clear_health_anomalies(self) -> int:
        """Forget the anomaly history; ValueError when monitoring is off."""
        from runtime_core.process import parts
        return self._core.need(parts.HealthPart, "has no health monitoring (health: {enabled: "
                               "true})", ValueError).monitor.clear_anomalies()

    def resume_mission(self) -> None:
        """Let a mission paused by an unsure judge be evaluated again."""
        from runtime_core.process import parts
        self._core.need(parts.MissionPart, "has no mission enabled").resume()
        self._journal.checkpoint_soon()

    async def fail_mission(self, reason: str = "") -> None:
        """Give up on the mission: it is marked failed and the process stops on purpose."""
        from runtime_core.process import parts
        await self._core.need(parts.MissionPart, "has no mission enabled").fail(reason)
        self._journal.checkpoint_soon()
        await self._supervisor.stop_on_purpose()

    # -- open mode (process/open_mode.py holds the meta-tools, their limits and their host) ----
    def update_instructions(self, text: str) -> None:
        """Replace the system prompt from the next run on."""
        self._open.update_instructions(text)

    @property
    def spawned_processes(self) -> list[str]:
        """Names of the child processes this process spawned (open mode)."""
        return list(self._open.spawned)

    # -- rewind and fork (process/rewinding.py) ------------------------------------------------
    async def rewind_plan(self, entry_id: str | int,
                          mode: RewindMode | str = RewindMode.BOTH) -> RewindPlan:
        """What rewinding to just before ``entry_id`` would change; changes nothing."""
        return await self._rewinder.plan(entry_id, mode)

    async def rewind(self, entry_id: str | int, mode: RewindMode | str = RewindMode.BOTH, *,
                     actor: str = "operator") -> RewindResult:
        """Restore the context state and/or conversation to just before ``entry_id``. A
        running process is suspended ("rewind") meanwhile; history is kept (a ``rewind``
        entry and a checkpoint). Outside effects, memory, budget, mission and secrets stay."""
        return await self._rewinder.rewind(entry_id, mode, actor=actor)

    async def fork(self, entry_id: str | int, new_name: str, *,
                   with_triggers: bool = False) -> AgentProcess:
        """A new process (same config, ``new_name``, not started) from this one's state just
        before ``entry_id``, lineage journaled; this one's triggers only ``with_triggers``."""
        return await self._rewinder.fork(entry_id, new_name,  # type: ignore[no-any-return]
                                         with_triggers=with_triggers)

    # -- runs that wait for an operator (process/operator.py) ----------------------------------
    def waiting_runs(self) -> list[Run]:
        """Runs waiting for an operator: a write left unknown, evidence, a server's question."""
        return self._core.waiting.runs()

    def waiting_detail(self, run_id: str) -> dict[str, Any]:
        """What an operator decides a waiting run on."""
        return self._core.waiting.detail(run_id)

    async def reconcile(self, run_id: str, outcome: str, *, result: Any = None, note: str = "",
                        actor: str = "operator") -> None:
        """Settle a write whose outcome is unknown: ``applied`` (the model sees ``result``),
        ``not_applied`` (it did not happen) or ``failed`` (the run fails)."""
        await self._operator.reconcile(run_id, outcome, result=result, note=note, actor=actor)

    async def supply_evidence(self, run_id: str, evidence_data: Any, *,
                              kind: str = "verification", links: list[str] | None = None,
                              note: str = "", actor: str = "operator") -> None:
        """Evidence for the run's latest action (an earlier one's is stale); judged again."""
        await self._operator.answer(run_id, "supplied", evidence_data, kind=kind, links=links,
                                    note=note, actor=actor)

    async def return_to_model(self, run_id: str, note: str, *, actor: str = "operator") -> None:
        """Send the reply back to the model with a note; the run goes on from there."""
        await self._operator.answer(run_id, "returned", note=note, actor=actor)

    async def fail_waiting_run(self, run_id: str, note: str = "", *,
                               actor: str = "operator") -> None:
        """Fail a run that waits for completion evidence."""
        await self._operator.answer(run_id, "failed", note=note, actor=actor)

    async def answer_elicitation(self, run_id: str, action: str, content: Any = None, *,
                                 actor: str = "operator") -> None:
        """Answer an MCP server's question a run waits on: accept, decline or cancel."""
        await self._operator.answer_question(run_id, action, content, actor=actor)

    def __repr__(self) -> str:
        return (f"AgentProcess(name={self.name!r}, state={self.state.value!r}, "
                f"invocations={self._core.invocation_count})")
