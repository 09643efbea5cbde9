"""Build the model and the tools a process's settings name. A start imports the Python tools
in a daemon thread under the deadline ``promptui validate`` gives its child (IMPORT_TIMEOUT): a
module that hangs at import fails the start with one line instead of holding it forever."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from runtime_core.agent.config import ModelSetting, ToolDeclaration
from runtime_core.agent.model import Model
from runtime_core.agent.script import RemoteModelSpec, ScriptedModelSpec
from runtime_core.agent.scripted import EchoModel, ScriptedModel
from runtime_core.agent.tool_probe import IMPORT_TIMEOUT
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


def build_tools(declared_tools: Iterable[str | ToolDeclaration], extra: Iterable[object] = (),
                *, taken: Iterable[str] = ()) -> dict[str, Tool]:
    """Import each declared ``module:function`` (here, in this thread) and wrap ``extra``; a
    name given twice (or one of ``taken``) is refused."""
    tools: dict[str, Tool] = {}
    names = set(taken)

    def add(item: Tool) -> None:
        if item.name in tools or item.name in names:
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


class _ToolImport:
    """Loads declared tools one by one in a daemon thread (one that hangs cannot be killed, but
    must not keep the program from exiting), remembering which one it is on."""

    def __init__(self, declared: Sequence[str | ToolDeclaration]) -> None:
        self.declared = declared
        self.loaded: list[Tool] = []
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.on_done: list[asyncio.Future[None]] = []

    def run(self) -> None:
        try:
            for item in self.declared:
                assert isinstance(item, ToolDeclaration)  # the config's validator makes them so
                self.loaded.append(load_tool(item.path, name=item.name,
                                             description=item.description, effect=item.effect))
        except BaseException as exc:  # the caller raises it, in its own thread
            self.error = exc
        finally:
            self.done.set()
            for future in self.on_done:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    future.get_loop().call_soon_threadsafe(_settle, future)

    def hang_error(self, timeout: float) -> ToolError:
        """What the start says of the tool whose import did not finish in time."""
        item = self.declared[len(self.loaded)]
        path = item.path if isinstance(item, ToolDeclaration) else item
        module = path.partition(":")[0]
        where = getattr(sys.modules.get(module), "__file__", None)  # it is half-imported
        shown = f" ({where})" if where else ""
        return ToolError(
            f"tool {path!r}: importing module {module!r}{shown} did not finish within "
            f"{timeout:g} s; it waits for something at import: move that work into the tool "
            "function, check it with 'promptui validate', then start again")


def _imported(item: str | ToolDeclaration) -> bool:
    """Whether ``item``'s module is imported already, whole (not half-way in another thread:
    importing it again would wait for that thread)."""
    path = item.path if isinstance(item, ToolDeclaration) else item
    module = sys.modules.get(path.partition(":")[0])
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def build_tools_within(declared_tools: Sequence[str | ToolDeclaration],
                             extra: Iterable[object] = (), *,
                             import_timeout: float | None = None) -> dict[str, Tool]:
    """:func:`build_tools` as a start does it: the declared modules are imported in a daemon
    thread while the event loop goes on; an import that takes longer than ``import_timeout``
    seconds (default IMPORT_TIMEOUT, validate's) raises a ToolError naming the tool, its file
    and the fix, noted with its field (``tools[i]``). The thread is left behind, asleep."""
    if not declared_tools:  # most processes: no thread to start
        return build_tools((), extra)
    limit = IMPORT_TIMEOUT if import_timeout is None else import_timeout
    job = _ToolImport(declared_tools)
    if all(_imported(item) for item in declared_tools):
        job.run()  # a restart in this interpreter: nothing to wait for, no thread to start
    else:
        finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        job.on_done.append(finished)
        threading.Thread(target=job.run, name="promptui-tool-import", daemon=True).start()
        if not job.done.is_set():
            await asyncio.wait((finished,), timeout=limit)
    if not job.done.is_set():
        with config_field(f"tools[{len(job.loaded)}]"):
            raise job.hang_error(limit)
    if job.error is not None:
        with config_field(f"tools[{len(job.loaded)}]"):
            raise job.error
    tools: dict[str, Tool] = {}
    for index, loaded in enumerate(job.loaded):
        with config_field(f"tools[{index}]"):
            tools.update(build_tools((), [loaded], taken=tools))
    tools.update(build_tools((), extra, taken=tools))
    return tools
