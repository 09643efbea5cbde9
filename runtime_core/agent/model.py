"""The small protocol every model speaks: messages and tool specs in, one turn out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from runtime_core.triggers.base import TriggerEvent


@dataclass(frozen=True, slots=True)
class ToolCall:
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
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(slots=True)
class ModelRequest:
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
    name: str

    async def complete(self, request: ModelRequest) -> ModelTurn: ...
