"""The Governance and Config tabs: a process's governance state and its MCP servers and
configuration, as renderables for a Static."""

from __future__ import annotations

from typing import Any

import yaml
from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from promptui.format import compact

GOVERNANCE_LABELS = {"budget": "budget left", "health_anomalies": "anomalies",
                     "active_secrets": "secrets in use", "memory": "long-term memory"}


def governance_view(governance: dict[str, Any]) -> RenderableType:
    if not governance:
        return Text("governance is off for this process (no health, budget, mission, secrets "
                    "or inbox in its manifest)", style="dim")
    table = Table(box=None, show_header=False, expand=True, padding=(0, 1))
    table.add_column("what", style="bold", no_wrap=True, width=16)
    table.add_column("value", overflow="fold")
    for key, value in governance.items():
        if isinstance(value, dict):
            # budget holds what is left of each limit; None there means no such limit
            none = "no limit" if key == "budget" else "-"
            body = Text("\n".join(
                f"{k}: {none if v is None else v if isinstance(v, str) else compact(v)}"
                for k, v in value.items()) or "-")
        else:
            body = Text(str(value))
        table.add_row(GOVERNANCE_LABELS.get(key, key.replace("_", " ")), body)
    return table


def link_state(server: dict[str, Any]) -> Text:
    """``connected``, ``reconnecting (attempt N, next in S s)`` or ``down: reason``; an older
    runtime only says whether it is connected."""
    link = server.get("link") or ("connected" if server.get("connected") else "not connected")
    if link.startswith("down"):  # the reason can be long: it goes beside, in the tools column
        return Text("down", style="red")
    return Text(link, style="green" if link == "connected" else "yellow")


def config_view(data: dict[str, Any]) -> RenderableType:
    """The MCP servers (live state, tools and their effects), then the configuration."""
    config = data.get("config") or {}
    text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True) if config else "{}\n"
    syntax = Syntax(text, "yaml", theme="ansi_dark", background_color="default", word_wrap=True)
    servers = data.get("servers") or []
    if not servers:
        return syntax
    table = Table(box=None, show_header=False, expand=True, padding=(0, 1))
    table.add_column("server", style="bold", no_wrap=True)
    table.add_column("tools", overflow="fold")
    for server in servers:
        head = Text.assemble(f"{server['server']} ", (f"({server['type']}) ", "dim"),
                             link_state(server))
        tools = Text()
        if str(server.get("link", "")).startswith("down"):
            tools.append(str(server["link"]), style="red")
        elif server.get("link_error"):  # why the last attempt failed, while it reconnects
            tools.append(f"last error: {server['link_error']}", style="yellow")
        for tool in server.get("tools", []):  # one per line: name, then its effect
            idempotent = ", idempotent" if tool.get("idempotent") else ""
            style = "cyan" if tool["effect"] == "read" else "magenta"
            tools.append("\n" if tools else "")
            tools.append(f"{tool['name']} ")
            tools.append(f"{tool['effect']}{idempotent}", style=style)
        for tool in server.get("skipped", []):  # listed by the server, not offered
            tools.append("\n" if tools else "")
            tools.append(f"{tool['name']} skipped: {tool['reason']}", style="dim")
        if "resources" in server:
            tools.append("\n" if tools else "")
            count = server.get("resource_count", len(server["resources"]))
            tools.append(f"{count} resource(s), "
                         f"{len(server.get('resource_templates', []))} template(s)", style="dim")
        table.add_row(head, tools or Text("no tools listed yet", style="dim"))
    return Group(Text("MCP servers", style="bold underline"), table, Text(""), syntax)
