"""Open execution mode: the agent may change its own triggers, spawn child processes and update
its own instructions, within the limits of ``OpenModeConfig``.

The meta-tools are ordinary tools with a write effect, so every call is journaled (intent before,
result after), counted by the budget, filtered by ``allowed_tools`` and shown in the control room
like any other step. A refusal (a limit, a type not allowed) is an error the model reads; it never
fails the run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from runtime_core.agent.tools import Tool, tool
from runtime_core.config import ProcessConfig
from runtime_core.journal.entry import EntryType
from runtime_core.process.core import ProcessCore, TriggerStatus
from runtime_core.process.triggers import TriggerSet

CHILD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


class OpenModeHost:
    """What the meta-tools change in their process: its dynamic triggers, its children and its
    instructions. The process owns one; the tools call it. It offers the assembly its
    meta-tools (the port ExtraTools) and is the one writer of ``core.rebuild_count``."""

    def __init__(self, core: ProcessCore, triggers: TriggerSet) -> None:
        self._core = core
        self._triggers = triggers
        self.spawned: list[str] = []

    @property
    def config(self) -> ProcessConfig:
        return self._core.config

    def meta_tools(self) -> list[Tool]:
        """The meta-tools bound to this host in open mode; none in strict mode."""
        return meta_tools(self) if self.config.execution_mode == "open" else []

    def trigger_statuses(self) -> tuple[TriggerStatus, ...]:
        """The process's triggers, config and dynamic, as its status lists them."""
        return self._triggers.status()

    @property
    def dynamic_trigger_count(self) -> int:
        return len(self._triggers.dynamic)

    async def add_dynamic_trigger(self, config: dict[str, Any]) -> str:
        """An agent-added trigger: started now, stopped and dropped at stop(), not restored."""
        return await self._triggers.add(config, running=self._core.up, dynamic=True)

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
        host, config = self._core.host, self._core.config
        if host is None:
            raise RuntimeError("spawning needs the process to belong to an AgentRuntime")
        child_config = ProcessConfig.model_validate({
            "model": config.model, "instructions": instructions, "triggers": triggers,
            "journal": config.journal.model_dump()})
        child = host.add_process(name, child_config, base_dir=self._core.base_dir)
        self.spawned.append(name)
        try:
            await child.start()
        except Exception:
            self.spawned.remove(name)
            await host.remove_process(name)
            raise
        return name

    def update_instructions(self, text: str) -> None:
        """Replace the system prompt from the next run on (the executor reads it per run; the
        connected MCP tools are kept)."""
        core = self._core
        core.instructions = text
        core.rebuild_count += 1
        if core.recorder is not None:
            core.recorder.submit(EntryType.INSTRUCTIONS_UPDATED, {"length": len(text)})


class OpenModeRefused(Exception):
    """A meta-tool call the limits do not allow; the model sees the reason."""


def meta_tools(process: OpenModeHost) -> list[Tool]:
    """The open-mode tools bound to ``process``."""
    limits = process.config.open_mode

    async def list_triggers() -> list[dict[str, Any]]:
        """List this process's triggers: id, type, and source (config or dynamic)."""
        return [{"id": t.trigger_id, "type": t.trigger_type, "source": t.source}
                for t in process.trigger_statuses()]

    async def add_trigger(type: str, seconds: float | None = None,
                          cron_expression: str | None = None, event_type: str | None = None,
                          topic: str | None = None,
                          filter_expression: str | None = None) -> str:
        """Add a trigger to this process (interval: seconds; cron: cron_expression; event:
        event_type; message: topic). It runs until the process stops."""
        if not limits.allow_trigger_management:
            raise OpenModeRefused("trigger management is not allowed for this process")
        if type not in limits.allowed_trigger_types:
            raise OpenModeRefused(f"trigger type {type!r} is not allowed; allowed: "
                                  f"{', '.join(limits.allowed_trigger_types) or 'none'}")
        if process.dynamic_trigger_count >= limits.max_dynamic_triggers:
            raise OpenModeRefused(f"the limit of {limits.max_dynamic_triggers} dynamic "
                                  "triggers is reached; remove one first")
        fields = {"type": type, "seconds": seconds, "cron_expression": cron_expression,
                  "event_type": event_type, "topic": topic,
                  "filter_expression": filter_expression}
        try:
            trigger_id = await process.add_dynamic_trigger(
                {k: v for k, v in fields.items() if v is not None})
        except ValidationError as exc:
            problems = "; ".join(str(e["msg"]) for e in exc.errors())
            raise OpenModeRefused(f"invalid trigger: {problems}") from None
        return f"trigger {trigger_id} added and running"

    async def remove_trigger(trigger_id: str) -> str:
        """Remove a trigger this process added itself (config triggers cannot be removed)."""
        if not limits.allow_trigger_management:
            raise OpenModeRefused("trigger management is not allowed for this process")
        await process.remove_dynamic_trigger(trigger_id)
        return f"trigger {trigger_id} removed"

    async def spawn_process(name: str, instructions: str,
                            triggers: list[dict[str, Any]] | None = None) -> str:
        """Start a new child process with these instructions and triggers (same model)."""
        if not limits.allow_process_spawn:
            raise OpenModeRefused("spawning processes is not allowed for this process")
        if len(process.spawned) >= limits.max_spawned_processes:
            raise OpenModeRefused(f"the limit of {limits.max_spawned_processes} spawned "
                                  "processes is reached")
        if not CHILD_NAME.match(name):
            raise OpenModeRefused("a process name is a letter, then letters, digits, - or _")
        for trigger in triggers or []:
            if trigger.get("type") not in limits.allowed_trigger_types:
                raise OpenModeRefused(f"trigger type {trigger.get('type')!r} is not allowed")
        child = await process.spawn_child(name, instructions, triggers or [])
        return f"process {child} started"

    async def update_instructions(text: str) -> str:
        """Replace this process's instructions from its next run on."""
        if not limits.allow_instruction_change:
            raise OpenModeRefused("changing the instructions is not allowed for this process")
        if len(text) > limits.max_instruction_length:
            raise OpenModeRefused(f"instructions are limited to {limits.max_instruction_length}"
                                  " characters")
        process.update_instructions(text)
        return "instructions updated; they apply from the next run"

    functions: list[Callable[..., Any]] = [list_triggers, add_trigger, remove_trigger,
                                           spawn_process, update_instructions]
    return [tool(fn, effect="write") for fn in functions]
