"""MCP tools beside the Python ones: same run loop, same journal, same budgets.

A tool's effect comes from its annotations: ``readOnlyHint`` makes it a read; anything else
(``destructiveHint``, or no hint at all) is a write, which is journaled before it runs and must be
reconciled if a crash leaves its outcome unknown. ``idempotentHint`` is recorded with the intent.

A tool whose input schema declares an ``idempotency_key`` string gets ``run_id:step`` there (the
model neither sees nor sets it); every call also carries it in ``_meta``, so a server can make a
repeated write harmless.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime_core.agent.mcp_config import HttpServerConfig, StdioServerConfig
from runtime_core.agent.mcp_link import McpServerError, McpServerLink, RemoteTool
from runtime_core.agent.model import ToolSpec
from runtime_core.agent.tools import Effect, ToolContext
from runtime_core.lifecycle import name_field

IDEMPOTENCY_ARG = "idempotency_key"
IDEMPOTENCY_META = "io.promptui/idempotency-key"


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
        result = await self.link.call(self.remote_name, call_args,
                                      {IDEMPOTENCY_META: ctx.idempotency_key})
        text = result_text(result)
        if result.is_error:
            raise McpToolFailed(text or "the server reported an error without a message")
        return text


def result_text(result: Any) -> str:
    """The result as the model reads it: the text blocks, else the structured content."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {getattr(block, 'mime_type', '?')}]")
        elif kind == "resource_link":
            parts.append(f"[resource: {getattr(block, 'uri', '')}]")
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource: {resource.uri}]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return "\n".join(parts)


class McpToolbox:
    """A process's MCP servers: connected together at start, closed together at stop."""

    def __init__(self, servers: Mapping[str, StdioServerConfig | HttpServerConfig], *,
                 base_dir: Path | None = None) -> None:
        self.links = {name: McpServerLink(name, config, base_dir=base_dir)
                      for name, config in servers.items()}
        self._tools: dict[str, McpTool] = {}

    @property
    def tools(self) -> dict[str, McpTool]:
        return dict(self._tools)

    async def connect(self, taken: set[str]) -> dict[str, McpTool]:
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
        tools: dict[str, McpTool] = {}
        owner = dict.fromkeys(taken, "a Python tool")
        for link, listed in zip(links, results, strict=True):
            assert isinstance(listed, list)
            for remote in listed:
                made = McpTool.from_remote(remote, link, link.config.tool_prefix)
                if made.name in owner:
                    await self.close()
                    clash = McpServerError(
                        f"tool name {made.name!r} of MCP server {link.name!r} is already used "
                        f"by {owner[made.name]}; give the server a tool_prefix")
                    name_field(clash, f"servers.{link.name}.tool_prefix")
                    raise clash
                owner[made.name] = f"MCP server {link.name!r}"
                tools[made.name] = made
        self._tools = tools
        return dict(tools)

    async def close(self) -> None:
        await asyncio.gather(*(link.close() for link in self.links.values()))

    def release(self) -> None:
        for link in self.links.values():
            link.release()

    def describe(self) -> list[dict[str, Any]]:
        """Each server with its state and tools (for status and ``promptui validate``)."""
        rows: list[dict[str, Any]] = []
        for name, link in self.links.items():
            rows.append({
                "server": name, "type": link.config.type, "connected": link.connected,
                "connections": link.connections,
                "tools": [{"name": t.name, "effect": t.effect, "idempotent": t.idempotent}
                          for t in self._tools.values() if t.server == name],
            })
        return rows


async def probe_servers(servers: Mapping[str, StdioServerConfig | HttpServerConfig], *,
                        base_dir: Path | None = None) -> list[dict[str, Any]]:
    """Connect each server on its own, list its tools, and close it again: what a check
    before deploying wants to know. A failure is reported in its row, not raised."""
    rows: list[dict[str, Any]] = []
    for name, config in servers.items():
        toolbox = McpToolbox({name: config}, base_dir=base_dir)
        try:
            await toolbox.connect(set())
            rows.extend(toolbox.describe())
        except McpServerError as exc:
            rows.append({"server": name, "type": config.type, "connected": False,
                         "error": str(exc), "tools": []})
        finally:
            await toolbox.close()
            toolbox.release()
    return rows


__all__ = ["McpServerError", "McpTool", "McpToolFailed", "McpToolbox", "effect_of",
           "probe_servers"]
