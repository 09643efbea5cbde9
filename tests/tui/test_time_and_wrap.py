"""Time you can read and long lines (issue 36): one time format, absolute (local date and time)
or relative ("3 min ago"), that the `a` key toggles on every screen at once and the config
file remembers; the pager prints known time fields as times, never epoch floats; `w` wraps or
cuts long lines in the pager and the live tail; an attached room says when it lost the server
and when it is back."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from promptui.format import relative, when, with_times
from promptui.screens.live_tail import LiveTailScreen, TailLog
from promptui.screens.pager import PagerScreen
from promptui.settings import load_settings, save_setting
from promptui.store import ActivityLine
from promptui.widgets.feeds import DATED_WIDTH, ActivityLog, AnomalyFeed
from promptui.widgets.pager_view import PagerView
from promptui.widgets.show_value import ShowValue
from tests.helpers.polling import until
from tests.helpers.room import notes
from tests.helpers.scenes import NOW, scene_app

# A moment of yesterday and one of today, in local time, seen from NOW-like clocks.
NOON = time.mktime((2026, 12, 6, 12, 0, 0, 0, 0, -1))


def test_one_function_writes_a_moment_in_either_format() -> None:
    assert when(NOON, "iso", NOON + 5) == "2026-12-06 12:00:00"
    assert when(NOON, "iso", NOON + 5, narrow=True) == "12:00:00"  # today: the date goes
    assert when(NOON - 86400, "iso", NOON, narrow=True) == "12-05 12:00"  # another day: kept
    assert when(NOON, "relative", NOON + 190) == "3 min ago"
    assert when(NOON + 2, "relative", NOON) == "in 2 s"  # a deadline
    assert relative(NOON, NOON + 0.2) == "now"
    assert relative(NOON, NOON + 7200) == "2 h ago"
    assert relative(NOON, NOON + 3 * 86400) == "3 d ago"


def test_known_time_fields_read_as_times_with_the_raw_number_kept() -> None:
    value = {"ts": NOON + 0.25, "n": NOON, "nested": [{"created_at": NOON}],
             "since": "not a number", "at": True}
    shown = with_times(value, "iso", NOON + 60)
    assert shown["ts"] == f"2026-12-06 12:00:00 [{NOON + 0.25!r}]"
    assert shown["n"] == NOON  # not a time field: as it is
    assert shown["nested"][0]["created_at"].startswith("2026-12-06 12:00:00 [")
    assert shown["since"] == "not a number" and shown["at"] is True
    assert with_times(value, "relative", NOON + 60)["ts"].startswith("59 s ago, 2026-12-06")


def test_the_choice_is_written_to_the_config_file_keeping_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("# mine\ntheme = \"promptui-light\"\n\n[keymap]\n\"promptui.quit\" = \"q\"\n")
    save_setting("time_format", "relative", path)
    assert load_settings(path).time_format == "relative"
    save_setting("time_format", "iso", path)
    text = path.read_text()
    assert text.count("time_format") == 1 and "# mine" in text and "[keymap]" in text
    settings = load_settings(path)
    assert (settings.time_format, settings.theme) == ("iso", "promptui-light")
    save_setting("time_format", "relative", tmp_path / "new" / "config.toml")
    assert load_settings(tmp_path / "new" / "config.toml").time_format == "relative"


async def test_the_time_key_retimes_the_feeds_at_once_and_remembers(tmp_path: Path) -> None:
    app = scene_app()
    app._settings_path = tmp_path / "config.toml"  # the CLI passes the user's config file
    async with app.run_test(size=(120, 40)) as pilot:
        await app.pump()
        feed, activity = app.screen.query_one(AnomalyFeed), app.screen.query_one(ActivityLog)
        await until(pilot, lambda: feed.line_count > 0 and activity.line_count > 0,
                    what="the scene's feed lines")
        first = feed.item_at(0)
        assert feed.size.width < DATED_WIDTH  # half of 120 columns: today's date left out
        assert feed.lines[0].startswith(when(first.at, "iso", NOW, narrow=True) + " ▲")
        await pilot.press("a")
        assert app.store.time_mode == "relative"
        assert feed.lines[0].startswith(when(first.at, "relative", NOW))
        assert " ago " in activity.lines[0] or activity.lines[0].startswith("now ")
        assert any("times: relative" in note for note in notes(app))
        assert load_settings(tmp_path / "config.toml").time_format == "relative"
        await pilot.press("a")
        assert feed.lines[0].startswith(when(first.at, "iso", NOW, narrow=True) + " ▲")
        await pilot.press("L")  # the live tail, 120 columns wide: dated
        await until(pilot, lambda: isinstance(app.screen, LiveTailScreen))
        tail = app.screen.query_one(TailLog)
        await until(pilot, lambda: tail.line_count > 0, what="the tail's lines")
        assert tail.size.width >= DATED_WIDTH
        assert tail.lines[0].startswith(when(tail.item_at(0).at, "iso", NOW))
        assert load_settings(tmp_path / "config.toml").time_format == "iso"


async def test_the_pager_prints_times_not_epoch_floats_and_toggles_them() -> None:
    app = scene_app()
    entry = {"seq": 7, "ts": NOW - 180.5, "data": {"created_at": NOW - 3600}}
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(ShowValue("Journal entry #7", entry, "e7"))
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        pager = app.screen
        assert isinstance(pager, PagerScreen)
        shown = when(NOW - 180.5, "iso", NOW)
        assert f'"ts": "{shown} [{NOW - 180.5!r}]"' in pager.text
        assert f'"ts": {NOW - 180.5!r}' not in pager.text  # never a bare epoch float
        await pilot.press("a")  # the room's key works in the pager too, and retimes it
        assert app.store.time_mode == "relative"
        assert '"ts": "3 min ago, ' in pager.text
        assert any("3 min ago" in line for line in pager.body.lines)


async def test_w_cuts_the_pagers_long_lines_and_wraps_them_again() -> None:
    app = scene_app()
    value = {"note": "word " * 100}
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(ShowValue("Long", value))
        await until(pilot, lambda: isinstance(app.screen, PagerScreen))
        body = app.screen.query_one(PagerView)
        await until(pilot, lambda: len(body.rows) > len(body.lines), what="wrapped rows")
        await pilot.press("w")
        assert not body.wrapped and len(body.rows) == len(body.lines)  # one row per line
        assert body.virtual_size.width > body.scrollable_content_region.width
        await pilot.press("right")
        await until(pilot, lambda: body.scroll_x > 0, what="scrolled sideways")
        await pilot.press("w")
        assert body.wrapped and len(body.rows) > len(body.lines)


async def test_w_wraps_the_live_tails_long_lines_and_cuts_them_again() -> None:
    app = scene_app()
    long_text = "step " + "x" * 60 + " " + "y" * 100 + " end"
    async with app.run_test(size=(80, 24)) as pilot:
        for n in range(3):
            app.store.tail.append(ActivityLine(NOW - n, "worker", "run.step", f"{n} {long_text}"))
            app.store.tail_count += 1
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, LiveTailScreen))
        log = app.screen.query_one(TailLog)
        await until(pilot, lambda: log.line_count == 3, what="three cut lines")
        await pilot.press("w")
        assert log.wrapped and log.line_count > 3
        width = log.scrollable_content_region.width
        assert all(len(line) <= width for line in log.lines)
        assert log.lines[-1].rstrip().endswith("end")  # nothing lost at the edge
        assert {id(log.item_at(i)) for i in range(log.line_count)} == {
            id(item) for item in app.store.tail}  # each row stands for its line
        await pilot.press("w")
        assert not log.wrapped and log.line_count == 3


async def test_an_attached_room_says_when_it_lost_the_server_and_when_it_is_back() -> None:
    app = scene_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.pump()
        app.control.link_problem = "cannot reach 127.0.0.1:9: connection refused"  # type: ignore[attr-defined]
        await app.pump()
        await until(pilot, lambda: any("lost the server at" in n for n in notes(app)))
        assert any("retrying" in n and "connection refused" in n for n in notes(app))
        app.control.link_problem = ""  # type: ignore[attr-defined]
        await app.pump()
        await until(pilot, lambda: any(n.startswith("reconnected after") for n in notes(app)))


@pytest.mark.parametrize("mode", ["iso", "relative"])
def test_the_feed_colours_its_mark_whatever_the_time_width(mode: str) -> None:
    from rich.text import Text

    from promptui.widgets.feeds import SeverityHighlighter

    line = f"{when(NOON, mode, NOON + 200)} ✖ worker: failed"  # type: ignore[arg-type]
    text = Text(line)
    SeverityHighlighter().highlight(text)
    marked = [span for span in text.spans if str(span.style) == "bold red"]
    assert marked and line[marked[0].start:marked[0].end] == "✖ worker"
