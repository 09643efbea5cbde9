"""``on_damage``: a damaged journal is refused by default; ``start_fresh`` (opt-in, for
availability) moves it aside and starts fresh, and then the log, the process status, the
runtime's info, the room's rows and ``GET /health`` say what was left behind and where, also
after a restart, until the file is dealt with."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from promptui.store import UIStore, describe
from runtime_core import AgentRuntime, ProcessConfig
from runtime_core.control.local import LocalControl
from runtime_core.events import JournalDamaged
from runtime_core.journal import DamagedJournal, JournalEntry, SQLiteJournal
from runtime_core.journal.config import JournalConfig
from runtime_core.journal.factory import make_journal, share_journal
from tests.helpers.serving import TOKEN, served


def test_the_setting_refuses_by_default_and_starts_fresh_only_when_asked() -> None:
    assert JournalConfig().on_damage == "refuse"
    assert JournalConfig(on_damage="start_fresh").on_damage == "start_fresh"
    with pytest.raises(ValidationError, match="on_damage"):
        JournalConfig(on_damage="move_aside")  # type: ignore[arg-type]
    fresh = make_journal(JournalConfig(on_damage="start_fresh"))
    assert isinstance(fresh, SQLiteJournal) and fresh.start_fresh and not fresh.strict
    default = make_journal(JournalConfig())
    assert isinstance(default, SQLiteJournal) and not default.start_fresh
    # Processes on one file: fresh only if all say so; strict (kept from before) refuses.
    share_journal(fresh, JournalConfig())
    assert not fresh.start_fresh
    strict = make_journal(JournalConfig(on_damage="start_fresh", recover_on_start="strict"))
    assert isinstance(strict, SQLiteJournal) and strict.strict


async def held_two_events(path: Path) -> None:
    """A journal that holds two queued events, then made unreadable by SQLite (cut short)."""
    journal = SQLiteJournal(path)
    await journal.open()
    for eid in ("a", "b"):
        await journal.append(JournalEntry("p", "event_accepted", {"event_id": eid},
                                          process_id="x"),
                             attachment={"event_id": eid, "trigger_id": "t", "payload": {}})
    for _ in range(300):  # enough pages that a cut leaves the queue's page behind
        await journal.append(JournalEntry("p", "note", {"i": "n" * 200}, process_id="x"))
    await journal.close()
    data = path.read_bytes()
    path.write_bytes(data[:len(data) * 3 // 4])


async def test_a_damaged_journal_is_refused_naming_the_damage_and_the_salvage(
        tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    await held_two_events(path)
    before = path.read_bytes()
    with pytest.raises(DamagedJournal) as refused:
        await SQLiteJournal(path).open()
    message = str(refused.value)
    assert message.startswith(f"journal {path} cannot be read: database error: database disk "
                              "image is malformed; it was not opened and the file is untouched")
    assert f"'promptui journal salvage {path}' writes a new journal beside it" in message
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "journal.db"]


async def test_start_fresh_says_what_was_left_behind_everywhere(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "journal.db"
    await held_two_events(path)
    runtime = AgentRuntime()
    runtime.add_process("p", ProcessConfig(model="echo", journal={
        "level": "checkpoint", "path": str(path), "on_damage": "start_fresh"}))
    control = LocalControl(runtime)
    seen: list[JournalDamaged] = []
    runtime.notifier.add_callback(lambda e: seen.append(e) if isinstance(e, JournalDamaged)
                                  else None)
    with caplog.at_level(logging.WARNING):
        await runtime.start_all()
    try:
        [moved] = [p for p in tmp_path.glob("journal.db.damaged-*")]
        said = (f"journal {path} was damaged (database error: database disk image is "
                f"malformed) and left behind at {moved}: it held 2 queued event(s), 0 run(s) "
                "waiting for an operator and 0 dead letter(s); rescue it with 'promptui "
                f"journal salvage {moved}'")
        assert runtime.journals_left_behind() == {str(moved): said}
        assert (await control.runtime_info())["journal_left_behind"] == {str(moved): said}
        assert runtime.get_process("p").status()["journal_left_behind"] == [said]
        [row] = await control.list_processes()
        assert row.journal_left_behind == (said,)
        store = UIStore()
        store.update_processes([row])
        assert store.journals_left_behind == [said]  # the room's header badge counts these
        assert seen and str(moved) in describe(seen[0])  # the room's anomaly feed line
        [critical] = [r for r in caplog.records if r.levelno == logging.CRITICAL]
        assert "starting a fresh journal" in critical.getMessage()
        assert "it held 2 queued event(s)" in critical.getMessage()
    finally:
        await runtime.close()
    # A later start on the fresh journal still says it, until the file is dealt with.
    again = SQLiteJournal(path)
    await again.open()
    try:
        assert [k.describe() for k in again.left_behind] == [
            said.replace(" (database error: database disk image is malformed)", "")]
    finally:
        await again.close()
    moved.rename(tmp_path / "dealt-with.db")
    last = SQLiteJournal(path)
    await last.open()
    assert last.left_behind == []
    await last.close()


@pytest.mark.slow
async def test_health_says_degraded_while_a_journal_is_left_behind(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    await held_two_events(path)
    runtime = AgentRuntime()
    runtime.add_process("p", ProcessConfig(model="echo", journal={
        "level": "checkpoint", "path": str(path), "on_damage": "start_fresh"}))
    await runtime.start_all()
    async with served(runtime) as url, httpx.AsyncClient(
            base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        health = await client.get("/health")
        # 200: the operator chose availability, so a load balancer keeps sending; the body
        # says it is not healthy, and what was left behind where.
        assert health.status_code == 200
        body = health.json()
        assert body["status"] == "degraded"
        [(where, what)] = body["journal_left_behind"].items()
        assert ".damaged-" in where and "it held 2 queued event(s)" in what
        assert (await client.get("/runtime")).json()["journal_left_behind"] == {where: what}
        [row] = (await client.get("/processes")).json()
        assert row["journal_left_behind"] == [what]


async def test_status_without_a_server_says_what_was_left_behind(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from promptui.cli.main import app

    path = tmp_path / "journal.db"
    await held_two_events(path)
    env = {"PROMPTUI_URL": "", "PROMPTUI_TOKEN": "", "COLUMNS": "300"}
    damaged = CliRunner().invoke(app, ["status", "-j", str(path)], env=env)
    assert damaged.exit_code == 2
    assert f"'promptui journal salvage {path}' rescues what it holds" in damaged.output
    journal = SQLiteJournal(path, start_fresh=True)
    await journal.open()
    await journal.append(JournalEntry("p", "note", {}, process_id="y"))
    await journal.close()
    shown = CliRunner().invoke(app, ["status", "-j", str(path)], env=env)
    assert shown.exit_code == 0, shown.output
    assert "journal left behind: journal" in shown.output
    assert "it held 2 queued event(s)" in shown.output
