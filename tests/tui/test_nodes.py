"""The nodes screen (N on the dashboard): the cluster's nodes with their state, heartbeat age,
address and the processes each owns with lease epochs; snapshots at 80x24 and 120x40, and a
runtime that is not a cluster node says so."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from textual.pilot import Pilot

from promptui.app import ControlRoom
from promptui.screens.nodes import NodesScreen
from promptui.themes import load_themes
from runtime_core import AgentRuntime, ProcessConfig
from runtime_core.control import LocalControl
from tests.helpers.polling import until
from tests.helpers.scenes import NO_USER_THEMES, NOW, SceneControl
from tests.helpers.snapshots import SIZES, pumped

pytestmark = pytest.mark.usefixtures("utc")  # the scene's times read the same everywhere


@dataclass(frozen=True)
class Node:
    node_id: str
    address: str
    heartbeat_age_s: float
    live: bool
    stopping: bool = False
    max_processes: int | None = None
    processes: dict[str, int] = field(default_factory=dict)
    this_node: bool = False


NODES = [
    Node("ops-1", "http://10.0.0.11:8765", 0.4, True, processes={"invoice-watcher": 3,
                                                                 "triage": 1}, this_node=True),
    Node("ops-2", "http://10.0.0.12:8765", 1.2, True, max_processes=4,
         processes={"digest": 2, "deployer": 5}),
    Node("ops-3", "http://10.0.0.13:8765", 14.8, False, processes={}),
]


class ClusterScene(SceneControl):
    async def cluster_nodes(self) -> list[Node]:
        return list(NODES)


def cluster_app() -> ControlRoom:
    themes, _ = load_themes(NO_USER_THEMES)
    return ControlRoom(ClusterScene(), themes=themes, theme="promptui-dark",
                       clock=lambda: NOW, monotonic=lambda: 0.0, autopump=False,
                       start_runtime=False)


async def open_nodes(pilot: Pilot[Any]) -> None:
    await pilot.press("N")
    await until(pilot, lambda: isinstance(pilot.app.screen, NodesScreen)
                and pilot.app.screen.loaded, what="the nodes")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_nodes_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(cluster_app(), run_before=pumped(then=open_nodes), terminal_size=size)


async def test_the_nodes_screen_lists_each_node_and_what_it_owns() -> None:
    app = cluster_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await open_nodes(pilot)
        screen = app.screen
        assert isinstance(screen, NodesScreen)
        rows = [[str(c) for c in screen.table.get_row_at(i)] for i in range(3)]
        assert [r[0] for r in rows] == ["ops-1 *", "ops-2", "ops-3"]
        assert [r[1] for r in rows] == ["live", "live", "stale"]
        assert rows[1][3] == "2/4" and "deployer@5" in rows[1][5]
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, NodesScreen), what="back")


async def test_a_runtime_that_is_no_cluster_node_says_so() -> None:
    runtime = AgentRuntime()
    runtime.add_process("p", ProcessConfig(model="echo"))
    app = ControlRoom(LocalControl(runtime), start_runtime=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_nodes(pilot)
        title = str(app.screen.query_one("#nodes-title").render())
        assert "not a cluster node" in title
    await runtime.close()
