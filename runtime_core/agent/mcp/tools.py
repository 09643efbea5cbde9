"""MCP tools beside the Python ones: same run loop, same journal, same budgets.

A tool's effect comes from its annotations: ``readOnlyHint`` makes it a read; anything else
(``destructiveHint``, or no hint at all) is a write, which is journaled before it runs and must be
reconciled if a crash leaves its outcome unknown. ``idempotentHint`` is recorded with the intent.

A tool whose input schema declares an ``idempotency_key`` string gets ``run_id:step`` there (the
model neither sees nor sets it); every call also carries it in ``_meta``, so a server can make a
repeated write harmless.

Beside its tools a server may offer resources (one read tool, resources.py), send log
messages and progress (notices.py, ``ToolContext.progress``) and return images or other
binary content (content.py). A tool that can only run as an MCP task is not offered: this
client does not speak tasks, and such a call always fails.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime_core.agent.mcp.config import HttpServerConfig, StdioServerConfig
from runtime_core.agent.mcp.content import content_output, result_text
from runtime_core.agent.mcp.link import McpServerError, McpServerLink, RemoteTool
from runtime_core.agent.mcp.notices import ServerHooks
from runtime_core.agent.mcp.resources import (
    McpResourceTool,
    describe_resources,
    resource_tool_names,
)
from runtime_core.agent.model import ToolSpec
from runtime_core.agent.tools import AgentTool, Effect, ToolContext
from runtime_core.events import RuntimeEvent
from runtime_core.lifecycle import name_field

log = logging.getLogger(__name__)

IDEMPOTENCY_ARG = "idempotency_key"
IDEMPOTENCY_META = "io.promptui/idempotency-key"
NEEDS_TASKS = "needs tasks"
STATUS_RESOURCES = 20  # resources per server in a status (read many times a second)


class McpToolFailed(RuntimeError):
    """The server ran the tool and reported an error (the model sees it and carries on)."""


def effect_of(remote: RemoteTool) -> Effect:
    return "read" if remote.read_only is True else "write"


@dataclass(slots=True)
class McpTool:
    name: str
    description: str
    effect: Effect
    server: str
    remote_name: str
    idempotent: bool | None
    schema: dict[str, Any]
    link: McpServerLink
    takes_idempotency_key: bool = False
    _required: tuple[str, ...] = field(default=())
    read_tool: str | None = None  # the server's resource tool, named in resource links

    @classmethod
    def from_remote(cls, remote: RemoteTool, link: McpServerLink, prefix: str) -> McpTool:
        schema = json.loads(json.dumps(remote.input_schema))  # a private copy
        schema.pop("title", None)
        schema.setdefault("type", "object")
        properties = schema.get("properties")
        takes_key = isinstance(properties, dict) and IDEMPOTENCY_ARG in properties
        if takes_key:
            assert isinstance(properties, dict)
            properties.pop(IDEMPOTENCY_ARG)
            if isinstance(schema.get("required"), list):
                schema["required"] = [r for r in schema["required"] if r != IDEMPOTENCY_ARG]
        required = schema.get("required")
        return cls(
            name=f"{prefix}{remote.name}",
            description=remote.description.split("\n\n")[0],
            effect=effect_of(remote),
            server=link.name,
            remote_name=remote.name,
            idempotent=remote.idempotent,
            schema=schema,
            link=link,
            takes_idempotency_key=takes_key,
            _required=tuple(str(r) for r in required) if isinstance(required, list) else (),
        )

    @property
    def journal_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"mcp_server": self.server}
        if self.remote_name != self.name:
            info["mcp_tool"] = self.remote_name
        if self.idempotent is not None:
            info["idempotent"] = self.idempotent
        return info

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.schema)

    def validate_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """Refuse what is plainly wrong before anything is journaled; the server checks the
        rest and answers with an error the model can read."""
        if not isinstance(args, Mapping):
            raise ValueError(f"invalid arguments for tool {self.name!r}: expected an object")
        missing = [name for name in self._required if name not in args]
        if missing:
            raise ValueError(f"invalid arguments for tool {self.name!r}: missing required "
                             f"{', '.join(missing)}")
        if IDEMPOTENCY_ARG in args and self.takes_idempotency_key:
            raise ValueError(f"invalid arguments for tool {self.name!r}: {IDEMPOTENCY_ARG} is "
                             "set by the runtime")
        return dict(args)

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        call_args = dict(args)
        if self.takes_idempotency_key:
            call_args[IDEMPOTENCY_ARG] = ctx.idempotency_key

        async def on_progress(progress: float, total: float | None, message: str | None
                              ) -> None:
            ctx.progress(progress, total, message)

        # A read may be sent again on a new connection; a write only if it was never sent.
        result = await self.link.call(self.remote_name, call_args,
                                      {IDEMPOTENCY_META: ctx.idempotency_key}, on_progress,
                                      read=self.effect == "read")
        out = content_output(list(result.content), read_tool=self.read_tool,
                             structured=result.structured_content)
        if result.is_error:
            raise McpToolFailed(out.text or "the server reported an error without a message")
        for attachment in out.attachments:
            ctx.attach(attachment)
        return out.text


class McpToolbox:
    """A process's MCP servers: connected together at start, closed together at stop.

    ``emit`` takes the servers' log messages as runtime events (rate-limited per server);
    ``redact`` hides secrets in them before they are logged."""

    def __init__(self, servers: Mapping[str, StdioServerConfig | HttpServerConfig], *,
                 base_dir: Path | None = None, process: str = "",
                 emit: Callable[[RuntimeEvent], None] | None = None,
                 redact: Callable[[str], str] | None = None) -> None:
        self.links = {name: McpServerLink(name, config, base_dir=base_dir)
                      for name, config in servers.items()}
        self.hooks: dict[str, ServerHooks] = {}
        for name, link in self.links.items():
            link.hooks = self.hooks[name] = ServerHooks(name, process=process, emit=emit,
                                                        redact=redact)
        self._tools: dict[str, AgentTool] = {}
        self.skipped: dict[str, list[dict[str, str]]] = {}  # server -> tools not offered

    @property
    def tools(self) -> dict[str, AgentTool]:
        return dict(self._tools)

    async def connect(self, taken: set[str]) -> dict[str, AgentTool]:
        """Connect every server at once; the first failure closes them all and is raised.
        ``taken`` holds the names already in use (the Python tools)."""
        links = list(self.links.values())
        results = await asyncio.gather(*(link.connect() for link in links),
                                       return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for link, result in zip(links, results, strict=True):
            if isinstance(result, Exception):
                name_field(result, f"servers.{link.name}")
        if errors:
            await self.close()
            for error in errors:
                if not isinstance(error, Exception):
                    raise error
            raise errors[0]
        tools: dict[str, AgentTool] = {}
        owner = dict.fromkeys(taken, "a Python tool")
        for link, listed in zip(links, results, strict=True):
            assert isinstance(listed, list)
            made = [McpTool.from_remote(remote, link, link.config.tool_prefix)
                    for remote in self._offered(link, listed)]
            for tool in made:
                if tool.name in owner:
                    await self.close()
                    clash = McpServerError(
                        f"tool name {tool.name!r} of MCP server {link.name!r} is already used "
                        f"by {owner[tool.name]}; give the server a tool_prefix")
                    name_field(clash, f"servers.{link.name}.tool_prefix")
                    raise clash
                owner[tool.name] = f"MCP server {link.name!r}"
                tools[tool.name] = tool
            reader = self._resource_tool(link, owner)
            if reader is not None:
                owner[reader.name] = f"MCP server {link.name!r}"
                tools[reader.name] = reader
                for tool in made:
                    tool.read_tool = reader.name
        self._tools = tools
        return dict(tools)

    def _offered(self, link: McpServerLink, listed: list[RemoteTool]) -> list[RemoteTool]:
        """The tools the model may call: not those that run only as an MCP task (this
        client does not speak tasks; the call would always fail)."""
        skipped = [r.name for r in listed if r.task_support == "required"]
        self.skipped[link.name] = [{"name": f"{link.config.tool_prefix}{name}",
                                    "reason": NEEDS_TASKS} for name in skipped]
        if skipped:
            log.info("MCP server %s: not offering %s: %s (this client does not support MCP "
                     "tasks)", link.name, "tool" if len(skipped) == 1 else "tools",
                     ", ".join(skipped))
        return [r for r in listed if r.task_support != "required"]

    def _resource_tool(self, link: McpServerLink, owner: Mapping[str, str]
                       ) -> McpResourceTool | None:
        """The server's read tool, when it has resources; a name taken falls back to
        ``<server>_read_resource``, and is left out (logged) if that is taken too."""
        hooks = self.hooks[link.name]
        if not hooks.has_resources:
            return None
        for name in resource_tool_names(link.config.tool_prefix, link.name):
            if name not in owner:
                return McpResourceTool.for_link(name, link, hooks)
        log.warning("MCP server %s: its resources are not offered: the tool names %s are "
                    "taken; give the server a tool_prefix", link.name,
                    " and ".join(resource_tool_names(link.config.tool_prefix, link.name)))
        return None

    async def close(self) -> None:
        await asyncio.gather(*(link.close() for link in self.links.values()))
        for hooks in self.hooks.values():
            hooks.close()

    def release(self) -> None:
        for link in self.links.values():
            link.release()

    def describe(self, resources: int | None = STATUS_RESOURCES) -> list[dict[str, Any]]:
        """Each server with its state, tools, the tools it is not offered and its resources
        (the first ``resources`` of them; all with None), for status and ``validate``."""
        rows: list[dict[str, Any]] = []
        for name, link in self.links.items():
            row: dict[str, Any] = {
                "server": name, "type": link.config.type, "connected": link.connected,
                "connections": link.connections, **link.status.row(),
                "tools": [_tool_row(t) for t in self._tools.values()
                          if getattr(t, "server", None) == name],
            }
            if self.skipped.get(name):
                row["skipped"] = list(self.skipped[name])
            if self.hooks[name].has_resources:
                row.update(describe_resources(self.hooks[name], resources))
            rows.append(row)
        return rows


def _tool_row(tool: AgentTool) -> dict[str, Any]:
    return {"name": tool.name, "effect": tool.effect,
            "idempotent": getattr(tool, "idempotent", None)}


async def probe_servers(servers: Mapping[str, StdioServerConfig | HttpServerConfig], *,
                        base_dir: Path | None = None) -> list[dict[str, Any]]:
    """Connect each server on its own, list its tools and resources, and close it again: what
    a check before deploying wants to know. A failure is reported in its row, not raised."""
    rows: list[dict[str, Any]] = []
    for name, config in servers.items():
        toolbox = McpToolbox({name: config}, base_dir=base_dir)
        try:
            await toolbox.connect(set())
            rows.extend(toolbox.describe(resources=None))
        except McpServerError as exc:
            rows.append({"server": name, "type": config.type, "connected": False,
                         "error": str(exc), "tools": []})
        finally:
            await toolbox.close()
            toolbox.release()
    return rows


__all__ = ["NEEDS_TASKS", "McpServerError", "McpTool", "McpToolFailed", "McpToolbox",
           "effect_of", "probe_servers", "result_text"]
