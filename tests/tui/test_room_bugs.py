"""Issue 18's control-room bugs, each driven the way an operator met it: the too-small screen
one resize behind, a read-only badge cut off at 80 columns and footer keys that only refuse,
the inject dialog's pre-filled payload and double Esc, the Config tab's ``raise_`` and the `:`
jump to a process."""

from __future__ import annotations

import pytest
from textual.widgets import Button, Footer, Input, TextArea

from promptui.app import ControlRoom
from promptui.screens.dashboard import DashboardScreen
from promptui.screens.detail import ProcessDetailScreen
from promptui.screens.dialogs import InjectDialog
from promptui.screens.help import TooSmallScreen
from promptui.screens.jump import JumpPrompt, completion, matching
from promptui.widgets.header import StatusHeader
from runtime_core import AgentRuntime, ProcessConfig
from tests.helpers.polling import until
from tests.helpers.room import DEMO, demo_app, notes, rows, select, table_of


def too_small_text(app: ControlRoom) -> str:
    return str(app.screen.query_one("#too-small-text").render())


@pytest.mark.slow
async def test_the_too_small_screen_follows_every_resize(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        assert not isinstance(app.screen, TooSmallScreen)
        await pilot.resize_terminal(70, 20)
        await until(pilot, lambda: isinstance(app.screen, TooSmallScreen), what="too small")
        await until(pilot, lambda: "70x20" in too_small_text(app))
        await pilot.resize_terminal(60, 18)
        await until(pilot, lambda: "60x18" in too_small_text(app))
        await pilot.resize_terminal(100, 30)
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="dashboard")
        await pilot.resize_terminal(79, 30)  # one column short is too small at once
        await until(pilot, lambda: isinstance(app.screen, TooSmallScreen))
        await until(pilot, lambda: "79x30" in too_small_text(app))
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        assert all(not isinstance(s, TooSmallScreen) for s in app.screen_stack)


# -- read-only: the badge always shows; the footer offers only what works ---------------------
def screen_lines(app: ControlRoom) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def footer_actions(app: ControlRoom) -> set[str]:
    """The actions the footer offers (what Textual's Footer draws: shown bindings)."""
    return {b.binding.action for b in app.screen.active_bindings.values() if b.binding.show}


@pytest.mark.slow
async def test_read_only_at_80_columns_shows_the_badge_and_hides_the_refused_keys(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.store.counts_by_state().get("running") == 7)
        await select(app, pilot, "demo-feeder")
        await until(pilot, lambda: screen_lines(app)[0].startswith(" READ-ONLY "),
                    what="the badge at the head of the header")
        assert "READ-ONLY" in str(app.screen.query_one(StatusHeader).render())
        assert app.screen.query_one(Footer) is not None
        # Textual's Footer recomposes after a focus change, so its line is blank for a frame.
        await until(pilot, lambda: "Help" in screen_lines(app)[-1], what="the footer drawn")
        footer = screen_lines(app)[-1]
        assert "Start/stop" not in footer and "Suspend" not in footer \
            and "Inject" not in footer
        assert "Help" in footer and "Quit" in footer
        assert not footer_actions(app) & {"start_stop", "suspend_resume", "inject"}
        await pilot.press("s", "i")  # still bound: they say why they do nothing
        await until(pilot, lambda: len([n for n in notes(app) if "read-only" in n]) == 2)
        assert "read-only: inject is disabled (started with --read-only)" in notes(app)
        assert demo_runtime.get_process("demo-feeder").state.value == "running"
        app.open_process("demo-feeder")
        await until(pilot, lambda: not isinstance(app.screen, DashboardScreen))
        await pilot.press("3")  # the dead letters tab: r, R and x are its mutating keys
        await until(pilot, lambda: "mark" in footer_actions(app))
        assert not footer_actions(app) & {"redeliver", "redeliver_all", "clear_dead"}
        await until(pilot, lambda: "Help" in screen_lines(app)[-1], what="the footer drawn")
        assert "Redeliver" not in screen_lines(app)[-1]


@pytest.mark.slow
async def test_a_read_write_room_still_shows_every_key(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(120, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        assert {"start_stop", "suspend_resume", "inject"} <= footer_actions(app)
        assert "READ-ONLY" not in screen_lines(app)[0]


# -- the inject dialog ------------------------------------------------------------------------
def region_text(app: ControlRoom, selector: str) -> str:
    """The text the terminal shows inside ``selector``'s region, lines joined by spaces."""
    region = app.screen.query_one(selector).region
    lines = screen_lines(app)[region.y:region.bottom]
    return " ".join(line[region.x:region.right].strip() for line in lines)


@pytest.mark.slow
async def test_inject_starts_empty_replaces_on_select_all_and_closes_on_one_escape(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await select(app, pilot, "alert-handler")
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, InjectDialog))
        editor = app.screen.query_one("#payload", TextArea)
        assert editor.text == "" and '{"task": "check"}' in str(editor.placeholder)
        assert app.focused is editor
        await pilot.press(*'{"a":1}')
        await until(pilot, lambda: editor.text == '{"a":1}', what="typed, not appended")
        await pilot.press("ctrl+a", *"{b")  # select all, then typing replaces it
        await until(pilot, lambda: editor.text == "{b")
        error = ("Invalid JSON: line 1, column 2: Expecting property name enclosed in "
                 "double quotes")
        await until(pilot, lambda: region_text(app, "#payload-error") == error,
                    what="the whole error, wrapped")
        assert app.screen.query_one("#send", Button).disabled
        await pilot.press("escape")  # one Esc, though the editor has the focus
        await until(pilot, lambda: not isinstance(app.screen, InjectDialog))
        assert isinstance(app.screen, DashboardScreen)


@pytest.mark.slow
async def test_ctrl_a_selects_the_trigger_type_too(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await select(app, pilot, "alert-handler")
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, InjectDialog))
        box = app.screen.query_one("#trigger-type", Input)
        box.focus()
        await pilot.press("ctrl+a", *"webhook")
        await until(pilot, lambda: box.value == "webhook")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))


