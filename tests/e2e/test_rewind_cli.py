"""``promptui rewind`` and ``promptui fork`` on a journal a real process wrote."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from promptui.cli import app
from runtime_core.journal.sqlite.journal import SQLiteJournal
from tests.helpers.history import make_history, state_after_start


def second_run_start(path: Path) -> str:
    async def find() -> str:
        journal = SQLiteJournal(path)
        await journal.open()
        from runtime_core.journal.provider import ReadFilter

        starts = await journal.read(ReadFilter(process="books", entry_type="run_started"))
        await journal.close()
        return starts[1].entry_id

    return asyncio.run(find())


def test_list_plan_apply_and_fork(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    asyncio.run(make_history(path))
    runner = CliRunner()
    listed = runner.invoke(app, ["rewind", "books", "-j", str(path), "-n", "5"])
    assert listed.exit_code == 0, listed.output
    assert "checkpoint" in listed.output and "books:" in listed.output
    target = second_run_start(path)
    plan = runner.invoke(app, ["rewind", "books", target, "-j", str(path), "--plan"])
    assert plan.exit_code == 0, plan.output
    assert "booked" in plan.output and "Not undone: 2 write(s)" in plan.output
    assert asyncio.run(state_after_start(path)) == (3, 6)  # a plan changes nothing
    # no terminal to ask on (CliRunner's stdin is not one) and no --yes: refused, unchanged
    refused = runner.invoke(app, ["rewind", "books", target, "-j", str(path), "--apply"],
                            input="books\n")
    assert refused.exit_code == 2 and "pass --yes" in refused.output
    assert asyncio.run(state_after_start(path)) == (3, 6)
    applied = runner.invoke(app, ["rewind", "books", target, "-j", str(path), "--apply",
                                  "--yes"])
    assert applied.exit_code == 0, applied.output
    assert asyncio.run(state_after_start(path)) == (1, 2)  # the next start recovers it
    forked = runner.invoke(app, ["fork", "books", "books:3", "books-b", "-j", str(path)])
    assert forked.exit_code == 0, forked.output
    assert asyncio.run(state_after_start(path, "books-b")) == (None, 0)
    again = runner.invoke(app, ["fork", "books", "books:3", "books-b", "-j", str(path)])
    assert again.exit_code == 2 and "already has a process named 'books-b'" in again.output


def test_bad_input_names_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    asyncio.run(make_history(path))
    runner = CliRunner()
    bad_mode = runner.invoke(app, ["rewind", "books", "books:2", "-j", str(path), "-m", "all"])
    assert bad_mode.exit_code == 2 and "use one of: both" in bad_mode.output
    bad_entry = runner.invoke(app, ["rewind", "books", "books:999", "-j", str(path), "--plan"])
    assert bad_entry.exit_code == 2 and "no journal entry books:999" in bad_entry.output
    no_journal = runner.invoke(app, ["rewind", "books", "-j", str(tmp_path / "none.db")])
    assert no_journal.exit_code == 2 and "no journal at" in no_journal.output
