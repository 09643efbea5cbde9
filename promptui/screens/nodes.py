"""The cluster's nodes (``promptui serve --cluster``): each node's id, address, heartbeat age,
whether it is live, and the processes it owns with their lease epochs. Re-read every two
seconds and on every ownership change, so a node that died is seen going stale and its
processes moving. A runtime that is not a cluster node says so."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import DataTable, Footer, Static

from promptui.actions import NODE_ACTIONS, bindings
from promptui.format import clip
from promptui.screens.base import LiveScreen
from promptui.store import ActivityLine, FeedLine, UIStore
from promptui.widgets.keyed_table import Col, KeyedTable, fill_width
from runtime_core.control.plane import ControlError

REFRESH_SECONDS = 2.0
# Widths that keep every column on an 80-column terminal (the processes take what is left).
COLUMNS = (Col("node", "Node", 16), Col("state", "State", 8), Col("beat", "Beat", 6),
           Col("owned", "Owns", 5), Col("address", "Address", 22),
           Col("processes", "Processes", 10))
FIXED = 16 + 8 + 6 + 5 + 22
STATE_MEANING = {
    "stale": "stale: its leases run out and other nodes take its processes",
    "gone": "gone: silent past its grace; pruned after a while, or now with 'promptui nodes "
            "forget NODE'",
}


def _state(view: Any) -> str:
    """live, stopping, stale or gone (a server that says no state: from its flags)."""
    state = getattr(view, "state", None)
    if isinstance(state, str) and state:
        return state
    return "stopping" if view.stopping else "live" if view.live else "stale"


def node_row(view: Any) -> tuple[str, tuple[Any, ...]]:
    """A node as a table row: its key and its cells."""
    state = _state(view)
    style = {"live": "green", "stale": "bold red", "stopping": "yellow", "gone": "dim"}.get(
        state, "")
    name = Text(view.node_id + (" *" if view.this_node else ""),
                style="bold" if view.this_node else "")
    owned = dict(view.processes)
    listed = ", ".join(f"{p}@{e}" for p, e in sorted(owned.items()))
    cap = "" if view.max_processes is None else f"/{view.max_processes}"
    return view.node_id, (name, Text(state, style=style), f"{view.heartbeat_age_s:.1f}s",
                          f"{len(owned)}{cap}", clip(view.address, 40), clip(listed, 200))


class NodesScreen(LiveScreen):
    CSS_PATH = "nodes.tcss"
    ACTIONS = NODE_ACTIONS
    BINDINGS = bindings(NODE_ACTIONS)

    def __init__(self) -> None:
        super().__init__()
        self.views: list[Any] = []
        self.loaded = False  # the first read has arrived (tests wait on it)
        self.gone = ""
        self._feed_seen = 0
        self._next_refresh = 0.0

    def compose(self) -> ComposeResult:
        yield Static(Text("Nodes", style="bold"), id="nodes-title")
        yield KeyedTable(COLUMNS, id="nodes-table")
        yield Static("", id="nodes-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.table.focus()
        self.reload()

    @property
    def table(self) -> KeyedTable:
        return self.query_one(KeyedTable)

    def current_process(self) -> str | None:
        return None

    # -- loading -----------------------------------------------------------------------------
    def reload(self) -> None:
        self.run_worker(self._load(), group="nodes-load", exclusive=True)

    async def _load(self) -> None:
        self._next_refresh = time.monotonic() + REFRESH_SECONDS
        read = getattr(self.room.control, "cluster_nodes", None)
        if read is None:
            self.gone, self.views = "this runtime is not a cluster node (promptui serve " \
                                    "--cluster DSN starts one)", []
        else:
            try:
                self.gone, self.views = "", list(await read())
            except ControlError as exc:
                self.gone = str(exc)
            except Exception as exc:  # a remote that went away: say so, keep the room up
                self.gone = f"cannot read the nodes: {exc}"
        if self.is_attached:
            self._draw()
            self.loaded = True

    async def show(self, store: UIStore, now: float, feed: list[FeedLine],
                   activity: list[ActivityLine]) -> None:
        """The pump: re-read when ownership changed, else every few seconds (ages move)."""
        moved = any(line.kind == "cluster.ownership" for line in feed)
        if moved or time.monotonic() >= self._next_refresh:
            await self._load()

    # -- drawing -----------------------------------------------------------------------------
    def _draw(self) -> None:
        self.table.sync([node_row(v) for v in self.views], ordered=True)
        title = Text("Nodes", style="bold")
        if self.gone:
            title.append(f"  ⚠ {self.gone} — esc goes back", style="bold red")
        else:
            live = sum(1 for v in self.views if v.live and not v.stopping)
            owned = sum(len(v.processes) for v in self.views)
            title.append(f" · {live} live of {len(self.views)} · {owned} processes owned "
                         "· * this node", style="dim")
        self.query_one("#nodes-title", Static).update(title)
        self._draw_detail()

    def _draw_detail(self) -> None:
        key = self.table.cursor_key
        view = next((v for v in self.views if v.node_id == key), None)
        detail = Text()
        if view is not None:
            detail.append(f"{view.node_id}  {view.address}\n", style="bold")
            detail.append(f"heartbeat {view.heartbeat_age_s:.1f} s ago · ")
            detail.append(STATE_MEANING.get(_state(view), _state(view)))
            detail.append("\n" + (", ".join(f"{p} (lease epoch {e})" for p, e in
                                            sorted(dict(view.processes).items()))
                                  or "owns no process"))
        self.query_one("#nodes-detail", Static).update(detail)

    def on_resize(self) -> None:
        fill_width(self.table, "processes", FIXED)

    @on(DataTable.RowHighlighted, "#nodes-table")
    def _moved(self) -> None:
        self._draw_detail()

    def action_back(self) -> None:
        self.app.pop_screen()
