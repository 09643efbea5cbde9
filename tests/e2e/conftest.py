"""Fixtures for the end-to-end tests: no ``promptui serve`` outlives the test that started it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.serving import STARTED, stop_servers_started_after


@pytest.fixture(autouse=True)
def no_server_left_behind() -> Iterator[None]:
    """A test that fails half-way does not leave its servers running."""
    before = set(map(id, STARTED))
    yield
    stop_servers_started_after(before)
