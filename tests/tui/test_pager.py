"""The pager (v, or Enter where it is free): a value whole, searched, copied through OSC 52,
and esc back to where the operator was. Driven by Pilot over the frozen scene (a dead letter
with a long payload, the runs and steps, the timeline) and over the real demo (a process's
status from the control plane)."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from promptui.app import ControlRoom
from promptui.screens.detail import ProcessDetailScreen
from promptui.screens.help import HelpScreen
from promptui.screens.pager import PagerScreen
from promptui.screens.rewind_dialog import RewindPreview
from promptui.screens.run_steps import RunStepsDialog
from promptui.screens.timeline import TimelineScreen
from promptui.widgets.pager_text import display_lines, find, value_text, wrap
from promptui.widgets.pager_view import PagerView
from promptui.widgets.show_value import ShowValue
from runtime_core import AgentRuntime
from runtime_core.control import DeadLetterView
from tests.helpers import scenes
from tests.helpers.polling import until
from tests.helpers.room import demo_app, notes, rows, screen_text, select
from tests.helpers.scenes import scene_app

LONG = {"batch": "2026-05-27", "customers": [f"c-{1000 + i}" for i in range(60)],
        "expr": "f(x", "note": "charge " + "and charge again " * 40 + "the end"}
LETTER = DeadLetterView("d1d2d3d4d5d6", "cron", "retries exhausted", "card API timed out", 3,
                        "2026-05-28T20:20:00+00:00", json.dumps(LONG))


@pytest.fixture
def long_payload(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scene's first dead letter carries a long payload (60 customers, a 700-char note)."""
    detail = replace(scenes.DETAIL, dead_letters=(LETTER, *scenes.DETAIL.dead_letters[1:]))
    monkeypatch.setattr(scenes, "DETAIL", detail)


def pager_of(app: ControlRoom) -> PagerScreen:
    assert isinstance(app.screen, PagerScreen)
    return app.screen


def status(app: ControlRoom) -> str:
    return str(app.screen.query_one("#pager-status").render())


