"""RunServices: everything the runs of one process need, assembled once per start.

The executor takes this one object instead of a long list of keyword arguments; what a process
has not enabled (a journal, a budget, secrets, hooks, memory) is simply None."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runtime_core.agent.model import Model
from runtime_core.agent.tools import AgentTool
from runtime_core.bus import EventBus, MessageBroker
from runtime_core.context import AgentContext, ConversationBuffer
from runtime_core.events import EventNotifier
from runtime_core.runs.completion import CompletionConfig
from runtime_core.runs.config import RunBudgetConfig
from runtime_core.triggers.base import TriggerEvent

if TYPE_CHECKING:
    from runtime_core.governance.budget import Budget
    from runtime_core.governance.secrets import SecretScope
    from runtime_core.journal.recorder import ProcessRecorder

#: ``await hooks(name, data)`` -> (blocked, reason, data): the pre_tool and post_tool hooks.
HookDispatch = Callable[[str, dict[str, Any]], Awaitable[tuple[bool, str, dict[str, Any]]]]
#: Told of each tool call before it runs (behavioral health watches them).
ToolCallWatcher = Callable[[str, dict[str, Any]], Awaitable[None]]
#: A system line for the prompt, or None to leave it out (budget left, mission, inbox).
PromptLine = Callable[[], str | None]
#: Long-term memory for a run's prompt; searched once per run.
MemoryBlock = Callable[[TriggerEvent], Awaitable[str | None]]


@dataclass(slots=True)
class RunServices:
    process: str
    model: Model
    tools: Mapping[str, AgentTool]
    budget: RunBudgetConfig
    context: AgentContext
    conversation: ConversationBuffer
    instructions: Callable[[], str | None]
    notifier: EventNotifier
    allowed_tools: list[str] | None = None
    recorder: ProcessRecorder | None = None
    event_bus: EventBus | None = None
    broker: MessageBroker | None = None
    autonomy: Budget | None = None  # the autonomy budget's per-call checks
    secrets: SecretScope | None = None
    hooks: HookDispatch | None = None
    #: Whether a hook listens for a tool event (pre_tool, post_tool); None: any may.
    hooked: Callable[[str], bool] | None = None
    watch_tool_call: ToolCallWatcher | None = None
    prompt_lines: Sequence[PromptLine] = ()
    memory_block: MemoryBlock | None = None
    completion: CompletionConfig | None = None  # None: any final reply completes the run
    fencing_token: int | None = None  # the lease epoch on a scale-out node (ToolContext)

    def redact(self, text: str) -> str:
        return self.secrets.redact(text) if self.secrets is not None else text
