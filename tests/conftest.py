"""Shared test helpers: poll for a condition with a timeout instead of sleeping."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from runtime_core import AgentProcess, FakeClock, RuntimeEvent

if TYPE_CHECKING:  # imported by the fixture: psycopg loads only for tests that need it
    from tests.pgserver import PgServer


async def wait_for(predicate: Callable[[], bool], timeout: float = 15.0, what: str = "") -> None:
    """Yield to the loop until ``predicate()`` is true; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what or predicate}")
        await asyncio.sleep(0.002)


async def settle(rounds: int = 20) -> None:
    """Let already-scheduled callbacks and tasks run (no wall-clock waiting)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def record(process: AgentProcess) -> list[RuntimeEvent]:
    """Every event the process emits from now on, in order."""
    events: list[RuntimeEvent] = []
    process.notifier.add_callback(events.append)
    return events


# -- a throwaway PostgreSQL (tests/pgserver.py): one server per worker, a schema per test -----
@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL 15 on a unix socket for this pytest worker; skips when it cannot run."""
    from tests.pgserver import PgServer, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no throwaway PostgreSQL: {reason}")
    server = PgServer()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def pg_dsn(pg_server: PgServer) -> Iterator[str]:
    """The DSN of a fresh, empty schema on the worker's PostgreSQL (dropped afterwards)."""
    if not pg_server.running:  # a test stopped it and failed before starting it again
        pg_server.start()
    dsn = pg_server.create_schema()
    try:
        yield dsn
    finally:
        with contextlib.suppress(Exception):  # the server may be down: cleanup() removes it
            pg_server.drop_schema(dsn)
