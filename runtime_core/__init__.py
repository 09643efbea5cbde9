"""runtime_core: the agent-process runtime behind promptui. It never imports the UI."""

from runtime_core.agent import (
    EchoModel,
    Model,
    ModelError,
    ModelRequest,
    ModelTurn,
    ScriptedModel,
    Tool,
    ToolCall,
    ToolContext,
    ToolSpec,
    tool,
)
from runtime_core.bus import EventBus, MessageBroker
from runtime_core.clock import Clock, FakeClock, SystemClock
from runtime_core.config import (
    ContextConfig,
    ProcessConfig,
    RunBudgetConfig,
    ToolDeclaration,
    TriggerConfig,
    TriggerDeliveryConfig,
)
from runtime_core.context import AgentContext, ConversationBuffer
from runtime_core.delivery import DeadLetterReason
from runtime_core.events import EventNotifier, RuntimeEvent, Subscription
from runtime_core.lifecycle import ProcessLifecycle, ProcessState, StateError
from runtime_core.process import AgentProcess
from runtime_core.runs import FailureReason, Run, RunState
from runtime_core.runtime import AgentRuntime
from runtime_core.triggers.base import TriggerEvent

__all__ = [
    "AgentContext",
    "AgentProcess",
    "AgentRuntime",
    "Clock",
    "ContextConfig",
    "ConversationBuffer",
    "DeadLetterReason",
    "EchoModel",
    "EventBus",
    "EventNotifier",
    "FailureReason",
    "FakeClock",
    "MessageBroker",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelTurn",
    "ProcessConfig",
    "ProcessLifecycle",
    "ProcessState",
    "Run",
    "RunBudgetConfig",
    "RunState",
    "RuntimeEvent",
    "ScriptedModel",
    "StateError",
    "Subscription",
    "SystemClock",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDeclaration",
    "ToolSpec",
    "TriggerConfig",
    "TriggerDeliveryConfig",
    "TriggerEvent",
    "tool",
]
