"""The agent's settings: which model (a string, a scripted script or a remote model's
settings) and which Python tools by import path. MCP servers are in agent/mcp_config.py."""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator

from runtime_core.agent.script import RemoteModelSpec, ScriptedModelSpec
from runtime_core.strict import StrictModel

ModelSetting = str | ScriptedModelSpec | RemoteModelSpec


class ToolDeclaration(StrictModel):
    """A Python tool named by import path, e.g. ``"mypkg.tools:lookup"``."""

    path: str
    name: str | None = None
    description: str | None = None
    effect: Literal["read", "write"] = "write"

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        module, sep, attr = value.partition(":")
        if not sep or not module or not attr:
            raise ValueError(
                f"tool path {value!r} must look like 'package.module:function'"
            )
        return value
