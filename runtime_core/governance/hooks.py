"""Hooks: async callbacks at points of a process's life. A hook may refuse a run or a tool call
(raise HookBlocked) or rewrite a tool's arguments; a hook that fails is logged, never fatal.
A runtime's shared hooks run after the process's own."""

from __future__ import annotations

import enum
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


class HookEvent(str, enum.Enum):
    """The moments a hook can run at: ``session_start`` and ``session_end`` (the process
    starts running, is about to stop), ``user_prompt_submit`` (a run is about to start; the
    hook may refuse it), ``pre_tool`` (may block a call or rewrite its arguments),
    ``post_tool``, ``run_end``, and ``file_changed`` / ``task_created`` (a file-watch event,
    any other event, was accepted)."""

    SESSION_START = "session_start"  # the process is RUNNING (data: restart)
    SESSION_END = "session_end"  # the process is about to stop
    USER_PROMPT_SUBMIT = "user_prompt_submit"  # a run is about to start; may refuse it
    PRE_TOOL = "pre_tool"  # a tool is about to run; may block it or rewrite data["args"]
    POST_TOOL = "post_tool"  # a tool returned (data: tool, args, result, ok)
    RUN_END = "run_end"  # a run ended (data: run_id, state, reason, reply)
    FILE_CHANGED = "file_changed"  # a file_watch event was accepted
    TASK_CREATED = "task_created"  # any other event was accepted


class HookBlocked(Exception):
    def __init__(self, reason: str = "blocked by hook") -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True)
class HookContext:
    """What a hook receives: the HookEvent, the process's name and id, and ``data`` (the
    event's details; a ``pre_tool`` hook may rewrite ``data["args"]``)."""

    event: HookEvent
    process: str  # the process's name
    data: dict[str, Any] = field(default_factory=dict)
    process_id: str = ""  # the process's id (AgentProcess.process_id)


@dataclass(slots=True)
class DispatchResult:
    blocked: bool = False
    reason: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    errors: list[tuple[str, BaseException]] = field(default_factory=list)


HookFn = Callable[[HookContext], Awaitable[None]]


@dataclass(slots=True)
class _Hook:
    hook_id: str
    event: HookEvent
    fn: HookFn
    priority: int
    once: bool


class HookManager:
    """A process's hooks: async functions run at a HookEvent, higher ``priority`` first
    (equal ones in registration order), ``once`` removed after their first call. Register
    with ``register(event, fn)`` or the ``@hooks.on(event)`` decorator. A hook that raises
    HookBlocked refuses what it was asked about (a run, a tool call); any other exception is
    logged and the next hook runs. ``AgentProcess.hooks`` is the process's own; the
    runtime's shared manager runs after it."""

    def __init__(self) -> None:
        self._hooks: list[_Hook] = []
        self._ids = itertools.count(1)

    def register(self, event: HookEvent | str, fn: HookFn, *, priority: int = 0,
                 once: bool = False) -> str:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"hook {getattr(fn, '__name__', fn)!r} must be an async function")
        hook = _Hook(f"hook-{next(self._ids)}", HookEvent(event), fn, priority, once)
        self._hooks.append(hook)
        # Higher priority first; equal priorities keep their registration order.
        self._hooks.sort(key=lambda h: -h.priority)
        return hook.hook_id

    def on(self, event: HookEvent | str, *, priority: int = 0, once: bool = False
           ) -> Callable[[HookFn], HookFn]:
        def decorate(fn: HookFn) -> HookFn:
            self.register(event, fn, priority=priority, once=once)
            return fn
        return decorate

    def remove(self, hook_id: str) -> bool:
        before = len(self._hooks)
        self._hooks = [h for h in self._hooks if h.hook_id != hook_id]
        return len(self._hooks) < before

    def registered(self, event: HookEvent | str | None = None) -> list[str]:
        wanted = None if event is None else HookEvent(event)
        return [h.hook_id for h in self._hooks if wanted is None or h.event is wanted]

    def has(self, event: HookEvent) -> bool:
        return any(h.event is event for h in self._hooks)

    def __len__(self) -> int:
        return len(self._hooks)

    async def dispatch(self, event: HookEvent, *, process: str, data: dict[str, Any],
                       then: HookManager | None = None, process_id: str = "") -> DispatchResult:
        ctx = HookContext(event, process, dict(data), process_id)
        result = DispatchResult()
        for manager in (self, then):
            if manager is None:
                continue
            for hook in [h for h in manager._hooks if h.event is event]:
                if hook.once:
                    manager.remove(hook.hook_id)
                try:
                    await hook.fn(ctx)
                except HookBlocked as blocked:
                    result.blocked, result.reason = True, blocked.reason
                    result.data = ctx.data
                    return result
                except Exception as exc:
                    log.exception("process %s: hook %s for %s failed", process, hook.hook_id,
                                  event.value)
                    result.errors.append((hook.hook_id, exc))
        result.data = ctx.data
        return result
