"""Build the model and the tools a process's settings name."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from runtime_core.agent.config import ModelSetting, ToolDeclaration
from runtime_core.agent.model import Model
from runtime_core.agent.script import RemoteModelSpec, ScriptedModelSpec
from runtime_core.agent.scripted import EchoModel, ScriptedModel
from runtime_core.agent.tools import Tool, ToolError, load_tool, tool
from runtime_core.lifecycle import config_field


def build_model(setting: ModelSetting | Model, *, base_dir: Path | None = None) -> Model:
    if not isinstance(setting, str | ScriptedModelSpec | RemoteModelSpec):
        return setting  # ProcessConfig(model=obj): used as AgentProcess(model=obj) uses it
    if isinstance(setting, ScriptedModelSpec):
        return ScriptedModel(setting)
    if isinstance(setting, RemoteModelSpec) and setting.provider == "anthropic":
        from runtime_core.agent.anthropic import AnthropicModel
        from runtime_core.agent.anthropic import settings_from_spec as anthropic_spec

        return AnthropicModel(anthropic_spec(setting))
    if isinstance(setting, RemoteModelSpec):
        from runtime_core.agent.openai_compat import OpenAICompatibleModel, settings_from_spec

        return OpenAICompatibleModel(settings_from_spec(setting))
    if setting == "echo":
        return EchoModel()
    provider, _, rest = setting.partition(":")
    if provider == "scripted":
        path = Path(rest.strip()).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        return ScriptedModel.from_file(path)
    if provider in ("openai", "ollama"):
        from runtime_core.agent.openai_compat import OpenAICompatibleModel, settings_for

        return OpenAICompatibleModel(settings_for(setting))
    if provider == "anthropic":
        from runtime_core.agent.anthropic import AnthropicModel
        from runtime_core.agent.anthropic import settings_for as anthropic_settings

        return AnthropicModel(anthropic_settings(setting))
    raise ValueError(f"unknown model {setting!r}")  # the config validator already refuses these


def build_tools(declared_tools: Iterable[str | ToolDeclaration], extra: Iterable[object] = ()
                ) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}

    def add(item: Tool) -> None:
        if item.name in tools:
            raise ToolError(f"two tools are named {item.name!r}; give one of them name=")
        tools[item.name] = item

    for index, declared in enumerate(declared_tools):
        assert isinstance(declared, ToolDeclaration)
        with config_field(f"tools[{index}]"):
            add(
                load_tool(
                    declared.path,
                    name=declared.name,
                    description=declared.description,
                    effect=declared.effect,
                )
            )
    for obj in extra:
        add(obj if isinstance(obj, Tool) else tool(obj))  # type: ignore[arg-type]
    return tools
