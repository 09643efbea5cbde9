"""The rewind timeline's table: journal entries newest first, grouped by run (the run id on
the first row of each run, a bar below it), a rewind marked; it says when it is scrolled near
the last loaded row so the screen can read the next page."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from promptui.format import TimeMode, clip, date_time, when
from promptui.widgets.keyed_table import fill_width
from runtime_core.control.views import JournalEntryView

PREFETCH = 40  # rows from the end of what is loaded: fetch the next page before it shows
REWIND_MARK = "⟲"
COLUMNS = (("time", "Time", 11), ("seq", "Seq", 6), ("type", "Type", 18), ("run", "Run", 8),
           ("summary", "Summary", 10))
TYPE_STYLES = {"rewind": "bold magenta", "forked": "bold magenta", "run_finished": "green",
               "tool_intent": "yellow", "tool_result": "cyan", "context_update": "blue",
               "checkpoint": "dim", "dead_lettered": "red", "run_waiting": "bold red"}


def entry_cells(entry: JournalEntryView, run_above: str | None, mode: TimeMode = "iso",
                now: float | None = None) -> tuple[Text, ...]:
    """One row; the run id is written on the first (newest) row of each run, a bar below it;
    its time in ``mode`` at ``now``."""
    now = time.time() if now is None else now
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
    return (Text(when(entry.timestamp, mode, now, narrow=True), style=style),
            Text(str(entry.seq), style=style),
            kind, run, Text(clip(entry.summary, 200), style=style))


def entry_detail(entry: JournalEntryView | None) -> Text:
    if entry is None:
        return Text("no entries", style="dim")
    text = Text(f"{entry.entry_id}", style="bold")
    text.append(f"  {date_time(entry.timestamp)}  {entry.entry_type}", style="dim")
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
        self.time_mode: TimeMode = "iso"  # the room's; set_time_mode redraws the rows
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
            self.add_row(*entry_cells(entry, above, self.time_mode), key=str(entry.seq))
            above = entry.run_id
        self.entries.extend(entries)

    def set_time_mode(self, mode: TimeMode) -> None:
        """Show times in ``mode`` (relative: redrawn now, so their ages are fresh)."""
        if mode == self.time_mode and mode == "iso":
            return
        self.time_mode = mode
        current = self.current
        self.replace(list(self.entries), current.seq if current else None)

    def prepend(self, entries: Sequence[JournalEntryView]) -> None:
        """New entries on top; the cursor stays on the entry it was on. A DataTable cannot
        insert rows, so the loaded rows are rebuilt (only when something new arrived)."""
        current = self.current
        self.replace([*entries, *self.entries], current.seq if current else None)
