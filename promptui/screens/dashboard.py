"""The dashboard: the process table, the selected process's queue and event-rate sparklines,
the anomaly feed and the activity log."""

from __future__ import annotations

from textual import events, on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import DataTable, Footer, Input, Label, Sparkline

from promptui.actions import DASHBOARD_ACTIONS, bindings
from promptui.format import clip
from promptui.screens.base import (
    LiveScreen,
    OpenInbox,
    OpenIncidents,
    OpenProcess,
    OpenPulse,
    OpenTimeline,
    ShowValue,
    drill_down,
    view_line,
)
from promptui.store import ActivityLine, FeedLine, UIStore
from promptui.widgets.feeds import ActivityLog, AnomalyFeed, FollowLog
from promptui.widgets.header import StatusHeader
from promptui.widgets.process_table import ProcessTable
from promptui.widgets.view_values import process_value


class DashboardScreen(LiveScreen):
    ACTIONS = DASHBOARD_ACTIONS
    BINDINGS = bindings(DASHBOARD_ACTIONS)
    _kept_and_left = False  # the filter box's Enter kept the filter and sent the focus away
    _focus_table_on_resume = False  # a `:` jump: the table takes the focus back from a feed

    def compose(self) -> ComposeResult:
        yield StatusHeader(id="header")
        yield ProcessTable(id="processes")
        with Horizontal(id="sparks"):
            yield Label("", id="spark-label")
            yield Sparkline([], id="queue-spark")
            yield Sparkline([], id="rate-spark")
        with Horizontal(id="feeds"):
            yield AnomalyFeed(id="feed")
            yield ActivityLog(id="activity")
        yield Input(placeholder="filter: regex on name or state, !re inverts; enter keeps, "
                    "esc clears", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self.query_one(ProcessTable).focus()

    @property
    def table(self) -> ProcessTable:
        return self.query_one(ProcessTable)

    @property
    def feed(self) -> AnomalyFeed:
        return self.query_one(AnomalyFeed)

    def current_process(self) -> str | None:
        return self.table.selected_name

    def show_process(self, name: str) -> None:
        """Put the table's cursor on ``name`` and the focus on the table (a `:` jump): Enter
        then opens that process, whatever panel had the focus before. A filter that hides it
        is cleared."""
        table = self.table
        if name not in table.keys:
            self.action_clear_filter()
        table.select(name)
        # Now, and again when this screen resumes (the prompt that asked may still be on top:
        # its closing must not hand the focus back to a feed).
        self._focus_table_on_resume = True
        self.set_focus(table)
        self.call_after_refresh(self.set_focus, table)

    # -- the pump writes here (only while this screen is active) -------------------------
    async def show(self, store: UIStore, now: float, feed: list[FeedLine],
                   activity: list[ActivityLine]) -> None:
        if not self.query(AnomalyFeed):
            return  # not composed yet; the store keeps everything for replay()
        control = self.room.control
        self.query_one(StatusHeader).show(control.name, store, now, control.read_only,
                                          control.link)
        self.table.sync(store.processes, now)
        self.feed.add(feed)
        self.query_one(ActivityLog).add(activity)
        self._show_sparks(store)

    def _show_sparks(self, store: UIStore) -> None:
        name = self.table.selected_name
        label = self.query_one("#spark-label", Label)
        queue = self.query_one("#queue-spark", Sparkline)
        rate = self.query_one("#rate-spark", Sparkline)
        if name is None or name not in store.processes:
            label.update("no process selected", layout=False)  # a fixed 26x2 box
            queue.data, rate.data = [], []
            return
        queue_points = list(store.queue_history.get(name, ()))
        rate_points = list(store.rate_history.get(name, ()))
        now_rate = rate_points[-1] if rate_points else 0.0
        label.update(f"{clip(name, 24)}\nqueue {store.processes[name].queue_depth:<4} "
                     f"· {now_rate:5.1f} ev/s", layout=False)
        queue.data, rate.data = queue_points, rate_points

    def on_screen_resume(self) -> None:
        if self._focus_table_on_resume:
            self._focus_table_on_resume = False
            self.set_focus(self.table)
        self.replay(self.room.store)

    def replay(self, store: UIStore) -> None:
        """Refill the logs from the store after another screen was on top (a held log keeps
        what the operator is reading; it follows again with end or F)."""
        feed, activity = list(store.feed)[-200:], list(store.activity)[-200:]
        self.feed.reset([AnomalyFeed.render_line_text(line) for line in feed], feed)
        self.query_one(ActivityLog).reset(
            [ActivityLog.render_line_text(line) for line in activity], activity)

    @on(FollowLog.Chosen)
    def _line_chosen(self, event: FollowLog.Chosen) -> None:
        """Enter on a feed or activity line: drill down to its process (at its run)."""
        event.stop()
        drill_down(self, event.item)

    @on(FollowLog.Viewed)
    def _line_viewed(self, event: FollowLog.Viewed) -> None:
        event.stop()
        view_line(self, event.item, event.text)

    @on(DataTable.RowHighlighted)
    def _selection_moved(self) -> None:
        self._show_sparks(self.room.store)

    @on(DataTable.RowSelected)
    def _row_chosen(self) -> None:
        self.action_open_process()

    # -- actions ---------------------------------------------------------------------------
    def action_open_process(self) -> None:
        name = self.current_process()
        if name is not None:
            self.post_message(OpenProcess(name))

    def action_timeline(self) -> None:
        """w: the selected process's journal timeline, as from its detail screen."""
        name = self.current_process()
        if name is not None:
            self.post_message(OpenTimeline(name))

    def action_view(self) -> None:
        """v: the process whole, its table row and its status (read now, not cut to fit)."""
        name = self.current_process()
        if name is None:
            return
        self.run_worker(self._view(name), group="view", exclusive=True)

    async def _view(self, name: str) -> None:
        try:
            status: object = await self.room.control.process_status(name)
        except Exception as exc:  # gone, or a remote that went away: show what we have
            status = f"cannot read its status: {exc}"
        row = self.room.store.processes.get(name)
        self.post_message(ShowValue(f"Process {name}", process_value(row, status), name))

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.select_on_focus = False  # opened again: the kept filter, to edit, not to retype
        box.focus()
        box.cursor_position = len(box.value)

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        error = self.table.set_filter(event.value)
        self.room.store.process_filter.set(event.value)  # the live tail shows the same
        event.input.border_subtitle = error or ""

    @on(Input.Submitted, "#filter")
    def _filter_kept(self, event: Input.Submitted) -> None:
        if self._kept_and_left:
            # A second Enter typed before the focus left the box (`/flaky` Enter Enter, fast or
            # pasted) reaches the box, not the table: it means the table's Enter, open the row.
            self._kept_and_left = False
            self.action_open_process()
            return
        self._kept_and_left = True
        event.input.display = bool(event.value)
        self.table.focus()

    @on(events.DescendantFocus)
    def _focus_moved(self, event: events.DescendantFocus) -> None:
        if event.widget.id == "filter":  # back in the box: its next Enter keeps again
            self._kept_and_left = False

    def action_clear_filter(self) -> None:
        if self.maximized is not None:  # Esc first puts a maximised panel back
            self.minimize()
            return
        box = self.query_one("#filter", Input)
        if box.display or self.table.filter_text:
            box.value = ""
            box.display = False
            self.table.set_filter("")
            self.room.store.process_filter.set("")
            self.table.focus()

    def action_sort(self) -> None:
        self.notify(f"sorted by {self.table.cycle_sort()}", timeout=2)

    def action_sort_reverse(self) -> None:
        if self.table.sort_column is None:
            self.table.cycle_sort("name")
        self.notify(f"sorted by {self.table.cycle_sort(self.table.sort_column)}", timeout=2)

    def action_incidents(self) -> None:
        self.post_message(OpenIncidents())

    def action_pulse(self) -> None:
        self.post_message(OpenPulse())

    def action_inbox(self) -> None:
        self.post_message(OpenInbox())

    def action_live_tail(self) -> None:
        from promptui.screens.live_tail import LiveTailScreen  # loaded when first opened

        self.app.push_screen(LiveTailScreen())

    def action_nodes(self) -> None:
        from promptui.screens.nodes import NodesScreen  # loaded when first opened

        self.app.push_screen(NodesScreen())

    def action_toggle_maximize(self) -> None:
        """z: the focused panel (the table, Anomalies, Activity) takes the whole screen; z
        again (or Esc) puts it back (btop, lazygit)."""
        if self.maximized is not None:
            self.minimize()
            return
        focused = self.focused
        if isinstance(focused, ProcessTable | FollowLog):
            self.maximize(focused, container=False)

    def action_pause_feed(self) -> None:
        paused = self.feed.toggle_pause()
        self.notify("anomaly feed paused" if paused else "anomaly feed resumed", timeout=2)
