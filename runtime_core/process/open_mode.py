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
from typing import Any, Protocol

from pydantic import ValidationError

from runtime_core.agent.tools import Tool, tool
from runtime_core.config import ProcessConfig
from runtime_core.process.status import ProcessStatus

CHILD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
META_TOOL_NAMES = ("list_triggers", "add_trigger", "remove_trigger", "spawn_process",
                   "update_instructions")


class OpenModeTarget(Protocol):
    """What the meta-tools need of their process (AgentProcess has it)."""

    @property
    def config(self) -> ProcessConfig: ...

    @property
    def dynamic_trigger_count(self) -> int: ...

    @property
    def spawned_processes(self) -> list[str]: ...

    def status_snapshot(self) -> ProcessStatus: ...

    async def add_dynamic_trigger(self, config: dict[str, Any]) -> str: ...

    async def remove_dynamic_trigger(self, trigger_id: str) -> None: ...

    async def spawn_child(self, name: str, instructions: str,
                          triggers: list[dict[str, Any]]) -> str: ...

    def update_instructions(self, text: str) -> None: ...


class OpenModeRefused(Exception):
    """A meta-tool call the limits do not allow; the model sees the reason."""


def meta_tools(process: OpenModeTarget) -> list[Tool]:
    """The open-mode tools bound to ``process``."""
    limits = process.config.open_mode

    async def list_triggers() -> list[dict[str, Any]]:
        """List this process's triggers: id, type, and source (config or dynamic)."""
        return [{"id": t.trigger_id, "type": t.trigger_type, "source": t.source}
                for t in process.status_snapshot().triggers]

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
        if len(process.spawned_processes) >= limits.max_spawned_processes:
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
