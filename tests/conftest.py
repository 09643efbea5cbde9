"""Fixtures for every test: a fake clock, the loopback OpenAI-compatible server, a port something
listens on, and a throwaway PostgreSQL (one server per worker, a schema per test). Their code
lives in tests/helpers/."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from runtime_core import FakeClock
from tests.helpers.models import FakeOpenAI, fake_openai
from tests.helpers.ports import taken_port as listening_port

if TYPE_CHECKING:  # imported by the fixture: psycopg loads only for tests that need it
    from tests.helpers.postgres import PgServer

POSTGRES_FIXTURES = ("pg_server", "pg_dsn")

# The tests start hundreds of Python subprocesses (serve, run, workers, MCP servers). With
# PYTHONDONTWRITEBYTECODE set (as in some sandboxes and CI images) each one compiled every
# module of ours again: about a third of a `promptui run`'s start. Set here, before the xdist
# workers start, the workers and every subprocess keep bytecode in a cache outside the checkout.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    os.environ.setdefault("PYTHONPYCACHEPREFIX",
                          str(Path(tempfile.gettempdir()) / "promptui-tests-pycache"))


# A shell runs a background job (`pytest ... &`) with SIGINT ignored, and every process it
# starts inherits that: a CLI started by a test would then never see the Ctrl+C the test sends
# it (Python leaves an inherited SIG_IGN alone, as a program run with nohup should). The tests
# act as a terminal would: SIGINT interrupts, here and in the subprocesses they start.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# The longest tests (half a minute to a minute and more each) go first, so that the xdist
# workers run them side by side at the start instead of one of them alone at the end.
LONGEST_FIRST = ("tests/e2e/test_crash_recovery.py", "tests/cluster/",
                 "tests/governance/test_no_secret_anywhere.py", "tests/e2e/test_api_schema.py",
                 "tests/e2e/test_soak_run.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if path.startswith(prefix)),
                    len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: the rest keep their order


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    """A loopback OpenAI-compatible server: it answers with what the test scripts."""
    async with fake_openai() as fake:
        yield fake


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port of 127.0.0.1 something else listens on."""
    with listening_port() as port:
        yield port


# -- a throwaway PostgreSQL (tests/helpers/postgres.py): one server per worker, a schema per test
def must_be_slow(item: pytest.Item, fixture: str) -> None:
    """A test on PostgreSQL is slow (it starts a server): it must say so, or the fast layer
    (``pytest -m "not slow"``) would start one."""
    if item.get_closest_marker("slow") is None:
        pytest.fail(f"{item.nodeid} uses {fixture} (PostgreSQL) without the slow marker: mark it "
                    "@pytest.mark.slow (or its module: pytestmark = pytest.mark.slow; or its "
                    "parameter: pytest.param(..., marks=pytest.mark.slow))", pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    for name in POSTGRES_FIXTURES:
        if name in getattr(item, "fixturenames", ()):
            must_be_slow(item, name)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL 15 on a unix socket for this pytest worker; skips when it cannot run."""
    from tests.helpers.postgres import PgServer, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no throwaway PostgreSQL: {reason}")
    server = PgServer()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def pg_dsn(request: pytest.FixtureRequest) -> Iterator[str]:
    """The DSN of a fresh, empty schema on the worker's PostgreSQL (dropped afterwards)."""
    must_be_slow(request.node, "pg_dsn")  # also when asked for with request.getfixturevalue
    pg_server: PgServer = request.getfixturevalue("pg_server")
    if not pg_server.running:  # a test stopped it and failed before starting it again
        pg_server.start()
    dsn = pg_server.create_schema()
    try:
        yield dsn
    finally:
        with contextlib.suppress(Exception):  # the server may be down: cleanup() removes it
            pg_server.drop_schema(dsn)
