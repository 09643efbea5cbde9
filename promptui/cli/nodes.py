"""``promptui nodes`` and ``promptui nodes forget NODE``: the nodes of the scale-out cluster a
served node (``promptui serve --cluster``) belongs to, asked of that node's API."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from promptui.cli.options import (
    TIME_OPTION,
    TOKEN_OPTION,
    URL_OPTION,
    WIDE_OPTION,
    json_option,
    need_server,
    on_server,
    out,
    print_table,
    stamp,
)
from promptui.cli.plain_help import Typer

if TYPE_CHECKING:
    from runtime_core.control.remote import RemoteControl

STYLE = {"live": "green", "stopping": "yellow", "stale": "bold red", "gone": "dim"}
#: what each state means for an operator, under the table when a node is in it
MEANING = {
    "stale": "stale: silent past the lease TTL; its processes move to live nodes (it may be "
             "paused and come back)",
    "gone": "gone: silent past the TTL and its grace; removed by itself after a while, or now "
            "with 'promptui nodes forget NODE'",
}

nodes_app = Typer(help="The cluster's nodes (against a node of 'promptui serve --cluster'): "
                       "each one's state, its last beat and the processes it runs.")


@nodes_app.callback(invoke_without_command=True)
def nodes(
    ctx: typer.Context,
    as_json: bool = json_option("Print a JSON list."),
    time_format: str = TIME_OPTION,
    wide: bool = WIDE_OPTION,
    url: str | None = URL_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """List the cluster's nodes, their state and last beat.

    Each node is live, stopping, stale (silent past the lease TTL) or gone (silent past the
    TTL and its grace: 'promptui serve --cluster --node-grace'); gone nodes are removed by
    themselves after '--node-prune-after' (an hour by default), or now with 'promptui nodes
    forget NODE'."""
    if ctx.invoked_subcommand is not None:
        return
    target = need_server(url, token)

    async def read(control: RemoteControl) -> list[Any]:
        return await control.cluster_nodes()

    views = on_server(target, read)
    now = time.time()
    if as_json:
        print(json.dumps([asdict(view) for view in views], indent=2))
        return
    table = Table(title=f"cluster nodes @ {escape(target.url)}", box=box.SIMPLE_HEAD,
                  expand=True, show_edge=False, padding=(0, 1, 0, 0))
    for heading in ("node", "state", "last beat", "owns", "address"):
        table.add_column(heading, no_wrap=True)
    table.add_column("processes", overflow="ellipsis", ratio=1)
    for view in views:
        owned = dict(view.processes)
        cap = "" if view.max_processes is None else f"/{view.max_processes}"
        table.add_row(escape(view.node_id) + (" *" if view.this_node else ""),
                      f"[{STYLE.get(view.state, '')}]{escape(view.state)}[/]",
                      stamp(now - view.heartbeat_age_s, time_format, now), f"{len(owned)}{cap}",
                      escape(view.address),
                      escape(", ".join(f"{p}@{e}" for p, e in sorted(owned.items()))))
    print_table(table, wide=wide)
    shown = {view.state for view in views}
    for state, meaning in MEANING.items():
        if state in shown:
            out.print(f"[dim]{escape(meaning)}[/dim]")
    out.print("[dim]* the node that answered[/dim]")


@nodes_app.command("forget")
def forget(
    node: str = typer.Argument(..., metavar="NODE", help="The node's id, as 'promptui nodes' "
                               "lists it."),
    url: str | None = URL_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """Remove a node that is not live (dead: stale or gone) from the nodes list now.

    Any lease it still holds ends, so the live nodes take its processes over. A live node is
    refused: stop it instead (SIGTERM), and it leaves by itself. A forgotten node that was only
    paused joins again at its next beat."""
    target = need_server(url, token)

    async def go(control: RemoteControl) -> list[str]:
        return await control.forget_node(node)

    released = on_server(target, go)
    ended = f"; its leases of {', '.join(released)} ended" if released else ""
    out.print(f"node {escape(node)} forgotten{escape(ended)}")
