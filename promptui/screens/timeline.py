"""The rewind timeline of one process: its journal newest first, grouped by run, loaded a page
at a time (a journal may hold 100,000 entries; only what the operator scrolls to is read).
From an entry the operator previews a rewind (and applies it) or forks a new process."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from promptui.actions import ActionSpec
from promptui.screens.rewind_dialog import AskDialog, RewindPreview
from promptui.store import FeedLine, UIStore
from promptui.widgets.detail_tabs import clip, fill_width
from runtime_core.control import ControlError, JournalEntryView
from runtime_core.journal.rewind_plan import RewindResult

if TYPE_CHECKING:
    from promptui.app import ControlRoom

PAGE = 200
PREFETCH = 40  # rows from the end of what is loaded: fetch the next page before it shows
REFRESH_SECONDS = 1.0  # the newest page is re-read at most this often
# `T` steps through these; None is "every type".
TYPE_FILTERS: tuple[str | None, ...] = (None, "run_finished", "tool_intent", "tool_result",
                                        "context_update", "checkpoint", "rewind",
                                        "state_transition", "incident", "shutdown")
REWIND_MARK = "⟲"
COLUMNS = (("time", "Time", 8), ("seq", "Seq", 6), ("type", "Type", 18), ("run", "Run", 8),
           ("summary", "Summary", 10))
TYPE_STYLES = {"rewind": "bold magenta", "forked": "bold magenta", "run_finished": "green",
               "tool_intent": "yellow", "tool_result": "cyan", "context_update": "blue",
               "checkpoint": "dim", "dead_lettered": "red", "run_waiting": "bold red"}

TIMELINE_ACTIONS = (
    ActionSpec("timeline.back", "escape", "back", "Back"),
    ActionSpec("timeline.preview", "p", "preview", "Preview rewind"),
    ActionSpec("timeline.fork", "f", "fork", "Fork", mutating=True),
    ActionSpec("timeline.filter", "slash", "filter", "Filter"),
    ActionSpec("timeline.type", "T", "cycle_type", "Type"),
    ActionSpec("timeline.goto", "g", "goto", "Go to time"),
    ActionSpec("timeline.newest", "n", "newest", "Newest", show=False),
)


def clock_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).strftime("%H:%M:%S")


def parse_when(text: str, now: float) -> float | None:
    """HH:MM or HH:MM:SS today (yesterday when that is still to come), or an ISO date-time;
    None when it is neither."""
    text = text.strip()
    for fmt in ("%H:%M:%S", "%H:%M"):
        try:
            clock = datetime.strptime(text, fmt).time()
        except ValueError:
            continue
        today = datetime.fromtimestamp(now)
        when = datetime.combine(today.date(), clock)
        if when.timestamp() > now:
            when -= timedelta(days=1)
        return when.timestamp()
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def entry_cells(entry: JournalEntryView, run_above: str | None) -> tuple[Text, ...]:
    """One row; the run id is written on the first (newest) row of each run, a bar below it."""
    rewind = entry.entry_type == "rewind"
    style = "bold" if rewind else ""
    kind = Text(f"{REWIND_MARK} " if rewind else "  ", style="bold magenta")
    kind.append(entry.entry_type, style=TYPE_STYLES.get(entry.entry_type, ""))
    if not entry.run_id:
        run = Text("")
    elif entry.run_id == run_above:
        run = Text("  │", style="dim")
    else:
        run = Text(entry.run_id[:8], style="dim")
    return (Text(clock_time(entry.timestamp), style=style), Text(str(entry.seq), style=style),
            kind, run, Text(clip(entry.summary, 200), style=style))


def entry_detail(entry: JournalEntryView | None) -> Text:
    if entry is None:
        return Text("no entries", style="dim")
    when = datetime.fromtimestamp(entry.timestamp).isoformat(sep=" ", timespec="seconds")
    text = Text(f"{entry.entry_id}", style="bold")
    text.append(f"  {when}  {entry.entry_type}", style="dim")
    if entry.run_id:
        text.append(f"  run {entry.run_id}", style="dim")
    text.append(f"\n{clip(entry.summary, 400)}")
    return text


class TimelineTable(DataTable[Text]):
    """The loaded entries, newest first, keyed by seq."""

    # A log reads top to bottom: home and end go to the newest and oldest loaded rows.
    BINDINGS = [Binding("home", "scroll_top", "Newest row", show=False,
                        id="promptui.timeline.top"),
                Binding("end", "scroll_bottom", "Oldest row", show=False,
                        id="promptui.timeline.bottom")]

    class NearEnd(Message):
        """Scrolled (wheel, scrollbar) close to the last loaded row."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self.entries: list[JournalEntryView] = []
        for key, label, width in COLUMNS:  # here, not on mount: the pump may draw before that
            self.add_column(label, key=key, width=width)

    def on_resize(self) -> None:
        fill_width(self, "summary", sum(w for key, _, w in COLUMNS if key != "summary"))

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self.entries and new_value >= self.max_scroll_y - PREFETCH:
            self.post_message(self.NearEnd())

    @property
    def current(self) -> JournalEntryView | None:
        if not self.entries or not 0 <= self.cursor_row < len(self.entries):
            return None
        return self.entries[self.cursor_row]

    def replace(self, entries: Sequence[JournalEntryView], cursor_seq: int | None = None) -> None:
        self.entries = []
        self.clear()
        self.append(entries)
        rows = [i for i, e in enumerate(self.entries) if e.seq == cursor_seq]
        self.move_cursor(row=rows[0] if rows else 0, animate=False)

    def append(self, entries: Sequence[JournalEntryView]) -> None:
        above = self.entries[-1].run_id if self.entries else None
        for entry in entries:
            self.add_row(*entry_cells(entry, above), key=str(entry.seq))
            above = entry.run_id
        self.entries.extend(entries)

    def prepend(self, entries: Sequence[JournalEntryView]) -> None:
        """New entries on top; the cursor stays on the entry it was on. A DataTable cannot
        insert rows, so the loaded rows are rebuilt (only when something new arrived)."""
        current = self.current
        self.replace([*entries, *self.entries], current.seq if current else None)


