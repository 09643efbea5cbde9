"""The control plane: the one interface the control room and the CLI use to see and steer a
runtime, whatever carries it. ``LocalControl`` wraps an in-process runtime; ``RemoteControl``
speaks the same protocol over HTTP to ``promptui serve``. Every route of the HTTP API has its
method here, and mypy checks both transports against it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from runtime_core.control.pulse import BUCKET_SECONDS, WINDOW_SECONDS, PulseView
from runtime_core.control.views import (
    DeadLetterView,
    IncidentView,
    JournalEntryView,
    ProcessDetail,
    ProcessSummary,
    RewindPlan,
    RewindResult,
    RunView,
)
from runtime_core.errors import RuntimeBaseError
from runtime_core.events import RuntimeEvent

#: What an operator's stop does with the queued events: keep them for the next start (the
#: default), or dead-letter them as the spec's AgentProcess.stop() does.
QueuedOnStop = Literal["keep", "dead_letter"]


class ControlError(RuntimeBaseError):
    """A command could not be carried out; the message says why and what to do. ``code`` is
    the machine-readable reason the HTTP API answers with (e.g. PROCESS_NOT_FOUND)."""

    code: str = "REFUSED"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class ReadOnlyError(ControlError):
    """A mutating command on a read-only control plane."""

    code = "READ_ONLY"


@dataclass(frozen=True, slots=True)
class Injected:
    """What an inject with an idempotency key did: the event's id, and ``replayed`` when the
    key had been used before (then it is the first inject's event, and nothing was queued)."""

    event_id: str
    replayed: bool = False


class EventStream(Protocol):
    """A bounded buffer of runtime events; the oldest are dropped (and counted) when full."""

    dropped: int

    def drain(self, limit: int | None = None) -> list[RuntimeEvent]: ...

    def close(self) -> None: ...


class ControlPlane(Protocol):
    """What the control room can see and do."""

    @property
    def name(self) -> str: ...

    @property
    def read_only(self) -> bool: ...

    @property
    def link(self) -> str:
        """Empty while the runtime is reachable; else what is wrong (e.g. "reconnecting")."""
        ...

    def subscribe(self, maxsize: int = 10_000) -> EventStream: ...

    async def list_processes(self) -> list[ProcessSummary]: ...

    async def process_detail(self, name: str) -> ProcessDetail: ...

    async def start(self, name: str) -> None: ...

    async def stop(self, name: str, drain_timeout: float | None = None,
                   queued: QueuedOnStop = "keep") -> None:
        """Stop ``name``; with ``drain_timeout`` its runs in flight may finish first. Then,
        ``queued="keep"`` (an operator's stop, as every host stops): what is queued stays
        accepted in the journal and runs once when ``name`` next starts (here, or after a
        restart of the program); ``"dead_letter"``: the spec's stop, it is dead-lettered
        "process stopped", ready to redeliver."""
        ...

    async def restart(self, name: str) -> None: ...

    async def suspend(self, name: str) -> None:
        """Suspend a running process (by the operator: a restart keeps it suspended)."""
        ...

    async def resume(self, name: str, *, watch_again: bool = False) -> None:
        """Resume a suspended process. ``watch_again``: its health monitor forgets its
        anomalies and cooldowns first (the spec's ``clear_anomalies()``), so an anomaly that
        recurs pauses it again at once; without it the monitor keeps its memory, and an
        anomaly it reported is not reported again within its cooldown."""
        ...

    async def inject(self, name: str, payload: dict[str, Any],
                     trigger_type: str = "manual", *,
                     idempotency_key: str | None = None) -> str:
        """Queue an event for ``name``; its id once it is durable. Refused (ControlError, and
        nothing kept) while ``name`` cannot take it. With ``idempotency_key``: a repeat of the
        key (for a day at least) queues nothing and returns the first inject's event id."""
        ...

    async def inject_once(self, name: str, payload: dict[str, Any], trigger_type: str = "manual",
                          *, idempotency_key: str) -> Injected:
        """``inject`` with an idempotency key, saying whether the key had been used already."""
        ...

    async def redeliver(self, name: str, event_ids: Iterable[str] | None = None) -> int: ...

    async def clear_dead_letters(self, name: str) -> int: ...

    async def waiting_detail(self, name: str, run_id: str) -> dict[str, Any]: ...

    async def reconcile(self, name: str, run_id: str, outcome: str, *, result: Any = None,
                        note: str = "") -> None: ...

    async def answer_evidence(self, name: str, run_id: str, action: str, *,
                              evidence: Any = None, note: str = "") -> None:
        """A run waiting for completion evidence: ``supplied`` (with ``evidence``),
        ``returned`` (to the model, with ``note``) or ``failed``."""
        ...

    async def answer_elicitation(self, name: str, run_id: str, action: str, *,
                                 content: dict[str, Any] | None = None) -> None:
        """A run waiting for the answer to an MCP server's question (reason ``elicitation``):
        ``accept`` with ``content`` (the values its form asks for; checked against it),
        ``decline`` or ``cancel``. Returns once the answer is journaled and sent."""
        ...

    async def journal_entries(self, name: str, *, before_seq: int | None = None,
                              at_or_before: float | None = None, entry_type: str | None = None,
                              text: str = "", limit: int = 200,
                              after_seq: int | None = None,
                              run_id: str | None = None) -> list[JournalEntryView]:
        """Newest first; page with ``before_seq`` (the last seq you have); ``after_seq`` gives
        only what came after it (to follow a journal); ``run_id`` only that run's entries."""
        ...

    async def rewind_plan(self, name: str, entry_id: str, mode: str = "both") -> RewindPlan: ...

    async def rewind(self, name: str, entry_id: str, mode: str = "both") -> RewindResult: ...

    async def fork(self, name: str, entry_id: str, new_name: str, *,
                   with_triggers: bool = False) -> str:
        """Fork and start; the parent's triggers are copied only ``with_triggers`` (a clash
        with one already served is CONFLICT)."""
        ...

    async def incidents(self, process: str | None = None) -> list[IncidentView]:
        """Every process's incidents (or one's): open ones first, then the latest seen."""
        ...

    async def resolve_incident(self, name: str, incident_id: str, *, generation: int,
                               version: int, note: str = "") -> IncidentView: ...

    async def reopen_incident(self, name: str, incident_id: str, *, generation: int,
                              version: int, note: str = "") -> IncidentView:
        """A new generation; a run starts on the last payload."""
        ...

    async def runtime_info(self) -> dict[str, Any]:
        """Who the runtime is: ``name``, ``read_only``, ``process_count``,
        ``journal_faults`` (path -> why, for each journal that cannot be written now) and
        ``journal_left_behind`` (where -> what it held, for each damaged journal a start moved
        aside with ``on_damage: start_fresh``)."""
        ...

    async def process_status(self, name: str) -> dict[str, Any]:
        """The process's ``status()`` dict, as JSON data."""
        ...

    async def manifest_text(self, name: str) -> str:
        """The process's configuration now (live changes included) as a manifest's YAML text,
        credentials as ``${VAR}`` references; NOT_SAVABLE when a manifest cannot hold it."""
        ...

    async def runs(self, name: str, state: str | None = None) -> list[RunView]:
        """Waiting runs first, then running, then the newest finished; or those in ``state``."""
        ...

    async def dead_letters(self, name: str, *, offset: int = 0, limit: int | None = None
                           ) -> list[DeadLetterView]:
        """Every dead letter the process keeps, oldest first (the journal keeps them all until
        redelivered or cleared); a page with ``offset`` and ``limit``."""
        ...

    async def triggers(self, name: str) -> list[dict[str, Any]]: ...

    async def add_trigger(self, name: str, config: dict[str, Any]) -> str: ...

    async def remove_trigger(self, name: str, trigger_id: str) -> None: ...

    async def journal_entry(self, name: str, entry_id: str) -> dict[str, Any]:
        """One journal entry whole (``entry_id``, ``seq``, ``entry_type``, ``run_id``,
        ``timestamp`` and its ``data``), secrets redacted."""
        ...

    async def dead_letter(self, name: str, event_id: str) -> dict[str, Any]:
        """One dead letter whole: the ``event`` (payload, metadata), ``reason``, ``error``,
        ``attempts``, ``dead_lettered_at``; secrets redacted."""
        ...

    async def pulse(self, name: str | None = None, *, window: int = WINDOW_SECONDS,
                    bucket: int = BUCKET_SECONDS) -> list[PulseView]:
        """Every process's (or ``name``'s) last ``window`` seconds by ``bucket``, read from
        its journal: runs, failures, p50/p95 run time, tokens and recorded cost."""
        ...

    async def health_anomalies(self, name: str) -> list[dict[str, Any]] | None:
        """Oldest first; None when the process has no health monitoring."""
        ...

    async def clear_health_anomalies(self, name: str) -> int: ...

    async def update_health(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Change the health config live (a JSON merge patch, checked as a whole)."""
        ...

    async def start_all(self) -> None: ...

    async def close(self) -> None: ...
