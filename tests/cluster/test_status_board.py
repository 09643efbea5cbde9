"""The status board on PostgreSQL: a node publishes the figures of the processes it holds the
lease of, only those, never over a later owner's row, and again when they change or grow old;
what it published stays after it stops."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from runtime_core.cluster import LeaseStore
from runtime_core.cluster.status_board import Figures, StatusBoard, read_board

pytestmark = pytest.mark.slow


@pytest.fixture
async def leases(pg_dsn: str) -> AsyncIterator[LeaseStore]:
    store = LeaseStore(pg_dsn)
    try:
        yield store
    finally:
        await store.close()


def board_of(pg_dsn: str, node: str, figures: Figures, **options: Any) -> StatusBoard:
    board = StatusBoard(pg_dsn, node, connect_timeout=5.0, **options)
    board.source = lambda: dict(figures)
    return board


async def read(pg_dsn: str, names: list[str]) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        return await read_board(conn, names)


async def test_only_the_lease_holder_publishes_and_a_later_owner_is_never_overwritten(
        pg_dsn: str, leases: LeaseStore) -> None:
    assert await leases.claim("p0", "a", 60) == 1
    a_figures: Figures = {"p0": (1, {"state": "running", "waiting_runs": 3}),
                          "p1": (1, {"state": "running", "waiting_runs": 9})}  # p1: not a's
    a = board_of(pg_dsn, "a", a_figures)
    try:
        assert await a.publish() == 1
        found = await read(pg_dsn, ["p0", "p1"])
        assert list(found) == ["p0"]
        assert (found["p0"].node_id, found["p0"].epoch, found["p0"].summary) == (
            "a", 1, {"state": "running", "waiting_runs": 3})
        assert 0 <= found["p0"].age_s < 5
        assert await a.publish() == 0  # nothing changed, nothing old: nothing written
        # b takes p0 over (a was paused past its lease) and publishes under epoch 2
        await leases.release("p0", "a", 1)
        assert await leases.claim("p0", "b", 60) == 2
        b = board_of(pg_dsn, "b", {"p0": (2, {"state": "running", "waiting_runs": 4})})
        try:
            assert await b.publish() == 1
        finally:
            await b.stop()
        a_figures["p0"] = (1, {"state": "running", "waiting_runs": 0})  # a, late, changed
        assert await a.publish() == 0  # refused: the lease is b's now
        found = await read(pg_dsn, ["p0"])
        assert (found["p0"].node_id, found["p0"].epoch, found["p0"].summary["waiting_runs"]
                ) == ("b", 2, 4)
    finally:
        await a.stop()
    assert (await read(pg_dsn, ["p0"]))["p0"].node_id == "b"  # kept after the stop


async def test_a_row_is_written_again_when_it_changes_and_when_it_grows_old(
        pg_dsn: str, leases: LeaseStore) -> None:
    await leases.claim("p0", "a", 60)
    figures: Figures = {"p0": (1, {"queue_depth": 1})}
    board = board_of(pg_dsn, "a", figures, confirm_s=0.0)  # every row old at once
    try:
        assert await board.publish() == 1
        assert await board.publish() == 1  # confirmed: updated_at moves on
        board.confirm_s = 3600.0
        assert await board.publish() == 0
        figures["p0"] = (1, {"queue_depth": 2})
        assert await board.publish() == 1
        assert (await read(pg_dsn, ["p0"]))["p0"].summary == {"queue_depth": 2}
    finally:
        await board.stop()


async def test_reading_before_any_node_published_is_an_error_the_views_absorb(
        pg_dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable):
            await read_board(conn, ["p0"])
        assert await read_board(conn, []) == {}
