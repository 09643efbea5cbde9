"""AgentProcess: one long-running agent. A facade: it builds the shared state (core.py), wires
the parts that do the work (intake, dispatch, supervisor, journaling, assembly, operator,
rewinding, the optional features) with callbacks, and delegates its public API to them."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from runtime_core.agent.model import Model
from runtime_core.agent.tools import AgentTool, Tool
from runtime_core.bus import EventBus, MessageBroker
from runtime_core.clock import Clock, SystemClock
from runtime_core.config import ProcessConfig
from runtime_core.context import AgentContext, ConversationBuffer
from runtime_core.events import EventNotifier
from runtime_core.governance.config import HealthConfig
from runtime_core.governance.escalation import Escalator
from runtime_core.governance.hooks import HookManager
from runtime_core.incidents.book import Incident
from runtime_core.journal.provider import JournalProvider
from runtime_core.journal.rewind_plan import RewindMode, RewindPlan, RewindResult
from runtime_core.lifecycle import ProcessLifecycle, ProcessState
from runtime_core.memory.provider import MemoryProvider
from runtime_core.process.assembly import Assembly
from runtime_core.process.core import Hooks, ProcessHost, new_core
from runtime_core.process.dispatch import Dispatch
from runtime_core.process.intake import Intake
from runtime_core.process.journaling import ProcessJournal
from runtime_core.process.open_mode import OpenModeHost, meta_tools
from runtime_core.process.operator import Operator
from runtime_core.process.parts import (
    HealthPart,
    InboxPart,
    IncidentsPart,
    MemoryPart,
    MissionPart,
    PartActions,
    build_parts,
    put_part,
)
from runtime_core.process.parts.actions import Escalations
from runtime_core.process.parts.health import patch_health
from runtime_core.process.rewinding import ProcessRewinder
from runtime_core.process.status import ProcessStatus, build_status
from runtime_core.process.supervisor import Supervisor
from runtime_core.process.triggers import TriggerSet
from runtime_core.runs.run import Run
from runtime_core.triggers.base import AcceptResult, TriggerEvent
from runtime_core.triggers.config import TriggerConfig

S = ProcessState

class AgentProcess:
    def __init__(self, name: str, config: ProcessConfig | dict[str, Any], *,
                 process_id: str | None = None, event_bus: EventBus | None = None,
                 broker: MessageBroker | None = None, runtime: ProcessHost | None = None,
                 event_notifier: EventNotifier | None = None, hooks: Any = None,
                 model: Model | None = None, tools: Iterable[Tool | Any] | None = None,
                 clock: Clock | None = None, base_dir: str | Path | None = None,
                 journal: JournalProvider | None = None) -> None:
        if not name or not isinstance(name, str):
            raise ValueError("a process needs a non-empty name")
        self.name = name
        self.config = config if isinstance(config, ProcessConfig) else \
            ProcessConfig.model_validate(config)
        self.process_id = process_id or str(uuid.uuid4())
        self.runtime = runtime
        self.hooks = HookManager()  # this process's own; ``hooks=`` is the runtime's shared set
        core = self._core = new_core(
            name, self.process_id, self.config, clock=clock or SystemClock(),
            notifier=event_notifier or EventNotifier(), bus=event_bus or EventBus(),
            broker=broker or MessageBroker(), base_dir=base_dir, journal=journal, host=runtime,
            hooks=Hooks(name, self.hooks, hooks if isinstance(hooks, HookManager) else None,
                        self.process_id))
        cfg, clock = self.config, core.clock
        self._journal = ProcessJournal(core)
        core.lifecycle.add_listener(self._journal.on_transition)
        core.context.add_listener(self._journal.on_context_update)
        self._escalations = Escalations(name, Escalator(core.bus, source=name), core.notifier)
        self._actions = PartActions(pause=lambda why: self._supervisor.pause(why),
                                    stop_on_purpose=lambda: self._supervisor.stop_on_purpose(),
                                    escalate=self._escalations.send, inject=self.inject)
        core.parts = build_parts(core, self._actions)
        self._assembly = Assembly(core, model=model, tools=tools or (),
                                  extra_tools=self._meta_tools, tool_hooks=core.hooks.for_tools)
        self._intake = Intake(core, self.resume)
        self._triggers = TriggerSet(
            name, cfg.triggers, clock=clock, event_bus=core.bus, broker=core.broker,
            intake=self._intake,
            dead_letter=lambda event, reason: core.delivery.dead_letter(event, reason, "", 0))
        self._dispatch = Dispatch(core, self._journal,
                                  lambda why, error: self._supervisor.enter_failed(why, error))
        self._supervisor = Supervisor(core, self._journal, self._assembly, self._triggers,
                                      self._escalations, self._dispatch.handle_event)
        self._operator = Operator(core, self._journal)
        self._rewinder = ProcessRewinder(core, self._journal, suspend=self.suspend,
                                         resume=self.resume, fork_model=model,
                                         fork_tools=self._assembly.python_tools)
        self._open = OpenModeHost(core, self._triggers, self.status_snapshot, self._up)

    # -- read-only views ---------------------------------------------------------------------
    @property
    def state(self) -> ProcessState:
        return self._core.state

    @property
    def lifecycle(self) -> ProcessLifecycle:
        return self._core.lifecycle

    @property
    def context(self) -> AgentContext:
        return self._core.context

    @property
    def conversation(self) -> ConversationBuffer:
        return self._core.conversation

    @property
    def notifier(self) -> EventNotifier:
        return self._core.notifier

    @property
    def event_bus(self) -> EventBus:
        return self._core.bus

    @property
    def broker(self) -> MessageBroker:
        return self._core.broker

    @property
    def suspend_reason(self) -> str | None:
        return self._core.suspend_reason

    @property
    def instructions(self) -> str | None:
        return self._core.instructions

    @property
    def recovered(self) -> dict[str, Any] | None:  # what the first start took back, or None
        return self._core.recovered

    @property
    def dead_letters(self) -> list[dict[str, Any]]:
        return [letter.as_dict() for letter in self._core.delivery.dead_letters]

    @property
    def invocation_count(self) -> int:
        return self._core.invocation_count

    @property
    def restart_count(self) -> int:
        return self._core.restart_count

    @property
    def journal(self) -> JournalProvider | None:
        return self._core.journal

    @property
    def memory(self) -> MemoryProvider | None:
        """The long-term memory provider: None before the first start or without one."""
        return part.provider if (part := self._core.part(MemoryPart)) is not None else None

    def redact(self, text: str) -> str:  # every active secret value -> [secret:name]
        return self._core.redact(text)

    def recent_runs(self) -> list[Run]:  # finished runs, oldest first (the last 100)
        return list(self._core.recent_runs)

    def active_runs(self) -> list[Run]:
        return list(self._core.inflight.values())

    def resuming_runs(self) -> list[Run]:  # recovered or reconciled, queued to go on
        return [recovered.run for recovered in self._core.resume.values()]

    def tools(self) -> dict[str, AgentTool]:  # what runs get since the last start, by name
        return dict(executor.tools) if (executor := self._core.executor) is not None else {}

    def queued_events(self) -> list[TriggerEvent]:
        return self._core.delivery.queued_events()

    def status_snapshot(self) -> ProcessStatus:  # the status as a typed, frozen object
        triggers = self._triggers
        return build_status(self._core, triggers=triggers.status(),
                            trigger_count=triggers.config_count,
                            filtered_count=triggers.filtered_count, spawned=len(self._open.spawned),
                            servers=self._assembly.describe_servers())

    def status(self) -> dict[str, Any]:  # the status as the spec's JSON-serializable dict
        return self.status_snapshot().as_dict()

    def checkpoint_state(self) -> dict[str, Any]:
        return self._journal.checkpoint_state()

    # -- lifecycle (process/supervisor.py) -------------------------------------------------------
    async def start(self) -> None:
        await self._supervisor.start()

    async def stop(self, drain_timeout: float | None = None) -> None:
        """Stop the process. With ``drain_timeout`` (default: the config's ``drain_timeout``,
        else 0) the runs in flight may finish first, up to that many seconds, while no new
        event is taken; then what is left is cancelled and dead-lettered as usual."""
        await self._supervisor.stop(drain_timeout)

    async def close(self, drain_timeout: float | None = None) -> None:
        """stop(), then release what lives as long as the process object."""
        await self._supervisor.close(drain_timeout)

    def end_drain(self) -> None:
        """Cut a draining stop short: the runs still in flight are cancelled now."""
        self._supervisor.cut_drain()

    async def shutdown(self, drain_timeout: float | None = None) -> dict[str, int]:
        """Close for a service restart (SIGTERM), like a crash at a safe point; the next start
        re-queues what was accepted and not finished (see Supervisor.shutdown). With
        ``drain_timeout`` the runs in flight may finish first."""
        return await self._supervisor.shutdown(drain_timeout)

    async def suspend(self, reason: str = "manual") -> None:
        await self._supervisor.suspend(reason)

    async def resume(self, reason: str = "manual") -> None:
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
        return await self._intake.accept_pushed(event)  # as a webhook: journaled, then acked

    async def redeliver_dead_letters(self, event_ids: Iterable[str] | None = None) -> int:
        if self._core.idle_suspended:
            await self.resume("redelivery")
        return await self._operator.redeliver(event_ids)

    def clear_dead_letters(self) -> int:
        return self._core.delivery.clear_dead_letters()

    # -- triggers, live ------------------------------------------------------------------------
    def _up(self) -> bool:
        return self.state in (S.RUNNING, S.SUSPENDED)

    async def add_trigger(self, config: TriggerConfig | dict[str, Any]) -> str:
        """Add a config trigger. It starts at once on a RUNNING or SUSPENDED process (its events
        queue while suspended), otherwise with the next start(). Invalid config: ValueError."""
        return await self._triggers.add(config, running=self._up())

    async def remove_trigger(self, trigger_id: str) -> None:
        """Remove a trigger (KeyError if unknown); events it still held are dead-lettered
        "trigger removed"."""
        await self._triggers.remove(trigger_id)

    # -- the optional features ------------------------------------------------------------------
    def incidents(self) -> list[Incident]:
        """This process's incidents, in the order they opened (empty without ``incidents``)."""
        return part.keeper.incidents() if (part := self._core.part(IncidentsPart)) else []

    def _incidents(self) -> IncidentsPart:
        return self._core.need(IncidentsPart, "keeps no incidents; add 'incidents: "
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
        return self._core.need(InboxPart, "has no inbox; set inbox.enabled").send(
            content, message_type=message_type, priority=priority, sender_id=sender_id,
            ttl=ttl)

    async def ask(self, content: str, *, sender_id: str | None = None,
                  timeout: float = 120.0) -> str:  # noqa: ASYNC109  (the spec API)
        """Ask the agent a question and wait for its answer; the question wakes the agent."""
        return await self._core.need(InboxPart, "has no inbox; set inbox.enabled").ask(
            content, sender_id=sender_id, timeout=timeout)

    def update_health(self, patch: Mapping[str, Any]) -> HealthConfig:
        """Apply a JSON merge patch to the health config (ConfigPatchError, changing nothing,
        on an unknown field or a bad value). It holds from the next recorded signal; ``enabled``
        builds the monitor or drops it with its history."""
        return patch_health(self._core, self._actions, patch,
                            lambda part: put_part(self._core, HealthPart, part))

    def health_anomalies(self) -> list[dict[str, Any]] | None:
        """The anomaly history, oldest first; None when monitoring is off."""
        part = self._core.part(HealthPart)
        return [a.to_dict() for a in part.monitor.anomalies] if part is not None else None

    def clear_health_anomalies(self) -> int:
        """Forget the anomaly history; ValueError when monitoring is off."""
        part = self._core.need(HealthPart, "has no health monitoring (health: {enabled: true})",
                          ValueError)
        return part.monitor.clear_anomalies()

    def resume_mission(self) -> None:
        """Let a mission paused by an unsure judge be evaluated again."""
        self._core.need(MissionPart, "has no mission enabled").resume()
        self._journal.checkpoint_soon()

    async def fail_mission(self, reason: str = "") -> None:
        """Give up on the mission: it is marked failed and the process stops on purpose."""
        await self._core.need(MissionPart, "has no mission enabled").fail(reason)
        self._journal.checkpoint_soon()
        await self._supervisor.stop_on_purpose()

    # -- open mode (process/open_mode.py holds the meta-tools, their limits and their host) ----
    def _meta_tools(self) -> list[Tool]:
        return meta_tools(self._open) if self.config.execution_mode == "open" else []

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
    def waiting_runs(self) -> list[Run]:  # a write left unknown, evidence, a server's question
        return self._core.waiting.runs()

    def waiting_detail(self, run_id: str) -> dict[str, Any]:  # what an operator decides on
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
                               actor: str = "operator") -> None:  # evidence: fail (operator)
        await self._operator.answer(run_id, "failed", note=note, actor=actor)

    async def answer_elicitation(self, run_id: str, action: str, content: Any = None, *,
                                 actor: str = "operator") -> None:  # accept, decline, cancel
        await self._operator.answer_question(run_id, action, content, actor=actor)

    def __repr__(self) -> str:
        return (f"AgentProcess(name={self.name!r}, state={self.state.value!r}, "
                f"invocations={self._core.invocation_count})")
