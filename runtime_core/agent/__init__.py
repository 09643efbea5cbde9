"""Models and tools."""

from runtime_core.agent.model import Model, ModelError, ModelRequest, ModelTurn, ToolCall, ToolSpec
from runtime_core.agent.scripted import EchoModel, ScriptedModel
from runtime_core.agent.tools import Tool, ToolContext, ToolError, load_tool, tool

__all__ = [
    "EchoModel",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelTurn",
    "ScriptedModel",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolSpec",
    "load_tool",
    "tool",
]
