"""Journal retention: what goes (old finished runs, superseded process entries) and what never
does (what recovery, open or waiting runs, queued events, dead letters, incidents and the
delivery index need), through SQLiteJournal.retain and a background pass; the low-water mark
that tells retention's gaps from damage; the setting's validation."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest
from pydantic import ValidationError

from runtime_core.journal import EntryType, JournalEntry, ReadFilter, SQLiteJournal
from runtime_core.journal.config import JournalConfig
from runtime_core.journal.inspect import verify
from runtime_core.journal.sqlite.check import find_damage
from runtime_core.journal.sqlite.retention import RetentionPolicy
from tests.helpers.retention import History, copy_journal, entry_count, recovered

E = EntryType


async def write(path: Path, build: object) -> None:
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        build(History(journal))  # type: ignore[operator]
        await journal.flush()
    finally:
        await journal.close()


async def retain(path: Path, policy: RetentionPolicy, process: str = "p") -> dict[str, int]:
    """One background pass with ``policy`` for ``process``: the entries it removed."""
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        journal.retain(process, policy)
        report = await journal.retention.run_pass()
    finally:
        await journal.close()
    return report.entries


def busy(h: History, runs: int, every: int = 10) -> None:
    """``runs`` events that each run to success, a checkpoint every ``every`` runs."""
    for i in range(runs):
        h.accept()
        h.run("ok", tools=i % 3)
        if i % every == every - 1:
            h.checkpoint()


async def same_restart(tmp_path: Path, build: object, policy: RetentionPolicy,
                       max_messages: int = 0) -> tuple[Path, dict[str, int]]:
    """Write a history, retain a copy of it, and check a restart takes back the same from
    both and the copy passes verify and the start checks; the copy and what was removed."""
    before = tmp_path / "before.db"
    await write(before, build)
    after = copy_journal(before, tmp_path / "after.db")
    removed = await retain(after, policy)
    kept = await recovered(copy_journal(after, tmp_path / "after-run.db"), "p", max_messages)
    whole = await recovered(copy_journal(before, tmp_path / "before-run.db"), "p",
                            max_messages)
    assert kept == whole
    assert verify(after).problems == []
    assert find_damage(after) == []
    return after, removed


async def test_old_finished_runs_go_and_a_restart_takes_back_the_same(tmp_path: Path
                                                                      ) -> None:
    after, removed = await same_restart(tmp_path, lambda h: busy(h, 60), RetentionPolicy(
        keep_runs=5))
    assert removed["p"] > 200
    with closing(sqlite3.connect(after)) as conn:
        finishes = conn.execute("SELECT COUNT(*) FROM entries WHERE entry_type = ?",
                                (E.RUN_FINISHED,)).fetchone()[0]
        mark = conn.execute("SELECT before_seq, removed FROM retained").fetchall()
    assert 5 <= finishes <= 10  # the newest 5, and those after the last checkpoint
    assert mark and mark[0][1] == removed["p"]
    assert verify(after).retained == {"p": mark[0][0]}


async def test_what_is_still_needed_stays(tmp_path: Path) -> None:
    """Old as they are, an open run cut off in a write, a run waiting for evidence, a queued
    event (and its failed first run), a dead letter, an incident's run and a delivery key all
    stay, with the entries that point at them."""
    kept: dict[str, str | None] = {}

    def build(h: History) -> None:
        h.accept()
        kept["open"] = h.run("open")
        h.accept()
        kept["evidence"] = h.run("evidence")
        h.accept()
        kept["dead"] = h.run("dead")
        h.accept(key="delivery-1")
        kept["incident"] = h.run("ok")
        h.incident()
        busy(h, 30)
        kept["queued"] = h.accept()
        kept["retry"] = h.run("retry")
        busy(h, 0)
        h.checkpoint()

    after, removed = await same_restart(tmp_path, build, RetentionPolicy(keep_runs=1))
    assert removed["p"] > 100
    journal = SQLiteJournal(after)
    await journal.open()
    try:
        for name in ("open", "evidence", "dead", "incident", "retry"):
            entries = await journal.read(ReadFilter(process="p", run_id=kept[name]))
            assert entries and entries[0].entry_type in (E.RUN_STARTED, E.RUN_FINISHED), name
        accepted = {e.data["event_id"] for e in await journal.read(ReadFilter(
            process="p", entry_type=E.EVENT_ACCEPTED))}
        assert kept["queued"] in accepted
        assert len(await journal.read(ReadFilter(process="p", entry_type=E.DEAD_LETTERED))) == 1
        assert len(await journal.read(ReadFilter(process="p", entry_type=E.INCIDENT))) == 1
        assert await journal.delivery_event("p", "delivery-1") is not None
        assert [r.run_id for r in await journal.open_runs("p")] == [
            kept["open"], kept["evidence"]]
    finally:
        await journal.close()


async def test_a_restart_keeps_its_conversation(tmp_path: Path) -> None:
    """The runs a restart's conversation reads (conversation_runs) stay whatever keep_runs."""
    after, removed = await same_restart(tmp_path, lambda h: busy(h, 40), RetentionPolicy(
        keep_runs=1, conversation_runs=7), max_messages=14)
    assert removed["p"] > 0
    with closing(sqlite3.connect(after)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM entries WHERE entry_type = ?",
                            (E.RUN_FINISHED,)).fetchone()[0] >= 7


