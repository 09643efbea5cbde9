"""A server's resources as one read tool: ``<prefix>read_resource`` with the resource's URI.

Offered when the server declares the resources capability. It is a read (``resources/read``
changes nothing), so after a crash an unfinished read is simply interrupted. Its description
names the resources and templates the server listed, so the model knows what to ask for; a
resource link in a tool result names this tool too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runtime_core.agent.mcp.content import resource_output
from runtime_core.agent.model import ToolSpec
from runtime_core.agent.tools import Effect, ToolContext

if TYPE_CHECKING:
    from runtime_core.agent.mcp.link import McpServerLink
    from runtime_core.agent.mcp.notices import SessionHooks

READ_RESOURCE = "read_resource"
LISTED_IN_DESCRIPTION = 10  # resources named in the tool's description; the rest are counted


class McpResourceFailed(RuntimeError):
    """The server could not read the resource (the model sees why and carries on)."""


def resource_tool_names(prefix: str, server: str) -> tuple[str, str]:
    """The read tool's name as the server's other tools are named, and the fallback used when
    that is taken (two servers without a prefix, or a tool of that name)."""
    return f"{prefix}{READ_RESOURCE}", f"{server}_{READ_RESOURCE}"


def _description(server: str, hooks: SessionHooks) -> str:
    shown = []
    for resource in hooks.resources[:LISTED_IN_DESCRIPTION]:
        about = ", ".join(str(x) for x in (getattr(resource, "name", None),
                                           getattr(resource, "mime_type", None)) if x)
        shown.append(f"{resource.uri}" + (f" ({about})" if about else ""))
    more = len(hooks.resources) - len(shown)
    if more > 0:
        shown.append(f"and {more} more")
    text = f"Read a resource of the MCP server {server} by its URI."
    if shown:
        text += " Resources: " + "; ".join(shown) + "."
    templates = [str(getattr(t, "uri_template", "")) for t in hooks.templates[:5]]
    if templates:
        text += " URI templates: " + "; ".join(templates) + "."
    return text


@dataclass(slots=True)
class McpResourceTool:
    name: str
    description: str
    server: str
    link: McpServerLink
    effect: Effect = "read"

    @classmethod
    def for_link(cls, name: str, link: McpServerLink, hooks: SessionHooks) -> McpResourceTool:
        return cls(name=name, description=_description(link.name, hooks), server=link.name,
                   link=link)

    @property
    def journal_info(self) -> dict[str, Any]:
        return {"mcp_server": self.server, "mcp_method": "resources/read"}

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, {
            "type": "object",
            "properties": {"uri": {"type": "string",
                                   "description": "The resource's URI, as listed or linked"}},
            "required": ["uri"]})

    def validate_args(self, args: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(args, Mapping):
            raise ValueError(f"invalid arguments for tool {self.name!r}: expected an object")
        uri = args.get("uri")
        if not isinstance(uri, str) or not uri.strip():
            raise ValueError(f"invalid arguments for tool {self.name!r}: uri (a string) is "
                             "required")
        extra = sorted(set(args) - {"uri"})
        if extra:
            raise ValueError(f"invalid arguments for tool {self.name!r}: unexpected "
                             f"{', '.join(extra)}")
        return {"uri": uri.strip()}

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        from mcp import MCPError

        try:
            result = await self.link.read_resource(args["uri"])
        except MCPError as exc:  # e.g. an unknown URI: the model reads why
            raise McpResourceFailed(f"cannot read {args['uri']}: {exc.message}") from None
        out = resource_output(result)
        for attachment in out.attachments:
            ctx.attach(attachment)
        return out.text


def describe_resources(hooks: SessionHooks, limit: int | None = None) -> dict[str, Any]:
    """The resources part of a server's row (status, ``validate --connect``): the first
    ``limit`` of them (all with None) and how many there are."""
    row: dict[str, Any] = {
        "resources": [{"uri": str(r.uri), "name": str(getattr(r, "name", "") or ""),
                       "mime_type": str(getattr(r, "mime_type", "") or "")}
                      for r in hooks.resources[:limit]],
        "resource_count": len(hooks.resources),
        "resource_templates": [str(getattr(t, "uri_template", "")) for t in hooks.templates]}
    if hooks.listing_error:
        row["resources_error"] = hooks.listing_error
    return row


__all__ = ["READ_RESOURCE", "McpResourceFailed", "McpResourceTool", "describe_resources",
           "resource_tool_names"]
