"""The small protocol every model speaks: messages and tool specs in, one turn out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from runtime_core.triggers.base import TriggerEvent


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call a model asks for: the tool's ``name``, its ``args`` and the provider's
    ``call_id`` (to match the result to it)."""

    name: str
    args: dict[str, Any]
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """What the model decided: a final ``reply``, or ``tool_calls`` to run before the next turn."""

    reply: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model is offered it: name, description and the JSON schema of its
    parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(slots=True)
class ModelRequest:
    """What a Model is asked for the next turn of a run: the ``messages`` so far, the ``tools``
    on offer, the run's id and event, how many model calls the run made before (``turn``),
    and an optional cap on the reply's tokens."""

    messages: list[dict[str, Any]]  # a tool message may carry "attachments" (attachments.py)
    tools: list[ToolSpec]
    run_id: str
    turn: int  # how many model calls this run has made before this one
    event: TriggerEvent
    max_tokens: int | None = None  # a cap the asker sets (an MCP server's sampling request)


class ModelError(RuntimeError):
    """The model could not produce a turn; the run fails with reason "model"."""


@runtime_checkable
class Model(Protocol):
    """What a process calls to get the next turn of a run: ``complete(request)`` receives the
    messages so far, the tools on offer and the run's event, and returns a ModelTurn (a final
    reply, or tool calls to run before the next turn, with token usage). It raises ModelError
    when it cannot; the run then fails with reason ``model`` (or is retried). ``name`` is
    shown in the room and the journal. Give one to ``AgentProcess(model=...)`` or
    ``ProcessConfig(model=...)``."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelTurn: ...
