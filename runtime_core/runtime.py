"""AgentRuntime: many processes sharing one event bus, message broker, notifier and clock
(see the class docstring)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from runtime_core.agent.model import Model
from runtime_core.bus import EventBus, MessageBroker
from runtime_core.clock import Clock, SystemClock
from runtime_core.config import ProcessConfig
from runtime_core.events import EventNotifier, JournalDamaged, JournalFault
from runtime_core.governance.hooks import HookManager
from runtime_core.journal.factory import make_journal, preflight, share_journal
from runtime_core.journal.faults import FaultState
from runtime_core.journal.provider import JournalProvider
from runtime_core.journal.sqlite.schema import DamagedJournal
from runtime_core.lifecycle import field_of, one_line
from runtime_core.manifest.loader import Manifest, load_directory, load_manifest
from runtime_core.process.ports import DeliveryGate
from runtime_core.process.process import AgentProcess
from runtime_core.runtime_config import RuntimeConfig

log = logging.getLogger(__name__)


class AgentRuntime:
    """Many ``AgentProcess`` objects run side by side: they share one event bus and message
    broker (so one process's events and messages can trigger another), one notifier (every
    typed event, for the control room and the API), one clock and one set of shared hooks; and
    one journal per journal file or database, since SQLite has one writer.

    Processes are added from a config (``add_process``; those of a ``RuntimeConfig`` given to
    the constructor, the reference runtime's form, are added so), a ``.agent`` manifest
    (``load_manifest``, ``load_directory``, ``add_manifest``: the runtime remembers each one's
    file to name it in start problems) or by a process itself (open mode's spawn, ``fork``).
    ``start_all`` starts every process that is down and keeps going past one that fails
    (``start_failures``, ``start_problems``); ``stop_all`` stops them all with the spec's
    stop (draining if asked; what has not run is dead-lettered), then closes the shared
    journals so the program can exit; ``shutdown`` is how promptui's hosts (serve, run, the
    room, a cluster node) stop: it drains, keeps what was accepted and not finished for the
    next start and says how much; ``remove_process`` closes and forgets one. ``async with
    AgentRuntime()`` starts all and closes all."""

    def __init__(
        self,
        config: RuntimeConfig | None = None,
        *,
        event_bus: EventBus | None = None,
        broker: MessageBroker | None = None,
        event_notifier: EventNotifier | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.event_bus = event_bus or EventBus()
        self.broker = broker or MessageBroker()
        self.notifier = event_notifier or EventNotifier()
        self.clock: Clock = clock or SystemClock()
        self.hooks = HookManager()  # shared: run after each process's own hooks
        self._processes: dict[str, AgentProcess] = {}
        # One journal per file for every process of this runtime: SQLite has one writer.
        self._journals: dict[tuple[str, str], JournalProvider] = {}
        self._manifests: dict[str, Path] = {}  # process name -> the .agent file it came from
        #: Why each process the last start_all() could not start failed (name -> error).
        self.start_failures: dict[str, Exception] = {}
        #: Scale-out: the node that owns a process (its id, or None), set by a cluster host;
        #: status() then names each process's node.
        self.node_of: Callable[[str], str | None] | None = None
        #: Scale-out: holds a delivery key across the nodes while a process takes an event with
        #: it (process/intake.py), set by a cluster host (cluster/delivery_gate.py).
        self.delivery_gate: DeliveryGate | None = None
        for name, process_config in (config.processes if config is not None else {}).items():
            self.add_process(name, process_config)  # the reference's AgentRuntime(config)

    def _journal_for(self, config: ProcessConfig) -> JournalProvider | None:
        cfg = config.journal
        if cfg.level == "none":
            return None
        if cfg.backend == "memory":
            key = ("memory", "")
        elif cfg.backend == "postgres":  # one journal per database, however it is written
            key = ("postgres", cfg.resolved_dsn() or "")
        else:
            key = ("sqlite", str(Path(cfg.path).expanduser().resolve()))
        journal = self._journals.get(key)
        if journal is None:
            journal = make_journal(cfg, self._on_journal_damage)
            self._journals[key] = journal
            self._watch(journal)
        else:
            share_journal(journal, cfg)
        return journal

    def _watch(self, journal: JournalProvider) -> None:
        faults = getattr(journal, "faults", None)
        if isinstance(faults, FaultState):
            faults.listen(lambda reason, j=journal: self._on_journal_fault(j, reason))

    def check_journals(self) -> None:
        """Raise now the JournalError a start would raise for a journal file (a bad path,
        held by another runtime, damaged where recovery reads it), before anything starts;
        nothing is opened or moved. For a command that must fail cleanly up front."""
        for journal in self._journals.values():
            preflight(journal)

    def _on_journal_damage(self, damage: DamagedJournal) -> None:
        self.notifier.emit(JournalDamaged(process="*", path=str(damage.path),
                                          reason=damage.reason,
                                          moved_to=str(damage.moved_to or "")))

    def _on_journal_fault(self, journal: JournalProvider, reason: str | None) -> None:
        on_it = tuple(name for name, p in self._processes.items() if p.journal is journal)
        self.notifier.emit(JournalFault(process="*", path=str(getattr(journal, "path", "")),
                                        reason=reason or "", processes=on_it))

    def journal_faults(self) -> dict[str, str]:
        """The journals that cannot be written now (path -> why); empty when all write."""
        found: dict[str, str] = {}
        for journal in self._journals.values():
            faults = getattr(journal, "faults", None)
            if isinstance(faults, FaultState) and faults.reason is not None:
                found[str(getattr(journal, "path", ""))] = faults.reason
        return found

    def journals_left_behind(self) -> dict[str, str]:
        """Damaged journals moved aside (``on_damage: start_fresh``) and still beside their
        journal files: where each lies -> what it held and how to rescue it."""
        found: dict[str, str] = {}
        for journal in self._journals.values():
            for kept in getattr(journal, "left_behind", None) or ():
                found[str(kept.path)] = kept.describe()
        return found

    @property
    def processes(self) -> dict[str, AgentProcess]:
        """The processes by name (a copy)."""
        return dict(self._processes)

    def get_process(self, name: str) -> AgentProcess:
        """The process named ``name``; KeyError listing the known ones."""
        try:
            return self._processes[name]
        except KeyError:
            known = ", ".join(sorted(self._processes)) or "none"
            raise KeyError(f"no process named {name!r} (processes: {known})") from None

    def add_process(
        self,
        name: str,
        config: ProcessConfig | dict[str, Any],
        *,
        model: Model | None = None,
        tools: Iterable[Any] | None = None,
        base_dir: str | Path | None = None,
        process_id: str | None = None,
        journal: JournalProvider | None = None,
    ) -> AgentProcess:
        """Add a process, not started, sharing the runtime's bus, broker, notifier, clock and
        hooks, and the runtime's journal for the one its config names. Returns it at once; it
        may also be awaited, as ``await runtime.add_process(...)`` written for the reference
        does (an AgentProcess awaited is itself). ``journal``: the
        process's own journal instead (a scale-out node's, fenced to its lease); kept with the
        runtime's journals (closed by stop_all and shutdown, its faults reported) until
        remove_process closes it."""
        if name in self._processes:
            raise ValueError(f"a process named {name!r} already exists")
        if not isinstance(config, ProcessConfig):
            config = ProcessConfig.model_validate(config)
        if journal is not None:
            self._journals[("process", name)] = journal
            self._watch(journal)
        process = AgentProcess(
            name,
            config,
            process_id=process_id,
            event_bus=self.event_bus,
            broker=self.broker,
            runtime=self,
            event_notifier=self.notifier,
            hooks=self.hooks,
            model=model,
            tools=tools,
            clock=self.clock,
            base_dir=base_dir,
            journal=journal if journal is not None else self._journal_for(config),
        )
        self._processes[name] = process
        return process

    def load_manifest(self, path: str | Path) -> AgentProcess:
        """Add the process a ``.agent`` file declares (ManifestError if it is invalid)."""
        return self._add_manifests([load_manifest(path)])[0]

    def load_directory(self, directory: str | Path) -> list[AgentProcess]:
        """Add every process of a folder of ``.agent`` files; nothing is added unless every
        file is valid (ManifestError lists every problem)."""
        return self._add_manifests(load_directory(directory))

    def _add_manifests(self, manifests: list[Manifest]) -> list[AgentProcess]:
        taken = [m.name for m in manifests if m.name in self._processes]
        if taken:
            raise ValueError(f"processes already exist: {', '.join(taken)}")
        return [self.add_manifest(manifest) for manifest in manifests]

    def add_manifest(self, manifest: Manifest, *, config: ProcessConfig | None = None,
                     journal: JournalProvider | None = None) -> AgentProcess:
        """Add the process a loaded manifest declares (``config``: a copy of its config to use
        instead; ``journal``: its own journal, as for add_process)."""
        folder = str(manifest.base_dir.resolve())
        if folder not in sys.path:  # tools declared beside the manifest import from here
            sys.path.insert(0, folder)
        process = self.add_process(manifest.name, config or manifest.config,
                                   base_dir=manifest.base_dir, journal=journal)
        self._manifests[manifest.name] = manifest.path
        return process

    def start_problems(self) -> list[str]:
        """One line for each process the last start_all() could not start: which process, its
        manifest file, the field and the cause."""
        lines = []
        for name, error in self.start_failures.items():
            where = [str(path)] if (path := self._manifests.get(name)) is not None else []
            if (field := field_of(error)) is not None:
                where.append(field)
            lines.append(f"process {name!r} did not start: " + ": ".join([*where,
                                                                         one_line(error)]))
        return lines

    async def remove_process(self, name: str, *, close: bool = True) -> None:
        """Close the process (unless it was closed already: ``close=False``) and forget it,
        and close the journal given to it alone."""
        process = self.get_process(name)
        try:
            if close:
                await process.close()
        finally:
            del self._processes[name]
            self._manifests.pop(name, None)
            own = self._journals.pop(("process", name), None)
            if own is not None:
                await own.close()

    async def start_all(self) -> None:
        """Start every process that is not already up; one that fails to start stays FAILED and
        does not stop the others. Raises the first failure after trying them all."""
        self.start_failures = {}
        started: set[str] = set()
        while len(started) < len(self._processes):  # again for the forks taken back
            for process in [p for n, p in self._processes.items() if n not in started]:
                started.add(process.name)
                if process.state.value in ("created", "stopped", "failed"):
                    try:
                        await process.start()
                    except Exception as exc:
                        self.start_failures[process.name] = exc
                if process.state.value in ("running", "suspended"):  # its journal is open
                    await self._adopt_forks(process)
        if self.start_failures:
            raise next(iter(self.start_failures.values()))

    async def _adopt_forks(self, process: AgentProcess) -> None:
        """A fork lives in the journal (its ``forked`` entry names its parent): a restart of
        the host takes it back beside its parent, as fork() made it."""
        try:
            await process.lineage.adopt_forks()
        except Exception as exc:  # the parent runs on; the fork stays in the journal
            log.warning("process %s: its forks could not be taken back from the journal: %s",
                        process.name, exc)

    def _drains(self, drain_timeout: float | None) -> dict[str, float | None]:
        """Each process's drain: its own ``drain_timeout`` when its config sets one, else
        ``drain_timeout`` (None: the process's default)."""
        return {name: p.config.drain_timeout if p.config.drain_timeout is not None
                else drain_timeout for name, p in self._processes.items()}

    async def stop_all(self, drain_timeout: float | None = None) -> None:
        """Stop every process, then close the journals they share: nothing is left running
        that would keep the program from exiting. start_all() (or a process's start()) opens
        them again. With ``drain_timeout`` the runs in flight may finish first (all processes
        drain at once; a process's own ``drain_timeout`` wins)."""
        drains = self._drains(drain_timeout)
        try:  # every stop ends before a journal closes, even when one of them raises
            results = await asyncio.gather(*(p.stop(drains.get(p.name)) for p in
                                             list(self._processes.values())),
                                           return_exceptions=True)
        finally:
            await self._close_journals()
        for result in results:
            if isinstance(result, BaseException):
                raise result

    def end_drains(self) -> None:
        """Cut every drain under way short: the runs still in flight are cancelled now."""
        for process in self._processes.values():
            process.end_drain()

    async def _close_journals(self) -> None:
        for journal in self._journals.values():
            await journal.close()

    def list_processes(self) -> list[dict[str, Any]]:
        """Each process's name, state and id."""
        return [
            {"name": p.name, "state": p.state.value, "process_id": p.process_id}
            for p in self._processes.values()
        ]

    def status(self) -> dict[str, Any]:
        """How many processes, and each one's status (with its node, in a cluster)."""
        node_of = self.node_of
        return {
            "process_count": len(self._processes),
            "processes": {name: p.status() if node_of is None else
                          {**p.status(), "node": node_of(name)}
                          for name, p in self._processes.items()},
        }

    async def close(self) -> None:
        """Stop and close every process, then close the journals they shared."""
        try:
            await self.stop_all()
            for process in list(self._processes.values()):
                await process.close()
        finally:  # a process that failed to stop must not leave a journal (and its thread) open
            await self._close_journals()

    async def shutdown(self, drain_timeout: float | None = None) -> dict[str, dict[str, int]]:
        """Stop as every promptui host does (SIGTERM, Ctrl+C, the room's quit): every process
        as ``AgentProcess.shutdown``, so the next start on the same journals takes back the
        queued events and the runs in flight instead of finding them dead-lettered. With
        ``drain_timeout`` the runs in flight may finish first, as for stop_all(). Returns each
        process's counts: {"pending": events kept, "dead_letters": ...}."""
        drains = self._drains(drain_timeout)
        try:
            processes = list(self._processes.values())
            results = await asyncio.gather(*(p.shutdown(drains.get(p.name))
                                             for p in processes),
                                           return_exceptions=True)
            counts: dict[str, dict[str, int]] = {}
            for process, result in zip(processes, results, strict=True):
                if isinstance(result, BaseException):
                    raise result
                counts[process.name] = result
            return counts
        finally:
            await self._close_journals()

    async def __aenter__(self) -> AgentRuntime:
        await self.start_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
