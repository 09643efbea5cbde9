"""ClusterHost in one event loop: a node runs the processes it holds a lease on, names itself
as their node, tells the notifier and its ownership hooks, steps down when a write of one is
refused by the fence (and ends its lease), and hands everything back when it stops."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from runtime_core import AgentRuntime, TriggerEvent
from runtime_core.cluster import LeaseStore
from runtime_core.cluster.host import ClusterHost
from runtime_core.control.cluster import ClusterControl
from runtime_core.events import OwnershipChanged, RuntimeEvent
from runtime_core.journal import JournalError
from runtime_core.manifest.loader import load_directory
from runtime_core.process.process import AgentProcess
from tests.helpers.polling import wait_for

pytestmark = pytest.mark.slow

AGENT = """\
version: "1.0"
name: {name}
instructions: Answer.
model:
  provider: scripted
  turns:
    - reply: done
"""


class Hooks:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int]] = []

    async def gained(self, name: str, epoch: int, process: AgentProcess) -> None:
        assert process.state.value == "running"
        self.calls.append(("gained", name, epoch))

    async def lost(self, name: str, epoch: int, reason: str) -> None:
        self.calls.append(("lost", name, epoch))


@pytest.fixture
async def host(tmp_path: Path, pg_dsn: str) -> AsyncIterator[ClusterHost]:
    for name in ("p0", "p1"):
        (tmp_path / f"{name}.agent").write_text(AGENT.format(name=name))
    runtime = AgentRuntime()
    node = ClusterHost(runtime, load_directory(tmp_path), pg_dsn, node_id="a",
                       address="http://127.0.0.1:1", ttl_s=3.0)
    try:
        yield node
    finally:
        await node.stop()
        await runtime.shutdown()


def ownership(events: list[RuntimeEvent]) -> list[tuple[str, bool, str]]:
    return [(e.process, e.gained, e.reason) for e in events if isinstance(e, OwnershipChanged)]


async def test_a_node_runs_what_it_holds_and_hands_it_back(host: ClusterHost,
                                                            pg_dsn: str) -> None:
    hooks = Hooks()
    host.add_hook(hooks)
    events = host.runtime.notifier.subscribe()
    await host.start()
    await wait_for(lambda: all(host.runs_here(n) for n in ("p0", "p1")), 10, "both running")
    status = host.runtime.status()["processes"]
    assert {name: row["node"] for name, row in status.items()} == {"p0": "a", "p1": "a"}
    process = host.runs_here("p0")
    assert process is not None
    await process.inject(TriggerEvent("test", "manual", {}))
    await wait_for(lambda: process.invocation_count == 1, 10, "the run")
    assert sorted(hooks.calls) == [("gained", "p0", 1), ("gained", "p1", 1)]

    await host.stop()
    assert host.runtime.processes == {}
    assert sorted(hooks.calls)[:2] == [("gained", "p0", 1), ("gained", "p1", 1)]
    assert sorted(c for c in hooks.calls if c[0] == "lost") == [("lost", "p0", 1),
                                                              ("lost", "p1", 1)]
    said = ownership(events.drain())
    assert sorted(said) == [("p0", False, "this node is stopping"),
                            ("p0", True, "its lease was claimed by this node"),
                            ("p1", False, "this node is stopping"),
                            ("p1", True, "its lease was claimed by this node")]
    leases = LeaseStore(pg_dsn)
    try:
        assert await leases.owners() == {}  # ended at once: the others need not wait
    finally:
        await leases.close()
    with psycopg.connect(pg_dsn) as conn:  # shut down as for a restart, under its epoch
        rows = conn.execute("SELECT process, epoch FROM entries WHERE entry_type = "
                            "'shutdown' ORDER BY process").fetchall()
    assert rows == [("p0", 1), ("p1", 1)]


async def test_a_write_refused_by_the_fence_steps_the_process_down(host: ClusterHost,
                                                                   pg_dsn: str) -> None:
    hooks = Hooks()
    host.add_hook(hooks)
    events = host.runtime.notifier.subscribe()
    await host.start()
    await wait_for(lambda: bool(host.runs_here("p0")), 10, "p0 running")
    process = host.runs_here("p0")
    assert process is not None
    # node b took p0 over while this one was not looking (paused past its lease, say); on an
    # async connection: a journal commit of this loop may hold the lease row share-locked,
    # and a blocking UPDATE here would wait for it with the loop stopped (a deadlock)
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute("UPDATE cluster_leases SET node_id = 'b', epoch = epoch + 1, "
                           "expires_at = clock_timestamp() + interval '1 minute' "
                           "WHERE process = 'p0'")
    with pytest.raises(JournalError, match="node 'b' owns it now at epoch 2"):
        await process.inject(TriggerEvent("test", "manual", {}))
    await wait_for(lambda: "p0" not in host.runtime.processes, 10, "p0 to step down")
    assert host.node_of("p0") != "a"
    assert ("lost", "p0", 1) in hooks.calls
    stepped = [why for p, gained, why in ownership(events.drain()) if not gained and p == "p0"]
    assert len(stepped) == 1
    assert "journal write refused under epoch 1" in stepped[0]
    assert host.node is not None
    await wait_for(lambda: host.node is not None and "p0" not in host.node.held, 10,
                   "the node to let the lease go")
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM entries WHERE process = 'p0' AND epoch = 2"
                            ).fetchone() == (0,)


async def test_a_process_that_cannot_start_keeps_its_lease_and_retries_with_backoff(
        tmp_path: Path, pg_dsn: str) -> None:
    """Its webhook port is taken on this box: the start fails, the process shows FAILED with
    why, the node keeps the lease (no claim/release loop: the epoch stays 1) and tries again
    later, doubling the wait; once the port is free it runs, and takes events."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        (tmp_path / "p0.agent").write_text(AGENT.format(name="p0") + f"""\
triggers:
  - {{type: webhook, webhook_path: /p0, webhook_port: {port}}}
""")
        runtime = AgentRuntime()
        host = ClusterHost(runtime, load_directory(tmp_path), pg_dsn, node_id="a",
                           address="http://127.0.0.1:1", ttl_s=3.0)
        host.start_retry_s = (0.2, 1.0)
        hooks = Hooks()
        host.add_hook(hooks)
        events = runtime.notifier.subscribe()
        try:
            await host.start()
            await wait_for(lambda: (p := runtime.processes.get("p0")) is not None
                           and p.state.value == "failed", 10, "p0 to fail its start")
            status = await ClusterControl(host.runtime, host).process_status("p0")
            assert status["state"] == "failed" and status["node"] == "a"
            await wait_for(lambda: host.start_failures("p0") >= 3, 10, "three tries")
            assert host.node is not None and host.node.held == {"p0": 1}  # one claim only
            assert hooks.calls == []
            assert ownership(events.drain()) == []
        finally:
            squatter.close()
        try:
            await wait_for(lambda: bool(host.runs_here("p0")) and runtime.processes[
                "p0"].state.value == "running", 10, "p0 to run once the port is free")
            assert hooks.calls == [("gained", "p0", 1)]
            assert host.start_failures("p0") == 0
        finally:
            await host.stop()
            await runtime.shutdown()