async def test_by_age_only_runs_older_than_max_age_go(tmp_path: Path) -> None:
    """Entries ten seconds apart up to now: with max_age one hour, every run of the last hour
    stays and none much older."""
    path = tmp_path / "j.db"
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        history = History(journal, ts=time.time() - 30_000)
        busy(history, 500, every=25)
        await journal.flush()
    finally:
        await journal.close()
    cutoff = time.time() - 3600
    query = "SELECT COUNT(*), MIN(ts) FROM entries WHERE entry_type = ? AND ts >= ?"
    with closing(sqlite3.connect(path)) as conn:
        recent, _ = conn.execute(query, (E.RUN_FINISHED, cutoff)).fetchone()
    removed = await retain(path, RetentionPolicy(max_age=3600.0))
    assert removed["p"] > 1000
    with closing(sqlite3.connect(path)) as conn:
        runs, oldest = conn.execute(query, (E.RUN_FINISHED, 0)).fetchone()
    assert runs == recent > 20
    assert oldest >= cutoff
    assert find_damage(path) == [] and verify(path).ok


async def test_without_retention_everything_is_kept(tmp_path: Path) -> None:
    """The default: no policy, no pass removes anything (and a pass of another process's
    policy leaves this one alone)."""
    path = tmp_path / "j.db"
    await write(path, lambda h: busy(h, 30))
    count = entry_count(path)
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        report = await journal.retention.run_pass()
        journal.retain("someone-else", RetentionPolicy(keep_runs=1))
        await journal.retention.run_pass()
    finally:
        await journal.close()
    assert report.removed == 0 and entry_count(path) == count


async def test_a_gap_above_the_mark_is_still_damage(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await write(path, lambda h: busy(h, 65))  # 5 runs after the last checkpoint
    await retain(path, RetentionPolicy(keep_runs=5))
    with closing(sqlite3.connect(path)) as conn:
        mark = conn.execute("SELECT before_seq FROM retained").fetchone()[0]
        top = conn.execute("SELECT MAX(seq) FROM entries").fetchone()[0]
        assert top - 3 > mark
        conn.execute("DELETE FROM entries WHERE seq = ?", (top - 3,))
        conn.commit()
    problems = verify(path).problems
    assert any(f"breaks at entry p:{top - 2}" in p for p in problems), problems
    assert any(f"p:{top - 2}" in p for p in find_damage(path))


async def test_appends_go_on_while_a_pass_runs(tmp_path: Path) -> None:
    """The pass goes through the writer between group commits: appends submitted meanwhile
    all commit, in order, and the chain stays whole."""
    path = tmp_path / "j.db"
    await write(path, lambda h: busy(h, 400))
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        journal.retain("p", RetentionPolicy(keep_runs=2))
        journal.retention.batch = 50  # many small windows
        heads = await journal.read(ReadFilter(process="p", newest_first=True, limit=1))
        appends = [journal.append(JournalEntry("p", E.CONTEXT_UPDATE, {"key": "x", "value": i},
                                               process_id="p-1")) for i in range(200)]
        report, *_ = await asyncio.gather(journal.retention.run_pass(), *appends)
        assert report.windows > 3 and report.removed > 1000
        tail = await journal.read(ReadFilter(process="p", since_seq=heads[0].seq))
        assert [e.seq for e in tail] == list(range(heads[0].seq + 1, heads[0].seq + 201))
    finally:
        await journal.close()
    assert verify(path).ok


@pytest.mark.parametrize(("given", "seconds"), [("7d", 604800.0), ("90s", 90.0), ("1.5h", 5400.0),
                                                (3600, 3600.0), ("2w", 1209600.0)])
def test_max_age_takes_a_duration(given: object, seconds: float) -> None:
    config = JournalConfig.model_validate({"retention": {"max_age": given}})
    assert config.retention is not None and config.retention.max_age == seconds


@pytest.mark.parametrize(("given", "said"), [
    ({"max_age": "7x"}, "max_age '7x' is not a duration: use seconds (3600) or a number with"),
    ({"max_age": 0}, "max_age must be longer than 0 seconds"),
    ({"keep_runs": 0}, "greater than or equal to 1"),
    ({"keep_runs": "many"}, "keep_runs must be a whole number of runs"),
    ({}, "retention needs max_age (e.g. '7d'), keep_runs (e.g. 1000) or both"),
    ({"keep_run": 5}, "Extra inputs are not permitted"),
])
def test_a_bad_retention_says_what_to_write(given: dict[str, object], said: str) -> None:
    with pytest.raises(ValidationError) as caught:
        JournalConfig.model_validate({"retention": given})
    assert said in str(caught.value)


def test_retention_is_refused_on_postgres() -> None:
    with pytest.raises(ValidationError, match="retention is SQLite-only for now"):
        JournalConfig.model_validate({"backend": "postgres", "dsn": "postgresql://x/y",
                                      "retention": {"keep_runs": 10}})


def test_by_default_the_journal_keeps_everything() -> None:
    assert JournalConfig().retention is None
