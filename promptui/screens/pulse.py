"""Pulse: the last hour by the minute, for every process together and for each one (runs per
minute, failures, p50/p95 run time, queue depth, tokens and cost). Opening it reads the hour
from the journal (``ControlPlane.pulse``: there after a restart or an attach); the store folds
the pump's events on top of it, so it stays live. Enter opens a process's detail."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Footer, ListItem, ListView, Static

from promptui.actions import PULSE_ACTIONS, bindings
from promptui.screens.base import LiveScreen, OpenProcess
from promptui.store import ActivityLine, FeedLine, UIStore
from promptui.widgets.charts import ALL, WIDE_COLUMNS, ChartHeader, PulseRow, series_of
from runtime_core.control.plane import ControlError
from runtime_core.control.pulse import PulseBuckets

REDRAW_SECONDS = 1.0  # minutes move slowly: redraw once a second, not every tick


class PulseScreen(LiveScreen):
    CSS_PATH = "pulse.tcss"
    ACTIONS = PULSE_ACTIONS
    BINDINGS = bindings(PULSE_ACTIONS)

    def __init__(self) -> None:
        super().__init__()
        self.loaded = False  # the journal's hour has been read (tests wait on it)
        self.problem = ""  # why the journal could not be read, when it could not
        self._rows: dict[str, PulseRow] = {}
        self._drawn_at: float | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("Pulse", style="bold"), id="pulse-title")
        yield ChartHeader(id="pulse-header")
        yield ListView(id="pulse-rows")
        yield Footer()

    def on_mount(self) -> None:
        self.rows.focus()
        self.watch(self.rows, "scroll_y", self._scrolled, init=False)

    def on_resize(self) -> None:
        self._scrolled()  # every series from 120 columns, the essentials below
        self.run_worker(self._read_journal(), group="pulse-read", exclusive=True)

    @property
    def rows(self) -> ListView:
        return self.query_one("#pulse-rows", ListView)

    def current_process(self) -> str | None:
        item = self.rows.highlighted_child
        process = item.name if item is not None else None
        return process if process and process != ALL else None

    async def _read_journal(self) -> None:
        """The hour so far, from every process's journal, under what the store folded."""
        store = self.room.store
        try:
            views = await self.room.control.pulse()
        except ControlError as exc:
            self.problem = f"the journal's hour cannot be read: {exc}; showing what this " \
                           "room saw since it opened"
        except Exception as exc:  # a remote that went away: say so, stay live
            self.problem = f"cannot read the journal's hour: {exc}"
        else:
            for view in views:
                store.pulse_of(view.process).seed(view)
            store.pulse_all = PulseBuckets.combined(  # once: then folded live by the store
                ALL, [store.pulse_of(view.process) for view in views])
        self.loaded = True
        if self.is_attached:
            self.draw(store, self.room.clock())

    async def show(self, store: UIStore, now: float, feed: list[FeedLine],
                   activity: list[ActivityLine]) -> None:
        if self._drawn_at is not None and 0 <= now - self._drawn_at < REDRAW_SECONDS:
            return
        self.draw(store, now)

    def draw(self, store: UIStore, now: float) -> None:
        """One row for all processes, then one per process in name order. Only the rows in
        sight are drawn (a row is one line): 200 processes are 1,400 charts, and redrawing
        those out of sight every second starved the event loop (bench/tui_load.py --screen
        pulse); a row scrolled into sight is drawn then."""
        self._drawn_at = now
        names = sorted(store.processes)
        parts = [store.pulse_of(name) for name in names]
        self._sync_rows([ALL, *names])
        every = store.pulse_all
        top = round(self.rows.scroll_offset.y)
        bottom = top + (self.rows.size.height or len(names) + 1)  # not laid out yet: all
        wide = self.size.width >= WIDE_COLUMNS
        self.query_one(ChartHeader).show(wide)
        for index, (name, buckets) in enumerate(((ALL, every), *zip(names, parts, strict=True))):
            if top - 1 <= index <= bottom:
                self._rows[name].show(series_of(buckets, now), buckets.cost_recorded, wide)
        self._draw_title(len(names), every.cost_recorded)

    def _scrolled(self) -> None:
        if self._drawn_at is not None:  # rows come into sight: draw them now
            self.draw(self.room.store, self.room.clock())

    def _sync_rows(self, names: list[str]) -> None:
        for gone in [n for n in self._rows if n not in names]:
            row = self._rows.pop(gone)
            if isinstance(row.parent, ListItem):
                row.parent.remove()
        for name in names:
            if name not in self._rows:
                row = self._rows[name] = PulseRow(name)
                self.rows.append(ListItem(row, name=name))
        if self.rows.index is None:  # the first rows: the cursor starts on "all"
            self.call_after_refresh(self._first_row)

    def _first_row(self) -> None:
        if self.rows.index is None and self.rows.children:
            self.rows.index = 0

    def _draw_title(self, processes: int, cost_recorded: bool) -> None:
        title = Text("Pulse", style="bold")
        title.append(f" · the last hour by the minute · {processes} processes", style="dim")
        if not self.loaded:
            title.append(" · reading the journal…", style="dim")
        if not cost_recorded:
            title.append(" · cost: not recorded by these models", style="dim")
        if self.problem:
            title.append(f"\n⚠ {self.problem}", style="yellow")
        self.query_one("#pulse-title", Static).update(title)

    # -- actions -----------------------------------------------------------------------------
    @on(ListView.Selected, "#pulse-rows")
    def _chosen(self) -> None:
        self.action_open_process()

    def action_open_process(self) -> None:
        name = self.current_process()
        if name is None:
            self.notify("the all-processes row has no detail: pick a process", timeout=3)
            return
        self.post_message(OpenProcess(name))

    def action_back(self) -> None:
        self.app.pop_screen()