class TimelineScreen(Screen[None]):
    CSS_PATH = "timeline.tcss"
    PALETTE_ACTIONS: tuple[ActionSpec, ...] = TIMELINE_ACTIONS
    BINDINGS = [spec.binding() for spec in TIMELINE_ACTIONS]

    app: ControlRoom

    def __init__(self, process: str) -> None:
        super().__init__()
        self.process = process
        self.text = ""
        self.entry_type: str | None = None
        self.at_or_before: float | None = None  # a jump to a time anchors the view there
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
        self.reload()

    def current_process(self) -> str | None:
        return self.process

    @property
    def table(self) -> TimelineTable:
        return self.query_one(TimelineTable)

    # -- loading -----------------------------------------------------------------------------
    async def _read(self, before_seq: int | None = None,
                    limit: int = PAGE) -> list[JournalEntryView] | None:
        try:
            entries = await self.app.control.journal_entries(
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
                   activity: list[str]) -> None:
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
                title.append(f" · ≤{clock_time(self.at_or_before)} (n: now)", style="yellow")
            if self.newer_waiting:
                title.append(" · ⇡ newer: n", style="bold cyan")
        if self.app.control.read_only:
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
        now = self.app.clock()

        def check(value: str) -> str:
            return "" if parse_when(value, now) is not None else \
                "HH:MM, HH:MM:SS (today) or an ISO date-time, e.g. 2026-05-28T20:00"

        def jump(value: str | None) -> None:
            when = parse_when(value or "", now)
            if when is not None:
                self.at_or_before = when
                self.reload()

        self.app.push_screen(AskDialog("Go to time", "entries at or before this time",
                                       clock_time(now), check), jump)

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

    # -- rewind and fork ---------------------------------------------------------------------
    def action_preview(self) -> None:
        entry = self.table.current
        if entry is None:
            self.app.notify("no entry selected", severity="warning", timeout=3)
            return
        name, control = self.process, self.app.control

        def chosen(mode: str | None) -> None:
            if mode is None or mode == "cancel":
                return

            def done(result: RewindResult) -> str:
                self._next_refresh = 0.0  # the pump that follows shows the rewind entry
                return (f"{name} rewound to #{entry.seq} ({mode}); "
                        f"journal entry {result.rewind_entry_id}")

            self.app.command(f"rewind {name} to #{entry.seq}",
                             lambda: control.rewind(name, entry.entry_id, mode), done)

        self.app.push_screen(RewindPreview(name, entry, read_only=control.read_only), chosen)

    def action_fork(self) -> None:
        entry = self.table.current
        if entry is None:
            self.app.notify("no entry selected", severity="warning", timeout=3)
            return
        control, name = self.app.control, self.process
        if control.read_only:
            self.app.notify("read-only: fork is disabled (started with --read-only)",
                            severity="warning", timeout=4)
            return

        def check(value: str) -> str:
            return "" if value.strip() else "the new process needs a name"

        def fork(new_name: str | None) -> None:
            if new_name:
                self.app.command(f"fork {name} at #{entry.seq}",
                                 lambda: control.fork(name, entry.entry_id, new_name.strip()),
                                 lambda child: f"forked {name} at #{entry.seq}: {child} "
                                               "started")

        self.app.push_screen(AskDialog(
            f"Fork {name} at #{entry.seq}", "a new process starts from the state just before "
            "this entry; name it", f"{name}-fork", check), fork)
