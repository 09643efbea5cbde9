"""The journal file shrinks once retention removes entries: a new journal vacuums
incrementally from the start, an older one (schema 3, auto_vacuum none) is switched when it
opens if it is small, and by ``promptui journal compact`` (which says the bytes before and
after) if not. The command refuses a journal a runtime holds."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptui.cli import app
from runtime_core.journal import SQLiteJournal
from runtime_core.journal.inspect import verify
from runtime_core.journal.sqlite import schema
from runtime_core.journal.sqlite.retention import RetentionPolicy
from runtime_core.journal.sqlite.vacuum import INCREMENTAL, KEEP_FREE_PAGES, file_bytes
from tests.helpers.retention import History, entry_count


async def busy_journal(path: Path, runs: int = 400) -> None:
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        history = History(journal)
        for i in range(runs):
            history.accept()
            history.run("ok", tools=2)
            if i % 50 == 49:
                history.checkpoint()
        await journal.flush()
    finally:
        await journal.close()


def pragma(path: Path, name: str) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute(f"PRAGMA {name}").fetchone()[0])


def as_schema_3(path: Path) -> None:
    """Make ``path`` what schema 3 left: no retention marks, no incremental vacuuming."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("DROP TABLE retained")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        conn.execute("PRAGMA auto_vacuum=NONE")
        conn.execute("VACUUM")
    assert pragma(path, "auto_vacuum") == 0


async def test_a_pass_gives_the_freed_pages_back(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await busy_journal(path)
    assert pragma(path, "auto_vacuum") == INCREMENTAL  # a new journal, from its first table
    before = file_bytes(path)
    journal = SQLiteJournal(path)
    await journal.open()
    try:
        journal.retain("p", RetentionPolicy(keep_runs=10))
        report = await journal.retention.run_pass()
    finally:
        await journal.close()
    assert report.removed > 2000 and report.pages > 50
    assert pragma(path, "freelist_count") <= KEEP_FREE_PAGES  # kept for reuse
    assert file_bytes(path) < before * 0.55


async def test_a_schema_3_journal_is_migrated_and_switched_when_it_opens(
        tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await busy_journal(path, 50)
    as_schema_3(path)
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT * FROM entries ORDER BY id").fetchall()
    journal = SQLiteJournal(path)
    await journal.open()
    await journal.close()
    assert pragma(path, "auto_vacuum") == INCREMENTAL
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT * FROM entries ORDER BY id").fetchall() == rows
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                            ).fetchone() == (str(schema.SCHEMA_VERSION),)
        assert conn.execute("SELECT COUNT(*) FROM retained").fetchone() == (0,)


async def test_compact_switches_a_big_journal_and_says_the_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Too big to switch at a start (here: any size), it stays as it is when opened; the
    command removes what the limits let go, switches it once and reports before and after."""
    path = tmp_path / "j.db"
    await busy_journal(path)
    as_schema_3(path)
    monkeypatch.setattr(schema, "SWITCH_AT_OPEN_BYTES", 0)
    journal = SQLiteJournal(path)
    await journal.open()
    await journal.close()
    assert pragma(path, "auto_vacuum") == 0
    before, entries = file_bytes(path), entry_count(path)

    runner = CliRunner()
    done = runner.invoke(app, ["journal", "compact", "-j", str(path), "--keep-runs", "5",
                               "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["bytes_before"] == before and report["bytes_after"] == file_bytes(path)
    assert report["bytes_after"] < before / 3
    assert report["switched_to_incremental_vacuum"] is True
    assert report["entries_removed"]["p"] == entries - entry_count(path) > 2000
    assert report["runs_removed"]["p"] > 300
    assert pragma(path, "auto_vacuum") == INCREMENTAL
    assert verify(path).ok

    again = runner.invoke(app, ["journal", "compact", "-j", str(path)])
    assert again.exit_code == 0, again.output
    assert "p: kept everything (no retention for it)" in again.output
    assert "nothing was removed: give --max-age or --keep-runs" in again.output


async def test_compact_is_refused_while_a_runtime_holds_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await busy_journal(path, 20)
    entries = entry_count(path)
    holder = SQLiteJournal(path)
    await holder.open()
    try:
        done = CliRunner().invoke(app, ["journal", "compact", "-j", str(path), "--keep-runs",
                                        "1"])
    finally:
        await holder.close()
    assert done.exit_code == 2
    assert "applies its processes' journal.retention itself" in done.output
    assert entry_count(path) == entries


@pytest.mark.parametrize(("args", "said"), [
    (["--max-age", "soon"], "--max-age: max_age 'soon' is not a duration"),
    (["--keep-runs", "0"], "--keep-runs: Input should be greater than or equal to 1"),
])
def test_compact_says_what_is_wrong_with_its_limits(tmp_path: Path, args: list[str],
                                                    said: str) -> None:
    done = CliRunner().invoke(app, ["journal", "compact", "-j", str(tmp_path / "j.db"), *args])
    assert done.exit_code == 2
    assert said in " ".join(done.output.split())


async def test_compact_applies_a_manifests_own_retention(tmp_path: Path) -> None:
    """A process declared by a manifest is compacted by its journal.retention, keeping only
    the runs its own conversation reads back; the others are kept whole."""
    path = tmp_path / "j.db"
    await busy_journal(path, 120)
    manifest = tmp_path / "p.agent"
    manifest.write_text('version: "1.0"\nname: p\n'
                        "model: {provider: scripted, turns: [{reply: ok}]}\n"
                        "context: {conversation_max_messages: 4}\n"
                        "journal: {retention: {keep_runs: 3}}\n")
    done = CliRunner().invoke(app, ["journal", "compact", str(manifest), "-j", str(path),
                                    "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["runs_removed"]["p"] >= 100  # the last checkpoint's tail stays too
    assert report["kept_everything"] == []
    assert verify(path).ok


async def test_compact_shrinks_an_incremental_journal(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await busy_journal(path)
    done = CliRunner().invoke(app, ["journal", "compact", "-j", str(path), "--keep-runs", "5",
                                    "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["switched_to_incremental_vacuum"] is False
    assert report["bytes_after"] == file_bytes(path) < report["bytes_before"] / 3
