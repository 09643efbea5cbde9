"""One process up close: what runs now, its queue, dead letters, run history, context,
conversation, governance and config, one tab each (keys 1-8). The pump calls ``show`` once a
tick; only the visible tab is redrawn, by diff, from one ``process_detail`` read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane
from textual.worker import Worker

from promptui.actions import DETAIL_ACTIONS, RECONCILE, bindings
from promptui.screens.base import LiveScreen, OpenTimeline, ShowValue
from promptui.screens.dialogs import (
    clear_dead_dialog,
    redeliver_all_dialog,
)
from promptui.screens.reconcile_flow import settle_waiting
from promptui.screens.run_steps import RunStepsDialog
from promptui.screens.save_manifest import save_as_manifest
from promptui.store import ActivityLine, FeedLine, ProgressLine, UIStore
from promptui.widgets.conversation import ConversationLog
from promptui.widgets.detail_rows import (
    CONTEXT_COLS,
    DEAD_COLS,
    DEAD_PAGE,
    QUEUE_COLS,
    RUN_COLS,
    TIMELINE_COLS,
    DeadPage,
    context_rows,
    dead_rows,
    queue_rows,
    row_detail,
    run_rows,
    timeline_rows,
)
from promptui.widgets.keyed_table import KeyedTable
from promptui.widgets.live_view import LiveView
from promptui.widgets.process_table import STATE_STYLES
from promptui.widgets.process_views import config_view, governance_view
from promptui.widgets.view_values import detail_row
from runtime_core.control.plane import ControlError
from runtime_core.control.views import JournalEntryView, ProcessDetail, RunView

TIMELINE_ROWS = 50  # the tab shows the newest entries; the full timeline is `w`
# What gets the focus when a tab is picked by its number key.
TAB_FOCUS = {"live": "#live-log", "queue": "#queue-table", "dead": "#dead-table",
             "runs": "#runs-table", "context": "#context-table",
             "conversation": "#conversation-log", "governance": "#governance-scroll",
             "config": "#config-scroll", "timeline": "#timeline-table"}
VIEWABLE = frozenset({"queue", "dead", "runs", "context", "timeline"})  # v shows the row whole
DEAD_ONLY = frozenset({"mark", "redeliver", "redeliver_all", "clear_dead", "older_dead",
                       "newer_dead"})


class ProcessDetailScreen(LiveScreen):
    CSS_PATH = "detail.tcss"
    ACTIONS = DETAIL_ACTIONS
    BINDINGS = bindings(DETAIL_ACTIONS)

    def __init__(self, process: str, *, focus_run: str = "") -> None:
        super().__init__()
        self.process = process
        self.focus_run = focus_run  # a drill-down: show this run's steps once it is read
        self.detail: ProcessDetail | None = None
        self.now = 0.0
        self.gone = ""  # why the process cannot be read, when it cannot
        self.marked: set[str] = set()  # dead-letter event ids
        self.dead_page: DeadPage | None = None  # an older page; None: the newest ones
        self.timeline_entries: list[JournalEntryView] = []  # the timeline tab's rows
        self.progress: dict[str, ProgressLine] = {}  # run id -> its running tool's progress
        self._static_shown: dict[str, dict[str, Any] | None] = {}
        self._ready = False  # the pump may call show() before the tabs are mounted

    def compose(self) -> ComposeResult:
        yield Static(Text(self.process, style="bold"), id="detail-title")
        with TabbedContent(id="detail-tabs"):
            with TabPane("1 Live", id="live"):
                yield LiveView(id="live-view")
            with TabPane("2 Queue", id="queue"):
                yield KeyedTable(QUEUE_COLS, id="queue-table")
                yield Static("", id="queue-detail", classes="row-detail")
            with TabPane("3 Dead", id="dead"):
                yield KeyedTable(DEAD_COLS, id="dead-table")
                yield Static("", id="dead-detail", classes="row-detail")
            with TabPane("4 Runs", id="runs"):
                yield KeyedTable(RUN_COLS, id="runs-table")
                yield Static("", id="runs-detail", classes="row-detail")
            with TabPane("5 Context", id="context"):
                yield KeyedTable(CONTEXT_COLS, id="context-table")
                yield Static("", id="context-detail", classes="row-detail")
            with TabPane("6 Chat", id="conversation"):
                yield ConversationLog(id="conversation-log")
            with TabPane("7 Gov", id="governance"), VerticalScroll(
                    id="governance-scroll", classes="tab-scroll"):
                yield Static("", id="governance-view")
            with TabPane("8 Config", id="config"), VerticalScroll(
                    id="config-scroll", classes="tab-scroll"):
                yield Static("", id="config-view")
            with TabPane("9 Timeline", id="timeline"):
                yield KeyedTable(TIMELINE_COLS, id="timeline-table")
                yield Static(Text("enter or w: the full timeline (filter, go to a time, "
                                  "preview a rewind, fork)", style="dim"), id="timeline-detail",
                             classes="row-detail")
        yield Footer()

    def on_mount(self) -> None:
        self._ready = True
        self.query_one("#live-log").focus()

    def current_process(self) -> str | None:
        return self.process

    @property
    def active_tab(self) -> str:
        return self.query_one(TabbedContent).active

    def table(self, pane: str) -> KeyedTable:
        return self.query_one(f"#{pane}-table", KeyedTable)

    # -- the pump writes here (only while this screen is active) -------------------------
    async def show(self, store: UIStore, now: float, feed: list[FeedLine],
                   activity: list[ActivityLine]) -> None:
        if not self._ready:
            return
        try:
            detail = await self.room.control.process_detail(self.process)
        except ControlError as exc:
            self._show_gone(str(exc))
            return
        except Exception as exc:  # a remote that went away: say so, keep the room up
            self._show_gone(f"cannot read it: {exc}")
            return
        if not (self.is_attached and self.is_current):
            return  # popped or covered while we awaited
        self.detail, self.now, self.gone = detail, now, ""
        self.progress = store.progress_of(self.process)
        try:
            self._draw_title(detail)
            self._draw(self.active_tab)
            if self.active_tab == "timeline":
                await self._draw_timeline()
            if self.focus_run:
                self._open_focus_run()
        except NoMatches:  # the app is tearing the screen down under us
            return

    def _open_focus_run(self) -> None:
        """The drill-down's next step: the Runs tab at that run, and its steps."""
        run_id, self.focus_run = self.focus_run, ""
        self.show_tab("runs")
        self._draw_table("runs")
        run = self._run(run_id)
        if run is None:
            self.app.notify(f"run {run_id[:8]} is no longer among the runs kept here",
                            severity="warning", timeout=4)
            return
        table = self.table("runs")
        if run_id in table.keys:
            table.move_cursor(row=table.keys.index(run_id))
            if run.waiting_reason == "elicitation":  # a server's question: its answer dialog
                self.action_open_run()
                return
        self.app.push_screen(RunStepsDialog(self.process, run))

    async def _draw_timeline(self) -> None:
        try:
            entries = await self.room.control.journal_entries(self.process,
                                                             limit=TIMELINE_ROWS)
        except ControlError as exc:
            self.query_one("#timeline-detail", Static).update(Text(str(exc), style="yellow"))
            return
        self.timeline_entries = entries  # for v on a row
        self.table("timeline").sync(timeline_rows(entries, self.room.store.time_mode,
                                                  self.room.clock()))

    def _show_gone(self, why: str) -> None:
        self.gone = why
        if self.is_attached and self.is_current:
            self.query_one("#detail-title", Static).update(
                Text(f"⚠ {self.process}: {why} — esc goes back", style="bold red"))

    def _draw_title(self, detail: ProcessDetail) -> None:
        s = detail.summary
        text = Text(s.name, style="bold")
        text.append(f"  {s.state}", style=STATE_STYLES.get(s.state, ""))
        if s.suspend_reason:
            text.append(f" ({s.suspend_reason})", style="yellow")
        text.append(f"  queue {s.queue_depth}/{s.queue_capacity}")
        text.append(f"  dead {s.dead_letters}", style="yellow" if s.dead_letters else "")
        text.append(f"  waiting {s.waiting_runs}", style="bold red" if s.waiting_runs else "")
        text.append(f"  active {s.active_runs}  done {s.invocations}", style="dim")
        if self.room.control.read_only:
            text.append("  read-only", style="bold magenta")
        self.query_one("#detail-title", Static).update(text)

    def _draw(self, pane: str) -> None:
        """Redraw one tab from the last read; hidden tabs wait until they are shown."""
        d = self.detail
        if d is None:
            return
        if pane in ("queue", "dead", "runs", "context"):
            self._draw_table(pane)
        elif pane == "live":
            self.query_one(LiveView).show(d.runs, self.now, self.progress)
        elif pane == "conversation":
            self.query_one(ConversationLog).show(d.conversation)
        elif pane == "governance":
            self._set_static("#governance-view", d.governance, governance_view)
        elif pane == "config":
            self._set_static("#config-view", {"config": d.config, "servers": list(d.servers)},
                             config_view)

    def _set_static(self, selector: str, data: dict[str, Any],
                    render: Callable[[dict[str, Any]], Any]) -> None:
        if self._static_shown.get(selector) != data:  # redraw only on change
            self._static_shown[selector] = data
            self.query_one(selector, Static).update(render(data))

    def _draw_table(self, pane: str) -> None:
        d, now = self.detail, self.now
        if d is None:
            return
        letters = d.dead_letters if self.dead_page is None else self.dead_page.letters
        if pane == "dead":
            self.marked &= {x.event_id for x in letters}  # drop marks of rows gone
        rows = {"queue": lambda: queue_rows(d, now), "dead": lambda: dead_rows(
            letters, now, self.marked), "runs": lambda: run_rows(d, now),
            "context": lambda: context_rows(d)}[pane]()
        self.table(pane).sync(rows, ordered=pane == "runs")  # runs: waiting first, newest
        self._row_detail(pane)

    def _row_detail(self, pane: str) -> None:
        """The full text of the row under the cursor (the table cuts it to fit 80 columns)."""
        if self.detail is not None:
            self.query_one(f"#{pane}-detail", Static).update(row_detail(
                pane, self.detail, self.table(pane).cursor_key, self.marked, self.dead_page))

    def _run(self, run_id: str | None) -> RunView | None:
        if self.detail is None or run_id is None:
            return None
        return next((r for r in self.detail.runs if r.run_id == run_id), None)

    # -- events ------------------------------------------------------------------------------
    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        self.refresh_bindings()  # the footer shows the keys of the visible tab
        self._draw(self.active_tab)  # no blank tab until the next tick
        if self.active_tab == "timeline":
            # the method, not a coroutine: a worker cancelled before it starts leaves nothing
            # unawaited behind (the annotation lets mypy infer Textual's result type)
            drawing: Worker[None] = self.run_worker(self._draw_timeline, group="timeline-tab",
                                                    exclusive=True)
            del drawing

    @on(DataTable.RowHighlighted)
    def _row_moved(self, event: DataTable.RowHighlighted) -> None:
        pane = str(event.data_table.id or "").removesuffix("-table")
        if pane in ("queue", "dead", "runs", "context"):
            self._row_detail(pane)

    @on(DataTable.RowSelected, "#timeline-table")
    def _timeline_chosen(self) -> None:
        self.action_timeline()

    @on(DataTable.RowSelected, "#runs-table")
    def _run_chosen(self) -> None:
        self.action_open_run()

    @on(DataTable.RowSelected, "#queue-table, #dead-table, #context-table")
    def _row_chosen(self) -> None:
        self.action_view()  # Enter is free on these tabs: the row whole

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not self._ready:
            return True  # the footer asks before the tabs exist
        if action in DEAD_ONLY:
            return self.active_tab == "dead"
        if action == "open_run":
            return self.active_tab == "runs"
        if action == "view":
            return self.active_tab in VIEWABLE
        if action == "save_manifest":
            return self.active_tab == "config"
        return True

    # -- actions -----------------------------------------------------------------------------
    def action_back(self) -> None:
        self.app.pop_screen()

    def action_timeline(self) -> None:
        self.post_message(OpenTimeline(self.process))

    def action_save_manifest(self) -> None:  # m on the Config tab
        save_as_manifest(self, self.process)

    def action_view(self) -> None:
        """v: the row under the cursor whole, in the pager."""
        pane, d = self.active_tab, self.detail
        if d is None or pane not in VIEWABLE:
            return
        letters = d.dead_letters if self.dead_page is None else self.dead_page.letters
        shown = detail_row(pane, self.process, d, self.table(pane).cursor_key, letters,
                           self.timeline_entries)
        if shown is None:
            self.app.notify("no row to show", severity="warning", timeout=2)
            return
        if pane in ("dead", "timeline"):  # the views cut these short: ask for them whole
            self.run_worker(self._view_whole(pane, *shown), group="view", exclusive=True)
            return
        self.post_message(ShowValue(*shown))

    async def _view_whole(self, pane: str, title: str, value: Any, ident: str) -> None:
        control = self.room.control
        try:
            whole = await (control.dead_letter(self.process, ident) if pane == "dead"
                           else control.journal_entry(self.process, ident))
        except ControlError:  # gone meanwhile, or an older server: the view is what there is
            whole = value
        self.post_message(ShowValue(title, whole, ident))

    def show_tab(self, pane: str) -> None:
        self.query_one(TabbedContent).active = pane
        self.query_one(TAB_FOCUS[pane], Widget).focus()

    def action_tab_live(self) -> None:
        self.show_tab("live")

    def action_tab_queue(self) -> None:
        self.show_tab("queue")

    def action_tab_dead(self) -> None:
        self.show_tab("dead")

    def action_tab_runs(self) -> None:
        self.show_tab("runs")

    def action_tab_context(self) -> None:
        self.show_tab("context")

    def action_tab_conversation(self) -> None:
        self.show_tab("conversation")

    def action_tab_governance(self) -> None:
        self.show_tab("governance")

    def action_tab_config(self) -> None:
        self.show_tab("config")

    def action_tab_timeline(self) -> None:
        self.show_tab("timeline")

    def action_mark(self) -> None:
        table = self.table("dead")
        key = table.cursor_key
        if key is None:
            return
        self.marked ^= {key}
        self._draw_table("dead")
        table.action_cursor_down()  # mark a run of rows with repeated space

    def action_redeliver(self) -> None:
        table = self.table("dead")
        ids = [key for key in table.keys if key in self.marked]
        if not ids and table.cursor_key is not None:
            ids = [table.cursor_key]
        if not ids:
            self.app.notify("no dead letters to redeliver", severity="warning", timeout=3)
            return
        self.marked -= set(ids)
        name, control = self.process, self.room.control
        self.room.command(f"redeliver {len(ids)} to {name}",
                          lambda: control.redeliver(name, ids),
                          lambda n: f"{n} of {len(ids)} redelivered to {name}")

    def action_redeliver_all(self) -> None:
        if self.detail is not None and not self.detail.dead_letters:
            self.app.notify("no dead letters to redeliver", severity="warning", timeout=3)
            return
        self.run_worker(self._ask_redeliver_all(), group="redeliver-all", exclusive=True)

    async def _ask_redeliver_all(self) -> None:
        """A bulk action asks first, with the count of all of them (the tab shows a page)."""
        name, control = self.process, self.room.control
        try:
            letters = await control.dead_letters(name)
        except ControlError as exc:
            self.app.notify(str(exc), severity="error", timeout=5)
            return
        if not letters:
            self.app.notify("no dead letters to redeliver", severity="warning", timeout=3)
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.marked.clear()
                self.room.command(f"redeliver all to {name}",
                                  lambda: control.redeliver(name, None),
                                  lambda n: f"{n} redelivered to {name}")

        self.app.push_screen(redeliver_all_dialog(name, letters), confirmed)

    def action_clear_dead(self) -> None:
        d = self.detail
        count = max(d.summary.dead_letters, len(d.dead_letters)) if d is not None else 0
        if not count:
            self.app.notify("no dead letters to clear", severity="warning", timeout=3)
            return
        name, control = self.process, self.room.control

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.marked.clear()
                self.room.command(f"clear dead letters of {name}",
                                  lambda: control.clear_dead_letters(name),
                                  lambda n: f"{n} dead letters of {name} cleared")

        self.app.push_screen(clear_dead_dialog(name, count), confirmed)

    def action_older_dead(self) -> None:
        self._page_dead(+1)

    def action_newer_dead(self) -> None:
        self._page_dead(-1)

    def _page_dead(self, step: int) -> None:
        """Page through every dead letter the journal keeps, DEAD_PAGE at a time; page 0 is
        the newest ones, live."""
        d = self.detail
        if d is None:
            return
        total = max(d.summary.dead_letters, len(d.dead_letters))
        back = (self.dead_page.back if self.dead_page is not None else 0) + step
        end = total - back * DEAD_PAGE  # the page ends where the newer one starts
        if back <= 0 or end <= 0:
            if back > 0:
                self.app.notify("no older dead letters", timeout=2)
                return
            self.dead_page = None
            self._draw("dead")
            return
        offset = max(0, end - DEAD_PAGE)
        name, control = self.process, self.room.control

        async def load() -> None:
            try:
                page = await control.dead_letters(name, offset=offset, limit=end - offset)
            except ControlError as exc:
                self.app.notify(str(exc), severity="error", timeout=5)
                return
            self.dead_page = DeadPage(back, offset, tuple(page))
            self._draw("dead")

        loading: Worker[None] = self.run_worker(load, group="dead-page", exclusive=True)
        del loading

    def action_open_run(self) -> None:
        run = self._run(self.table("runs").cursor_key)
        if run is None:
            return
        if run.state != "waiting":
            self.app.push_screen(RunStepsDialog(self.process, run))
        elif not self.room.permits(RECONCILE):  # the steps, and why it waits
            self.app.push_screen(RunStepsDialog(
                self.process, run, "read-only: this run waits for an operator to reconcile"))
        else:
            self.run_worker(self._reconcile(run.run_id), group="reconcile", exclusive=True)

    async def _reconcile(self, run_id: str) -> None:
        await settle_waiting(self, self.process, run_id)