async def open_tab(app: ControlRoom, pilot: Pilot[Any], tab: str) -> ProcessDetailScreen:
    """payments-sync's detail screen at tab ``tab`` (the scene is pumped by hand)."""
    await pilot.pause()
    await app.pump()
    app.open_process("payments-sync")
    await until(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
    screen = app.screen
    assert isinstance(screen, ProcessDetailScreen)
    await app.pump()
    await pilot.press(tab)
    await app.pump()
    await pilot.pause()
    return screen


@pytest.mark.slow
async def test_enter_on_a_dead_letter_shows_the_long_payload_whole(long_payload: None) -> None:
    app = scene_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_tab(app, pilot, "3")
        await pilot.press("down", "up")  # the first letter, the cursor moved there by hand
        assert screen.table("dead").cursor_key == "d1d2d3d4d5d6"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        pager = pager_of(app)
        data = json.loads(pager.text)
        # The whole dead letter, read from the control plane (the row has a preview only).
        assert data["event"]["payload"] == LONG  # pretty JSON, nested
        assert data["reason"] == "retries exhausted" and data["attempts"] == 3
        assert data["error"] == "card API timed out"
        assert list(data) == ["event", "reason", "error", "attempts",
                              "dead_lettered_at"]  # keys in their order
        assert pager.text.startswith('{\n  "event"')  # indent 2
        text = screen_text(app)
        assert "Dead letter d1d2d3d4 of payments-sync" in text and '"event_id"' in text
        body = pager.query_one(PagerView)
        # every character is on some row: the 700-character note is wrapped, never cut
        note_line = next(i for i, line in enumerate(body.lines) if '"note"' in line)
        pieces = [body.lines[r.line][r.start:r.end] for r in body.rows if r.line == note_line]
        assert len(pieces) > 5 and "".join(pieces) == body.lines[note_line]
        assert "…" not in pager.text
        await pilot.press("G")  # the bottom: the end of the value is on screen
        await until(pilot, lambda: "100%" in status(app))
        assert "}" in screen_text(app).splitlines()[-3]
        await pilot.press("g")
        await until(pilot, lambda: status(app).startswith("rows 1-"))
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        assert screen.active_tab == "dead" and screen.table("dead").cursor_key == "d1d2d3d4d5d6"


@pytest.mark.slow
async def test_search_finds_and_n_N_step_through_the_matches(long_payload: None) -> None:
    app = scene_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await open_tab(app, pilot, "3")
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        body = app.screen.query_one(PagerView)
        await pilot.press("slash")
        box = app.screen.query_one("#pager-search", Input)
        assert box.display and box.has_focus
        await pilot.press(*"C-10[0-9]5", "enter")  # a regex, any case: c-1005 ... c-1055
        await until(pilot, lambda: "match 1/6" in status(app))
        assert not box.display and body.has_focus
        assert [body.lines[m.line][m.start:m.end] for m in body.matches] == [
            f"c-10{i}5" for i in range(6)]
        await pilot.press("n")
        await until(pilot, lambda: "match 2/6" in status(app))
        current = body.matches[body.current]
        row = body.row_of(current.line, current.start)
        assert body.top_row <= row < body.top_row + body.page_rows  # scrolled into view
        assert '"c-1015"' in screen_text(app)
        await pilot.press("N", "N")  # back past the first: round to the last
        await until(pilot, lambda: "match 6/6" in status(app))
        assert '"c-1055"' in screen_text(app)
        await pilot.press("slash")  # the last search comes back, selected: typing replaces
        assert box.value == "C-10[0-9]5"
        await pilot.press(*"f(x", "enter")  # not a valid regex: searched as plain text
        await until(pilot, lambda: "match 1/1" in status(app))
        await pilot.press("slash", *"nowhere", "enter")
        await until(pilot, lambda: "no match for 'nowhere'" in status(app))
        await pilot.press("n")
        assert "no match for 'nowhere'" in notes(app)


@pytest.mark.slow
async def test_y_copies_the_value_and_Y_the_id_through_osc_52(long_payload: None) -> None:
    app = scene_app()
    async with app.run_test(size=(120, 40)) as pilot:
        written: list[str] = []
        driver = app._driver
        assert driver is not None
        write = driver.write

        def spy(data: str) -> None:
            written.append(data)
            write(data)

        driver.write = spy  # type: ignore[method-assign]
        await open_tab(app, pilot, "3")
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        text = pager_of(app).text
        await pilot.press("y")
        await until(pilot, lambda: app.clipboard == text)
        osc = f"\x1b]52;c;{base64.b64encode(text.encode()).decode()}\a"
        assert osc in written  # the terminal's clipboard, over SSH and through tmux
        assert f"copied {len(text):,} characters (the value)" in notes(app)
        await pilot.press("Y")
        await until(pilot, lambda: app.clipboard == "d1d2d3d4d5d6")
        assert "copied 12 characters (the id)" in notes(app)
        await pilot.press("escape")
        app.post_message(ShowValue("A note", "no id here"))
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        await pilot.press("Y")
        assert app.clipboard == "d1d2d3d4d5d6"  # nothing copied
        assert "this value has no id to copy; y copies the value" in notes(app)


@pytest.mark.slow
async def test_esc_leaves_the_search_first_and_q_closes_the_pager_not_the_room() -> None:
    app = scene_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_tab(app, pilot, "5")  # context: Enter is free here too
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        assert "Context customers_charged of payments-sync" in screen_text(app)
        assert pager_of(app).text == "3"
        await pilot.press("slash", "q")  # typed into the search box, not a command
        box = app.screen.query_one("#pager-search", Input)
        assert box.value == "q" and isinstance(app.screen, PagerScreen)
        await pilot.press("escape")
        assert not box.display and isinstance(app.screen, PagerScreen)
        await pilot.press("q")
        await until(pilot, lambda: app.screen is screen)
        assert app.is_running


@pytest.mark.slow
async def test_v_on_a_run_shows_the_run_and_v_on_a_step_shows_the_step() -> None:
    app = scene_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_tab(app, pilot, "4")
        table = screen.table("runs")
        table.move_cursor(row=table.keys.index("66aa55bb44cc"))
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        run = json.loads(pager_of(app).text)
        assert run["run_id"] == "66aa55bb44cc" and run["reply"] == "Charged 3 customers"
        assert run["steps"][1]["result"] == {"plan": "pro", "card": "visa ****4242"}
        assert pager_of(app).ident == "66aa55bb44cc"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        await pilot.press("enter")  # Enter keeps its job: the run's steps
        await until(pilot, lambda: isinstance(app.screen, RunStepsDialog))
        dialog = app.screen
        await pilot.press("down", "v")  # the second step, whole (Enter: its journal entry)
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        step = json.loads(pager_of(app).text)
        assert step["name"] == "lookup_customer" and step["args"] == {"customer": "c-1042"}
        assert step["result"] == {"plan": "pro", "card": "visa ****4242"}
        assert pager_of(app).ident == "66aa55bb44cc:2"  # the step's idempotency key
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is dialog)
        await pilot.press("up", "v")  # the first step
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        assert json.loads(pager_of(app).text)["kind"] == "model"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is dialog)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)


