"""The rewind timeline of one process: its journal newest first, grouped by run, loaded a page
at a time (a journal may hold 100,000 entries; only what the operator scrolls to is read).
From an entry the operator previews a rewind (and applies it) or forks a new process."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.css.query import NoMatches
from textual.widgets import DataTable, Footer, Input, Static

from promptui.actions import REWIND, TIMELINE_ACTIONS, bindings
from promptui.format import clip, clock, parse_when
from promptui.screens.base import LiveScreen, ShowValue
from promptui.screens.dialogs import AskDialog
from promptui.screens.rewind_dialog import RewindPreview
from promptui.store import ActivityLine, FeedLine, UIStore
from promptui.widgets.timeline_table import PREFETCH, TimelineTable, entry_detail
from promptui.widgets.view_values import entry_value
from runtime_core.control.plane import ControlError
from runtime_core.control.views import ENTRY_TYPES, JournalEntryView, RewindResult

PAGE = 200
REFRESH_SECONDS = 1.0  # the newest page is re-read at most this often
# `T` steps through these: every type the runtime journals, the ones an operator looks for
# most first; None is "every type".
FIRST_TYPES = ("run_finished", "tool_intent", "tool_result", "context_update", "checkpoint",
               "rewind", "state_transition", "incident", "shutdown")
TYPE_FILTERS: tuple[str | None, ...] = (
    None, *FIRST_TYPES, *(t for t in ENTRY_TYPES if t not in FIRST_TYPES))


class TimelineScreen(LiveScreen):
    CSS_PATH = "timeline.tcss"
    ACTIONS = TIMELINE_ACTIONS
    BINDINGS = bindings(TIMELINE_ACTIONS)

    def __init__(self, process: str, *, anchor: JournalEntryView | None = None) -> None:
        super().__init__()
        self.process = process
        self.opened_at = anchor  # a drill-down: open at this entry (n goes to the newest)
        self.text = ""
        self.entry_type: str | None = None
        # A jump to a time (or to the anchor) anchors the view there.
        self.at_or_before: float | None = anchor.timestamp if anchor is not None else None
        self.exhausted = False  # the oldest entry is loaded
        self.loaded = False  # the first page has arrived (tests wait on it)
        self.gone = ""
        self.newer_waiting = False  # more new entries than a page: the operator chooses
        self._generation = 0  # a reload makes pages still in flight stale
        self._paging = False
        self._next_refresh = 0.0

    def compose(self) -> ComposeResult:
        yield Static(Text(f"Timeline {self.process}", style="bold"), id="timeline-title")
        yield TimelineTable(id="timeline-table")
        yield Static("", id="timeline-detail")
        yield Input(placeholder="filter: text in the entries; enter keeps, esc clears",
                    id="timeline-filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#timeline-filter", Input).display = False
        self.table.focus()
        self.reload(self.opened_at.seq if self.opened_at is not None else None)

    def current_process(self) -> str | None:
        return self.process

    @property
    def table(self) -> TimelineTable:
        return self.query_one(TimelineTable)

    # -- loading -----------------------------------------------------------------------------
    async def _read(self, before_seq: int | None = None,
                    limit: int = PAGE) -> list[JournalEntryView] | None:
        try:
            entries = await self.room.control.journal_entries(
                self.process, before_seq=before_seq, at_or_before=self.at_or_before,
                entry_type=self.entry_type, text=self.text, limit=limit)
        except ControlError as exc:
            self.gone = str(exc)
            self._draw_title()
            return None
        except Exception as exc:  # a remote that went away: say so, keep the room up
            self.gone = f"cannot read the journal: {exc}"
            self._draw_title()
            return None
        self.gone = ""
        return entries

    def reload(self, cursor_seq: int | None = None) -> None:
        """Read the first page again for the current filters (and time anchor)."""
        self._generation += 1
        self.run_worker(self._reload(self._generation, cursor_seq), group="timeline-load",
                        exclusive=True)

    async def _reload(self, generation: int, cursor_seq: int | None) -> None:
        entries = await self._read()
        if entries is None or generation != self._generation:
            return
        self.exhausted = len(entries) < PAGE
        self.newer_waiting = False
        self._next_refresh = time.monotonic() + REFRESH_SECONDS
        self.table.replace(entries, cursor_seq)
        self.loaded = True
        self._draw_title()
        self._draw_detail()

    async def _more(self, generation: int) -> None:
        """The next (older) page, when the cursor nears the end of what is loaded."""
        try:
            if not self.table.entries:
                return
            entries = await self._read(before_seq=self.table.entries[-1].seq)
            if entries is None or generation != self._generation:
                return
            self.exhausted = len(entries) < PAGE
            self.table.append(entries)
            self._draw_title()
        finally:
            self._paging = False

    def _maybe_page(self, near_end: bool = False) -> None:
        table = self.table
        near_end = near_end or table.cursor_row >= len(table.entries) - PREFETCH
        if self.loaded and not self.exhausted and not self._paging and near_end:
            self._paging = True
            self.run_worker(self._more(self._generation), group="timeline-more")

    # -- the pump: new entries appear at the top ----------------------------------------------
    async def show(self, store: UIStore, now: float, feed: list[FeedLine],
                   activity: list[ActivityLine]) -> None:
        if self.loaded and store.time_mode != self.table.time_mode:
            self.table.set_time_mode(store.time_mode)  # the time key: at once
        if not self.loaded or self.at_or_before is not None or self.newer_waiting:
            return
        mono = time.monotonic()
        if mono < self._next_refresh:
            return
        self._next_refresh = mono + REFRESH_SECONDS
        generation = self._generation
        entries = await self._read()
        if entries is None or generation != self._generation:
            return
        if not (self.is_attached and self.is_current):
            return
        try:
            self._merge_newest(entries)
        except NoMatches:  # the screen is being torn down
            return

    def _merge_newest(self, page: list[JournalEntryView]) -> None:
        table = self.table
        top = table.entries[0].seq if table.entries else 0
        fresh = [e for e in page if e.seq > top]
        if not fresh:
            return
        if table.entries and len(fresh) == len(page) and len(page) >= PAGE:
            # More arrived than one page holds: gluing it on would hide a gap.
            if table.cursor_row == 0:
                self.reload()
            else:
                self.newer_waiting = True
                self._draw_title()
            return
        table.prepend(fresh)
        self._draw_title()

    # -- drawing -----------------------------------------------------------------------------
    def _draw_title(self) -> None:
        # Terse, so process, filters and anchor all fit one 80-column line.
        title = Text(f"Timeline {self.process}", style="bold")
        if self.gone:
            title.append(f"  ⚠ {self.gone} — esc goes back", style="bold red")
        else:
            count = len(self.table.entries)
            title.append(f" · {count}{'' if self.exhausted else '+'}", style="dim")
            if self.entry_type:
                title.append(f" · type {self.entry_type}", style="yellow")
            if self.text:
                title.append(f" · ~{clip(self.text, 16)}", style="yellow")
            if self.at_or_before is not None:
                title.append(f" · ≤{clock(self.at_or_before)} (n: now)", style="yellow")
            if self.newer_waiting:
                title.append(" · ⇡ newer: n", style="bold cyan")
        if self.room.control.read_only:
            title.append("  read-only", style="bold magenta")
        self.query_one("#timeline-title", Static).update(title)

    def _draw_detail(self) -> None:
        self.query_one("#timeline-detail", Static).update(entry_detail(self.table.current))

    @on(DataTable.RowHighlighted, "#timeline-table")
    def _moved(self) -> None:
        self._draw_detail()
        self._maybe_page()

    @on(TimelineTable.NearEnd)
    def _scrolled_near_end(self) -> None:
        self._maybe_page(near_end=True)

    @on(DataTable.RowSelected, "#timeline-table")
    def _chosen(self) -> None:
        self.action_preview()

    # -- filters -----------------------------------------------------------------------------
    def action_filter(self) -> None:
        box = self.query_one("#timeline-filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, "#timeline-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        if event.value != self.text:
            self.text = event.value
            self.reload()

    @on(Input.Submitted, "#timeline-filter")
    def _filter_kept(self, event: Input.Submitted) -> None:
        event.input.display = bool(event.value)
        self.table.focus()

    def action_cycle_type(self) -> None:
        i = TYPE_FILTERS.index(self.entry_type) if self.entry_type in TYPE_FILTERS else 0
        self.entry_type = TYPE_FILTERS[(i + 1) % len(TYPE_FILTERS)]
        self.app.notify(f"type: {self.entry_type or 'all'}", timeout=2)
        self.reload()

    def action_goto(self) -> None:
        now = self.room.clock()

        def check(value: str) -> str:
            return "" if parse_when(value, now) is not None else \
                "HH:MM, HH:MM:SS (today) or an ISO date-time, e.g. 2026-05-28T20:00"

        def jump(value: str | None) -> None:
            when = parse_when(value or "", now)
            if when is not None:
                self.at_or_before = when
                self.reload()

        self.app.push_screen(AskDialog("Go to time", "entries at or before this time",
                                       clock(now), check), jump)

    def action_newest(self) -> None:
        self.at_or_before = None
        self.reload()

    def action_back(self) -> None:
        box = self.query_one("#timeline-filter", Input)
        if box.has_focus:  # esc in the filter clears it, a second esc goes back
            box.value = ""
            box.display = False
            self.table.focus()
            return
        self.app.pop_screen()

    def action_view(self) -> None:
        """v: the entry whole, in the pager (Enter previews a rewind from it)."""
        entry = self.table.current
        if entry is None:
            self.app.notify("no entry selected", severity="warning", timeout=3)
            return
        self.run_worker(self._view_whole(entry), group="view", exclusive=True)

    async def _view_whole(self, entry: JournalEntryView) -> None:
        try:  # the line carries a summary; the entry whole has its data
            value: Any = await self.room.control.journal_entry(self.process, entry.entry_id)
        except ControlError:
            value = entry_value(entry)
        self.post_message(ShowValue(f"Journal entry #{entry.seq} of {self.process}", value,
                                    entry.entry_id))

    # -- rewind and fork ---------------------------------------------------------------------
    def action_preview(self) -> None:
        entry = self.table.current
        if entry is None:
            self.app.notify("no entry selected", severity="warning", timeout=3)
            return
        name, control = self.process, self.room.control

        def chosen(mode: str | None) -> None:
            if mode is None or mode == "cancel" or not self.room.permits(REWIND):
                return  # (a read-only preview never offers Apply; the gate holds anyway)

            def done(result: RewindResult) -> str:
                self._next_refresh = 0.0  # the pump that follows shows the rewind entry
                return (f"{name} rewound to #{entry.seq} ({mode}); "
                        f"journal entry {result.rewind_entry_id}")

            self.room.command(f"rewind {name} to #{entry.seq}",
                              lambda: control.rewind(name, entry.entry_id, mode), done)

        self.app.push_screen(RewindPreview(name, entry, read_only=control.read_only), chosen)

    def action_fork(self) -> None:
        entry = self.table.current
        if entry is None:
            self.app.notify("no entry selected", severity="warning", timeout=3)
            return
        control, name = self.room.control, self.process

        def check(value: str) -> str:
            return "" if value.strip() else "the new process needs a name"

        def fork(new_name: str | None) -> None:
            if new_name:
                self.room.command(f"fork {name} at #{entry.seq}",
                                  lambda: control.fork(name, entry.entry_id, new_name.strip()),
                                  lambda child: f"forked {name} at #{entry.seq}: {child} "
                                                "started, without triggers")

        self.app.push_screen(AskDialog(
            f"Fork {name} at #{entry.seq}", "a new process starts from the state just before "
            "this entry, without the triggers (not copied); name it", f"{name}-fork", check),
            fork)
