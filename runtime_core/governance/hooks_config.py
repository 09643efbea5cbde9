"""Hooks in configuration: ``ProcessConfig(hooks=[...])`` and a manifest's ``hooks:`` section.

An entry names a HookEvent and either a ``callback`` (an async function, or its import path
``module:function``) or a ``command`` (a program run without a shell: the event as JSON on its
stdin, an optional JSON answer ``{"block": bool, "reason": str, "data": {...}}`` on its stdout).
The process registers them on ``process.hooks`` when it is made, in their order."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, PlainSerializer, field_validator, model_validator

from runtime_core.governance.hooks import HookBlocked, HookContext, HookEvent, HookFn, HookManager
from runtime_core.strict import StrictModel

# HookManager: re-exported for the process facade, which makes its own with configured_hooks
__all__ = ["BLOCKABLE", "REFERENCE_ONLY_EVENTS", "HookConfig", "HookManager", "configured_hooks"]

#: The events whose hooks can refuse something (a command hook's ``fail_closed`` acts there).
BLOCKABLE = frozenset({HookEvent.USER_PROMPT_SUBMIT, HookEvent.PRE_TOOL})
#: The reference runtime's events promptui does not fire, with what to write instead.
REFERENCE_ONLY_EVENTS: dict[str, str] = {
    "task_completed": "use run_end (a run ended: run_id, state, reason, reply)",
    "permission_request": "promptui has no approval step; use pre_tool (may block a call)",
    "permission_denied": "use post_tool (ok is false) or run_end",
    "subagent_start": "not fired: open mode's spawn limits are in open_mode",
    "subagent_stop": "not fired: watch the spawned process's own session_end",
    "pre_compact": "not fired: the conversation is trimmed by context.conversation_max_messages",
    "post_compact": "not fired: the conversation is trimmed by context.conversation_max_messages",
    "config_change": "not fired: configuration changes are journaled (see the timeline)",
}
#: Host variables every command hook gets (its environment is otherwise only env and
#: env_passthrough: the runtime's credentials do not leak into a hook by default).
_BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")


def _path_of(fn: Any) -> Any:
    """A callback dumps as its import path (a saved manifest names it, never holds it)."""
    if isinstance(fn, str) or fn is None:
        return fn
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


Callback = Annotated[Callable[..., Any] | str, PlainSerializer(_path_of)]


class HookConfig(StrictModel):
    """One hook of a process: its ``event`` and either a ``callback`` (an async function taking
    a HookContext, or its import path ``module:function``) or a ``command`` (a program, run
    without a shell, that reads the event as JSON on stdin)."""

    event: str = Field(description=(
        "The HookEvent: session_start, session_end, user_prompt_submit, pre_tool, post_tool, "
        "run_end, file_changed or task_created."))
    callback: Callback | None = Field(default=None, description=(
        "An async function taking a HookContext, or its import path 'module:function' (a "
        "manifest's folder is on the import path)."))
    command: list[str] | None = Field(default=None, description=(
        "A program and its arguments (a string is split as a shell would, but no shell runs "
        "it). It gets the event on stdin as JSON {event, process, process_id, data} and may "
        "answer {block, reason, data} on stdout."))
    timeout: Annotated[float, Field(gt=0, le=300, description=(
        "Seconds a command may take; then it is killed and counts as failed."))] = 5.0
    priority: int = Field(default=0, description="Higher runs first; equal ones in order.")
    once: bool = Field(default=False, description="Removed after its first call.")
    tag: str | None = Field(default=None, description="A label for your own bookkeeping.")
    fail_closed: bool = Field(default=False, description=(
        "A command that fails or times out refuses what it was asked about (user_prompt_submit "
        "and pre_tool only); otherwise a failure is logged and ignored."))
    cwd: str | None = Field(default=None, description=(
        "The command's working folder (default: the manifest's folder)."))
    env: dict[str, str] = Field(default_factory=dict, description=(
        "Extra environment variables of the command."))
    env_passthrough: list[str] = Field(default_factory=list, description=(
        "Host environment variables handed to the command as they are (besides PATH, HOME, "
        "LANG)."))
    max_output_bytes: Annotated[int, Field(ge=1, le=10 * 1024 * 1024, description=(
        "The most stdout read from a command."))] = 65536

    @field_validator("event")
    @classmethod
    def _known_event(cls, value: str) -> str:
        if value in REFERENCE_ONLY_EVENTS:
            raise ValueError(f"event {value!r} is the reference runtime's; promptui does not "
                             f"fire it: {REFERENCE_ONLY_EVENTS[value]}")
        try:
            return HookEvent(value.lower()).value
        except ValueError:
            events = ", ".join(e.value for e in HookEvent)
            raise ValueError(f"unknown hook event {value!r}; the events are: {events}") from None

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return shlex.split(value) if isinstance(value, str) else value

    @field_validator("callback")
    @classmethod
    def _callback_shape(cls, value: Any) -> Any:
        if isinstance(value, str):
            module, _, attr = value.partition(":")
            if not module or not attr:
                raise ValueError(f"callback {value!r} is an import path 'module:function'")
        elif value is not None and not inspect.iscoroutinefunction(value):
            raise ValueError(f"callback {getattr(value, '__name__', value)!r} must be an async "
                             "function (async def name(ctx): ...)")
        return value

    @model_validator(mode="after")
    def _one_action(self) -> HookConfig:
        if (self.callback is None) == (self.command is None):
            raise ValueError("a hook has exactly one of callback ('module:function') or "
                             "command ([program, args...])")
        if self.command is not None and not self.command:
            raise ValueError("command is empty: give the program to run")
        return self

    def resolve(self) -> HookFn:
        """The async function to register: the callback (imported now from its path), or
        the command's runner. ValueError names the entry's problem."""
        if self.command is not None:
            return _CommandHook(self).__call__
        if isinstance(self.callback, str):
            return _import_callback(self.callback)
        assert self.callback is not None
        fn: HookFn = self.callback
        return fn


def _import_callback(path: str) -> HookFn:
    module_name, _, attr = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # an import error of the user's module, said where it is
        raise ValueError(f"hook callback {path!r}: cannot import module {module_name!r}: "
                         f"{type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ValueError(f"hook callback {path!r}: module {module_name!r} has no "
                             f"attribute {attr!r}")
        target = getattr(target, part)
    if not inspect.iscoroutinefunction(target):
        raise ValueError(f"hook callback {path!r} must be an async function "
                         "(async def name(ctx): ...)")
    fn: HookFn = target
    return fn


class _CommandHook:
    """Runs a command hook: the event on stdin, its JSON answer (if any) on stdout."""

    def __init__(self, config: HookConfig, base_dir: Path | None = None) -> None:
        self.config = config
        self.base_dir = base_dir

    async def __call__(self, ctx: HookContext) -> None:
        try:
            answer = await self._run(ctx)
        except HookBlocked:
            raise
        except Exception as exc:
            if self.config.fail_closed and ctx.event in BLOCKABLE:
                raise HookBlocked(f"hook command failed: {exc}") from exc
            raise
        if isinstance(answer.get("data"), dict):
            ctx.data.update(answer["data"])
        if answer.get("block"):
            raise HookBlocked(str(answer.get("reason") or "blocked by hook"))

    async def _run(self, ctx: HookContext) -> dict[str, Any]:
        import asyncio  # loaded by the running loop already; a config alone does not need it

        c = self.config
        assert c.command is not None
        env = {k: os.environ[k] for k in (*_BASE_ENV, *c.env_passthrough) if k in os.environ}
        env.update(c.env)
        cwd = c.cwd or (str(self.base_dir) if self.base_dir is not None else None)
        message = json.dumps({"event": ctx.event.value, "process": ctx.process,
                              "process_id": ctx.process_id, "data": ctx.data}, default=str)
        proc = await asyncio.create_subprocess_exec(
            *c.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, cwd=cwd, env=env)
        try:
            async with asyncio.timeout(c.timeout):
                out, _ = await proc.communicate(message.encode())
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise RuntimeError(f"{c.command[0]} took over {c.timeout:g} s") from None
        if proc.returncode != 0:
            raise RuntimeError(f"{c.command[0]} exited {proc.returncode}")
        text = out[:c.max_output_bytes].decode(errors="replace").strip()
        if not text:
            return {}
        try:
            answer = json.loads(text)
        except json.JSONDecodeError:
            raise RuntimeError(f"{c.command[0]} wrote stdout that is not JSON") from None
        return answer if isinstance(answer, dict) else {}


def configured_hooks(entries: list[HookConfig], base_dir: str | Path | None = None
                     ) -> HookManager:
    """A HookManager holding ``entries`` (a process's ``config.hooks``) in their order.
    ValueError names the entry (``hooks[i]``) that cannot be used and why."""
    manager = HookManager()
    folder = Path(base_dir) if base_dir is not None else None
    for index, entry in enumerate(entries):
        try:
            fn = _CommandHook(entry, folder).__call__ if entry.command is not None \
                else entry.resolve()
            manager.register(entry.event, fn, priority=entry.priority, once=entry.once)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"hooks[{index}]: {exc}") from None
    return manager
