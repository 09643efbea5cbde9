"""Assembling what a process's runs need, once per start: the model, its tools (Python, the
optional features', open mode's and the MCP servers'), the profile stamp every run freezes, and
the run executor over all of it."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from runtime_core.agent.factory import build_model, build_tools_within
from runtime_core.agent.mcp.config import check_server
from runtime_core.agent.model import Model
from runtime_core.agent.tools import AgentTool
from runtime_core.config import ProcessConfig
from runtime_core.journal.entry import EntryType
from runtime_core.journal.faults import fencing_token
from runtime_core.lifecycle import ProcessState, ProcessTransition, config_field
from runtime_core.process.core import ProcessCore
from runtime_core.process.ports import ExtraTools
from runtime_core.runs.executor import RunExecutor
from runtime_core.runs.identity import ProfileStamp, config_digest
from runtime_core.runs.services import RunServices

if TYPE_CHECKING:
    from runtime_core.agent.mcp.tools import McpToolbox

log = logging.getLogger(__name__)

def profile_stamp(name: str, config: ProcessConfig, tools: Mapping[str, AgentTool]
                  ) -> ProfileStamp:
    digest = config_digest(config)
    profile = config.profile
    allowed = config.allowed_tools
    offered = {tool_name: tool.effect for tool_name, tool in sorted(tools.items())
               if allowed is None or tool_name in allowed}
    budget: dict[str, Any] = {k: v for k, v in config.run_budget.model_dump(mode="json").items()
                              if v is not None}
    if config.budget.enabled:
        budget.update({k: v for k, v in config.budget.model_dump(mode="json").items()
                       if k.endswith("_per_run") and v is not None})
    return ProfileStamp(
        profile=(profile.name if profile and profile.name else name),
        version=(profile.version if profile and profile.version else digest[:12]),
        policy={"allowed_tools": allowed, "tools": offered},
        config_digest=digest,
        budget=budget,
        evaluator=profile.completion.evaluator if profile else "final_reply",
    )


class Assembly:
    """Builds each start's run executor: ``model`` (else the config's), the Python ``tools``,
    the parts' tools, ``extra_tools`` (open mode's) and the MCP servers' (kept here)."""

    def __init__(self, core: ProcessCore, *, model: Model | None, tools: Iterable[Any],
                 extra_tools: ExtraTools) -> None:
        self.core = core
        self.model_override = model
        self.python_tools = list(tools)
        self.extra_tools = extra_tools
        for server_name, server in core.config.servers.items():
            check_server(server_name, server, core.base_dir)  # ValueError: unusable entry
        core.lifecycle.add_listener(self._on_transition)
        self.toolbox: McpToolbox | None = None
        if core.config.servers:  # the MCP machinery loads only for a process that names one
            from runtime_core.agent.mcp.tools import McpToolbox

            self.toolbox = McpToolbox(core.config.servers, base_dir=core.base_dir,
                                      process=core.name, emit=core.notifier.emit,
                                      redact=core.redact)

    async def build(self) -> RunExecutor:
        """Everything a run needs for this start. MCP servers are connected here, before any
        trigger can start a run; a failure closes them again and raises."""
        core = self.core
        for part in core.parts:
            with config_field(part.key):  # e.g. a missing secret's variable fails loudly here
                await part.start()  # secrets resolve, memory opens
        with config_field("model"):
            model = self.model_override or build_model(core.config.model,
                                                       base_dir=core.base_dir)
        tools: dict[str, AgentTool] = dict(await build_tools_within(core.config.tools,
                                                                    self.python_tools))
        for part in core.parts:
            tools.update(part.tools(set(tools)))
        for meta in self.extra_tools.meta_tools():
            if meta.name in tools:
                raise ValueError(f"tool {meta.name!r} clashes with an open-mode meta-tool; "
                                 "rename it")
            tools[meta.name] = meta
        if self.toolbox is not None:
            tools.update(await self.toolbox.connect(set(tools)))
        core.stamp = profile_stamp(core.name, core.config, tools)
        self._flag_config_changes(core.stamp)
        config = core.config
        executor = RunExecutor(RunServices(
            process=core.name, model=model, tools=tools, budget=config.run_budget,
            context=core.context, conversation=core.conversation,
            instructions=lambda: core.instructions, notifier=core.notifier,
            allowed_tools=config.allowed_tools, recorder=core.recorder, event_bus=core.bus,
            broker=core.broker, autonomy=core.autonomy, secrets=core.secrets,
            hooks=core.hooks.for_tools, hooked=core.hooks.listen_for,
            watch_tool_call=self._watch_tool_call,
            prompt_lines=[part.prompt_line for part in core.parts],
            memory_block=core.memory_block,
            completion=config.profile.completion if config.profile else None,
            fencing_token=fencing_token(core.journal)))
        if self.toolbox is not None:  # what the servers ask during a call: the operator, the model
            from runtime_core.runs.server_asks import RunAsks

            asks = RunAsks(executor.services, core.waiting, core.inflight.get)
            for link in self.toolbox.links.values():
                link.asks.handler = asks
        return executor

    def _on_transition(self, record: ProcessTransition) -> None:
        """A process that stops or fails leaves no server question waiting: each is answered
        cancel (a draining stop must not wait for an operator)."""
        if record.to_state in (ProcessState.STOPPING, ProcessState.FAILED):
            from runtime_core.runs.server_asks import CANCEL

            for question in self.core.waiting.questions():
                question.give(CANCEL, f"process {record.to_state.value}")

    async def _watch_tool_call(self, name: str, args: dict[str, Any]) -> None:
        for part in self.core.parts:  # read per call: health can be switched on live
            await part.tool_call(name, args)

    def _flag_config_changes(self, stamp: ProfileStamp) -> None:
        """A run resumed under another configuration than it started with is marked, so the
        operator sees it; it is never continued silently."""
        core = self.core
        runs = [*(r.run for r in core.resume.values()), *core.waiting.runs()]
        for run in runs:
            started = run.identity.config_digest if run.identity else ""
            if started and started != stamp.config_digest and not run.config_changed:
                run.config_changed = f"{started} -> {stamp.config_digest}"
                log.warning("process %s: run %s started under configuration %s and resumes "
                            "under %s", core.name, run.run_id, started, stamp.config_digest)
                if core.recorder is not None:
                    core.recorder.submit(EntryType.CONFIG_CHANGED, {
                        "started_under": started, "resumed_under": stamp.config_digest},
                        run_id=run.run_id)

    async def close_servers(self) -> None:
        """Close the MCP connections (stdio servers exit); the next start reconnects."""
        if self.toolbox is not None:
            await self.toolbox.close()

    def describe_servers(self) -> list[dict[str, Any]] | None:
        return self.toolbox.describe() if self.toolbox is not None else None

    def release(self) -> None:
        if self.toolbox is not None:
            self.toolbox.release()
