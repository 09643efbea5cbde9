"""A process with a retention runs event after event: its journal file stops growing (the
background passes remove old runs and give the pages back), where the same process without
one grows with every wave; a restart then takes back the same state."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runtime_core import AgentProcess, ProcessConfig, ToolContext, TriggerEvent
from runtime_core.journal import SQLiteJournal
from runtime_core.journal.inspect import verify
from runtime_core.journal.sqlite.vacuum import KEEP_FREE_PAGES
from tests.helpers.polling import wait_for

pytestmark = pytest.mark.slow

MODEL = {"provider": "scripted", "turns": [
    {"tool_calls": [{"name": "book", "args": {"invoice": "$payload.invoice"}}]},
    {"reply": "Booked."}]}
WAVES, EVENTS = 6, 150


def book(ctx: ToolContext, invoice: str) -> str:
    ctx.set("booked", int(ctx.get("booked", 0)) + 1)
    return f"booked {invoice} " + "x" * 400  # a result of some size, as real tools return


@dataclass(frozen=True)
class FileSize:
    """The journal file once the WAL is folded in: its bytes, and its pages in use and free."""

    size: int
    used: int
    free: int


def measure(path: Path) -> FileSize:
    """The journal file's bytes and pages once the WAL is folded in."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    return FileSize(path.stat().st_size, pages - free, free)


async def waves(path: Path, retention: dict[str, Any] | None) -> list[FileSize]:
    journal: dict[str, Any] = {"path": str(path)}
    if retention is not None:
        journal["retention"] = retention
    process = AgentProcess("books", ProcessConfig(model=MODEL, journal=journal), tools=[book])
    await process.start()
    store = process.journal
    assert isinstance(store, SQLiteJournal)
    sizes = []
    try:
        for wave in range(WAVES):
            for i in range(EVENTS):
                await process.inject(TriggerEvent("t", "manual", {"invoice": f"{wave}-{i}"}))
            await wait_for(lambda w=wave: process.invocation_count >= (w + 1) * EVENTS,
                           60, "the wave's runs")
            if retention is not None:
                passes = store.retention.passes
                await wait_for(lambda p=passes: store.retention.passes >= p + 2, 30,
                               "two retention passes after the wave")
            sizes.append(measure(path))
    finally:
        await process.close()
    return sizes


async def test_the_journal_levels_off_with_a_retention(tmp_path: Path) -> None:
    kept = await waves(tmp_path / "kept.db", {"keep_runs": 100, "every": 0.2})
    grown = await waves(tmp_path / "grown.db", None)
    size = [m.size for m in grown]
    assert size[-1] > 2.5 * size[1], grown  # no retention: it grows with every wave
    # retention: after the first waves a wave adds few pages in use (a fifth of what it adds
    # without), and a pass gives freed pages back down to the few that new entries reuse; so
    # the file's size stays within those free pages of its pages in use
    used = [m.used for m in kept]
    assert used[-1] - used[2] < (grown[-1].used - grown[2].used) / 5, (kept, grown)
    assert all(m.free <= KEEP_FREE_PAGES for m in kept[1:]), kept
    assert kept[-1].size < size[-1] / 2.5, (kept, grown)
    assert verify(tmp_path / "kept.db").ok
    again = AgentProcess("books", ProcessConfig(model=MODEL, journal={
        "path": str(tmp_path / "kept.db")}), tools=[book])
    await again.start()
    try:
        assert again.context.get("booked") == WAVES * EVENTS
        assert again.invocation_count == WAVES * EVENTS
        assert len(again.conversation.messages()) == 100
    finally:
        await again.close()