# -- the Config tab spells fields as the manifest does --------------------------------------
@pytest.mark.slow
async def test_the_config_tab_says_raise_as_the_manifest_does() -> None:
    from tests.helpers.room import demo_app as detail_app
    from tests.helpers.room import make_runtime, open_detail

    runtime = make_runtime()  # its "fail" script is one turn: {raise: ...}
    app = detail_app(runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        detail = await app.control.process_detail("worker")
        assert detail.config["model"]["scripts"]["fail"] == [
            {"raise": "boom: the upstream API said no"}]
        await open_detail(app, pilot, "worker")
        await pilot.press("8")
        await until(pilot, lambda: any("raise:" in line for line in screen_lines(app)),
                    what="the config tab")
        assert not any("raise_" in line for line in screen_lines(app))


# -- `:` jumps to a process by name --------------------------------------------------------------
def test_matching_is_a_case_insensitive_prefix_in_the_order_given() -> None:
    names = ["worker-b", "Worker-a", "web", "db"]
    assert matching(names, "WOR") == ["worker-b", "Worker-a"]
    assert matching(names, "w") == ["worker-b", "Worker-a", "web"]
    assert matching(names, "x") == []
    assert completion(names, "wor") == "worker-"  # what worker-b and Worker-a share
    assert completion(names, "we") == "web"
    assert completion(names, "w") == "w"  # nothing more in common
    assert completion(names, "x") == "x"
    assert completion(["abcd", "abxy", "abcz"], "a") == "ab"  # the least any two share


def jump_hint(app: ControlRoom) -> str:
    return str(app.screen.query_one("#jump-hint").render())


@pytest.mark.slow
async def test_colon_jumps_to_the_first_match_in_table_order(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await select(app, pilot, "alert-handler")
        await pilot.press("colon", *"IN")
        await until(pilot, lambda: isinstance(app.screen, JumpPrompt))
        await until(pilot, lambda: "invoice-watcher" in jump_hint(app))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await until(pilot, lambda: table_of(app).selected_name == "invoice-watcher")
        await pilot.press("colon", *"fl", "tab")  # tab completes the only match
        await until(pilot, lambda: app.screen.query_one("#jump-input", Input).value
                    == "flaky-deployer")
        await pilot.press("enter")
        await until(pilot, lambda: table_of(app).selected_name == "flaky-deployer")


@pytest.mark.slow
async def test_colon_says_when_nothing_matches_and_escape_cancels(
        demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await select(app, pilot, "looper")
        await pilot.press("colon", *"zz")
        await until(pilot, lambda: isinstance(app.screen, JumpPrompt))
        await until(pilot, lambda: "no process starts with 'zz'" in jump_hint(app))
        await pilot.press("enter")  # nothing to jump to: the prompt stays and says so
        await pilot.pause()
        assert isinstance(app.screen, JumpPrompt)
        assert "no process starts with 'zz'" in jump_hint(app)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        assert table_of(app).selected_name == "looper"


@pytest.mark.slow
async def test_colon_from_a_detail_screen_opens_that_process(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        app.open_process("looper")
        await until(pilot, lambda: isinstance(app.screen, ProcessDetailScreen))
        await pilot.press("colon", *"health", "enter")
        await until(pilot, lambda: isinstance(app.screen, ProcessDetailScreen)
                    and app.screen.process == "health-checker")
        details = [s for s in app.screen_stack if isinstance(s, ProcessDetailScreen)]
        assert len(details) == 1  # replaced, not stacked: Esc goes home
        assert table_of(app).selected_name == "health-checker"
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))


@pytest.mark.slow
async def test_colon_finds_a_process_the_filter_hides(demo_runtime: AgentRuntime) -> None:
    app = demo_app(demo_runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == DEMO)
        await pilot.press("slash", *"looper", "enter")
        await until(pilot, lambda: rows(app) == ["looper"])
        await pilot.press("colon", *"chan", "enter")
        await until(pilot, lambda: table_of(app).selected_name == "changelog")
        assert rows(app) == DEMO


@pytest.mark.slow
async def test_the_first_match_follows_the_tables_sort() -> None:
    runtime = AgentRuntime()
    for name in ("api-east", "api-west", "billing"):
        runtime.add_process(name, ProcessConfig(model={"provider": "scripted", "turns": [
            {"reply": "ok"}]}))
    app = demo_app(runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: rows(app) == ["api-east", "api-west", "billing"])
        await pilot.press("colon", *"API")
        await until(pilot, lambda: isinstance(app.screen, JumpPrompt))
        await until(pilot, lambda: "api-east (+1)" in jump_hint(app))
        await pilot.press("tab")  # completes to what the two share
        await until(pilot, lambda: app.screen.query_one("#jump-input", Input).value == "api-")
        await pilot.press("enter")
        await until(pilot, lambda: table_of(app).selected_name == "api-east")
        await pilot.press("O")  # by name, descending: api-west comes first now
        await until(pilot, lambda: rows(app) == ["billing", "api-west", "api-east"])
        await pilot.press("colon", *"api", "enter")
        await until(pilot, lambda: table_of(app).selected_name == "api-west")
