"""Retention over random histories: whatever a process did (runs that succeed, fail and retry,
die, stay cut off in a write or wait for evidence; checkpoints, context updates, redeliveries,
cleared dead letters, incidents, a rewind, delivery keys) and whatever the policy, a restart
after retention takes back exactly what it takes back without it, every delivery key still
deduplicates, every incident entry is there, and the file passes verify and the start checks.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runtime_core.journal import EntryType, ReadFilter, SQLiteJournal
from runtime_core.journal.inspect import verify
from runtime_core.journal.sqlite.check import find_damage
from runtime_core.journal.sqlite.retention import RetentionPolicy
from tests.helpers.retention import History, copy_journal, entry_count, recovered

pytestmark = pytest.mark.slow

STEPS = st.sampled_from(["accept", "accept", "key", "ok", "ok", "ok0", "ok2", "retry", "dead",
                         "open", "evidence", "checkpoint", "checkpoint", "update",
                         "transition", "redeliver", "clear", "incident", "rewind"])


def play(h: History, steps: list[str]) -> None:
    for n, step in enumerate(steps):
        if step in ("accept", "key"):
            h.accept(key=f"d{n}" if step == "key" else None)
        elif step in ("ok", "ok0", "ok2"):
            h.run("ok", tools={"ok": 1, "ok0": 0, "ok2": 2}[step])
        elif step in ("retry", "dead", "open", "evidence"):
            h.run(step)
        elif step == "update":
            h.update(f"u{n % 3}", n)
        else:
            {"checkpoint": h.checkpoint, "transition": h.transition, "redeliver": h.redeliver,
             "clear": h.clear_dead, "incident": h.incident, "rewind": h.rewind}[step]()


async def scenario(folder: Path, steps: list[str], policy: RetentionPolicy,
                   max_messages: int) -> None:
    before = folder / "before.db"
    journal = SQLiteJournal(before)
    await journal.open()
    history = History(journal)
    try:
        play(history, steps)
        await journal.flush()
    finally:
        await journal.close()
    after = copy_journal(before, folder / "after.db")
    journal = SQLiteJournal(after)
    await journal.open()
    try:
        journal.retain("p", policy)
        report = await journal.retention.run_pass()
        event(f"removed: {'some' if report.removed else 'none'}")
        for key in history.keys:
            assert await journal.delivery_event("p", key) is not None, key
        incidents = await journal.read(ReadFilter(process="p", entry_type=EntryType.INCIDENT))
        assert len(incidents) == history.incidents
    finally:
        await journal.close()
    assert verify(after).problems == []
    assert find_damage(after) == []
    assert entry_count(after) <= entry_count(before)
    kept = await recovered(copy_journal(after, folder / "a.db"), "p", max_messages)
    whole = await recovered(copy_journal(before, folder / "b.db"), "p", max_messages)
    assert _plain(kept) == _plain(whole)


def _plain(found: dict[str, Any]) -> dict[str, Any]:
    return {k: repr(v) for k, v in found.items()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEPS, min_size=20, max_size=100),
       keep_runs=st.one_of(st.none(), st.integers(1, 8)),
       max_age=st.one_of(st.none(), st.sampled_from([1.0, 500.0, 5000.0])),
       max_messages=st.sampled_from([0, 1, 4, 10]))
def test_a_restart_after_retention_takes_back_the_same(
        steps: list[str], keep_runs: int | None, max_age: float | None,
        max_messages: int) -> None:
    if keep_runs is None and max_age is None:
        keep_runs = 1
    policy = RetentionPolicy(max_age=max_age, keep_runs=keep_runs,
                             conversation_runs=(max_messages + 1) // 2 if max_messages else 0)
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(scenario(Path(folder), steps, policy, max_messages))