@pytest.mark.slow
async def test_v_on_a_journal_entry_and_enter_still_previews_a_rewind() -> None:
    app = scene_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await open_tab(app, pilot, "1")
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, TimelineScreen) and app.screen.loaded)
        timeline = app.screen
        await pilot.press("down", "v")
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        entry = json.loads(pager_of(app).text)
        assert entry["seq"] == scenes.JOURNAL_SIZE - 1
        # The entry whole, read from the control plane: its data, not only its summary line.
        assert entry["data"] == {"summary": scenes.scene_entry(scenes.JOURNAL_SIZE - 1).summary}
        assert pager_of(app).ident == f"payments-sync:{scenes.JOURNAL_SIZE - 1}"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is timeline)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RewindPreview))


@pytest.mark.slow
async def test_the_pager_keys_are_in_help_and_in_the_palette() -> None:
    app = scene_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await open_tab(app, pilot, "3")
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Search", "Next match", "Previous match", "Copy", "Copy id", "Close"):
            assert title in titles, title
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert isinstance(app.screen, HelpScreen)
        ids = [row[2] for row in app.screen.rows()]
        for ident in ("close", "search", "next", "previous", "copy", "copy_id", "top",
                      "bottom", "page_down"):
            assert f"promptui.pager.{ident}" in ids, ident
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))


@pytest.mark.slow
async def test_v_on_the_dashboard_shows_the_process_and_its_status(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "health-checker" in rows(app))
        await select(app, pilot, "health-checker")
        dashboard = app.screen
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        data = json.loads(pager_of(app).text)
        assert data["summary"]["name"] == "health-checker"
        assert data["status"]["name"] == "health-checker"  # the control plane's status()
        assert "invocation_count" in data["status"] and "triggers" in data["status"]
        assert "Process health-checker" in screen_text(app)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is dashboard)
        await pilot.press("q")


def test_the_text_a_value_becomes() -> None:
    assert value_text("plain\ttext") == "plain\ttext"  # a string as it is (y copies it so)
    assert value_text({"b": 1, "a": [1, None]}) == (
        '{\n  "b": 1,\n  "a": [\n    1,\n    null\n  ]\n}')  # indent 2, keys in order
    lines = display_lines("a\tb\x1b[31mred\r\nsecond")
    assert lines == ["a    b␛[31mred", "second"]  # no escape sequence reaches the terminal
    rows = wrap(["word " * 10, ""], 12)
    assert ["word " * 10][0] == "".join(("word " * 10)[r.start:r.end] for r in rows[:-1])
    assert all(r.end - r.start <= 12 for r in rows) and rows[-1].line == 1
    assert [(m.start, m.end) for m in find(["f(x) and F(X)"], "f(x")] == [(0, 3), (9, 12)]
