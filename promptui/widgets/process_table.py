"""The process table: one DataTable, rows keyed by process name, updated by diff (only the
cells that changed), stable order, sortable by any column (the header marks it, ▲ or ▼),
filtered by a regex (``!`` in front inverts it). The selected process stays selected whatever
the updates do to the rows. The Name column is as wide as the longest name, as far as the
terminal allows; a cell cut short ends in an ellipsis, never silently. Attached to a cluster
node, every process of the cluster is a row naming its node; figures another node published
longer ago than STALE_AFTER_S show their age in the State column, dimmed ("running 12s"), and
a process nobody published figures of yet a question mark ("running?")."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowDoesNotExist

from promptui.format import age
from promptui.store import ProcessFilter
from promptui.widgets.keyed_table import ROW_KEYS
from runtime_core.control.views import STALE_AFTER_S, ProcessSummary

STATE_STYLES = {
    "running": "bold green",
    "suspended": "bold yellow",
    "failed": "bold red",
    "stopped": "dim",
    "created": "dim",
    "starting": "cyan",
    "stopping": "cyan",
    "restarting": "magenta",
}
BAR_WIDTH = 4
BLOCKS = " ▁▂▃▄▅▆▇█"


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    width: int | None


# Widths fit 80 columns with a one-space gutter (cell_padding=0, see below); the Name width is
# the least it gets: it grows to the longest name when the terminal has the room.
COLUMNS = (
    Column("name", "Process", 16),
    Column("state", "State", 11),
    Column("queue", "Queue", 10),
    Column("runs", "Run", 4),
    Column("invocations", "Done", 6),
    Column("failures", "Fail", 5),
    Column("dead", "Dead", 5),
    Column("health", "Health", 8),
    Column("budget", "Bdgt", 5),
    Column("last", "Last", 5),
    # Width 0 at 80 columns: on a wider terminal it takes what the others leave (_fit_name).
    Column("outcome", "Last outcome", 0),
)
MIN_NAME = 16
MIN_OUTCOME = 12  # narrower than this, the Last outcome column is left out (width 0)
ASCENDING, DESCENDING = "▲", "▼"
# The order shown is no longer the sort's (a live figure moved): hollow arrows, until ``o``.
STALE_ASCENDING, STALE_DESCENDING = "△", "▽"
TITLE = "Processes"
STALE_TITLE = "Processes · order stale: o re-sorts"


def header_label(column: Column, arrow: str = "") -> Text:
    """A column's header; the sort column's shows its direction, highlighted (in a narrow
    column the arrow takes the gutter: the highlight shows whose it is)."""
    if not arrow:
        return Text(" " + column.label)
    width = column.width or MIN_NAME
    label = next((text for text in (f" {column.label} {arrow}", f" {column.label}{arrow}")
                  if len(text) <= width), f"{column.label}{arrow}")
    return Text(label, style="reverse")


Cell = tuple[str, str]  # (text, style): cheap to build and compare every tick


def queue_cell(depth: int, capacity: int) -> Cell:
    share = 0.0 if capacity <= 0 else min(1.0, depth / capacity)
    full = share * BAR_WIDTH
    bar = "".join(BLOCKS[min(8, max(0, round((full - i) * 8)))] for i in range(BAR_WIDTH))
    style = "red" if share >= 0.8 else "yellow" if share >= 0.5 else "green"
    return f"{depth:>4} {bar}", style


def last_cell(row: ProcessSummary, now: float) -> Cell:
    return (age(now - row.last_run_at) if row.last_run_at is not None else "-"), ""


def shown_name(row: ProcessSummary) -> str:
    """The process's name; a cluster's process names its node too (a room attached to a
    scale-out node lists every process of the cluster)."""
    return f"{row.name} @{row.node}" if row.node else row.name


def cells(row: ProcessSummary, now: float) -> dict[str, Cell]:
    """Plain (text, style) pairs; a Rich Text is only built for a cell that changed."""
    state = row.state + ("*" if row.suspend_reason else "")
    state_style = STATE_STYLES.get(row.state, "")
    if row.draining:  # a stop letting its runs finish: how many are left
        state, state_style = f"draining {row.active_runs}", "bold cyan"
    if row.journal_fault:  # nothing can be made durable: events are refused
        state, state_style = "degraded", "bold white on red"
    if not row.figures_known:  # another node's process nobody published figures of yet
        state, state_style = f"{state}?", "dim"
    elif row.as_of_age_s is not None and row.as_of_age_s >= STALE_AFTER_S:
        # its owner went silent (or it is between owners): the figures are this old
        state, state_style = f"{state} {age(row.as_of_age_s)}", "dim"
    health_style = "green" if row.health == "ok" else "dim" if row.health == "off" else "yellow"
    use = row.budget_use
    budget = "-" if use is None else f"{use * 100:.0f}%"
    budget_style = "red" if (use or 0) >= 1 else "yellow" if (use or 0) >= 0.8 else ""
    return {
        "name": (shown_name(row), "bold" if row.waiting_runs else ""),
        "state": (state, state_style),
        "queue": queue_cell(row.queue_depth, row.queue_capacity),
        "runs": (str(row.active_runs), "") if not row.waiting_runs else (
            f"{row.active_runs}!", "bold red"),
        "invocations": (str(row.invocations), ""),
        "failures": (str(row.failure_streak), "red" if row.failure_streak else ""),
        "dead": (str(row.dead_letters), "yellow" if row.dead_letters else ""),
        "health": (row.health.replace(" anomalies", " anom").replace(" anomaly", " anom"),
                   health_style),
        "budget": (budget, budget_style),
        "last": last_cell(row, now),
        "outcome": (row.last_outcome.replace("\n", " "),
                    "red" if row.failure_streak else "dim"),
    }


def render_cell(key: str, cell: Cell) -> Text:
    """The leading space is the column gutter (the table's own padding is off to save width)."""
    text, style = cell
    if key == "queue":  # the number plain, the bar coloured
        number, _, bar = text.rpartition(" ")
        rendered = Text(f" {number} ")
        rendered.append(bar, style=style)
        return rendered
    return Text(" " + text, style=style, no_wrap=True, overflow="ellipsis")


SORT_VALUES: dict[str, Callable[[ProcessSummary], object]] = {
    "name": lambda r: r.name,
    "state": lambda r: r.state,
    "queue": lambda r: r.queue_depth,
    "runs": lambda r: r.active_runs,
    "invocations": lambda r: r.invocations,
    "failures": lambda r: r.failure_streak,
    "dead": lambda r: r.dead_letters,
    "health": lambda r: r.health,
    "budget": lambda r: r.budget_use or 0.0,
    "last": lambda r: -(r.last_run_at or 0.0),
    "outcome": lambda r: r.last_outcome,
}


class ProcessTable(DataTable[Text]):
    """Rows keyed by process name; ``sync`` applies the store's latest rows as a diff."""

    DEFAULT_CSS = """
    ProcessTable { height: auto; max-height: 100%; }
    """
    BINDINGS = ROW_KEYS

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, cell_padding=0,
                         **kwargs)  # type: ignore[arg-type]
        self._rendered: dict[str, dict[str, Cell]] = {}
        self._dirty: set[str] = set()  # changed while scrolled out of view
        self._rows: dict[str, ProcessSummary] = {}
        self.sort_column: str | None = None
        self.sort_reverse = False
        #: A live figure of the sort column moved since the rows were sorted: the rows stay
        #: where they are (nothing moves under the cursor) until the operator sorts again.
        self.order_stale = False
        self._filter = ProcessFilter()  # the same rule the live tail uses
        self.border_title = TITLE
        for column in COLUMNS:  # here, not on mount: the pump may sync before that
            self.add_column(header_label(column), key=column.key, width=column.width)

    # -- what the operator chose ----------------------------------------------------------
    @property
    def selected_name(self) -> str | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:
            return None
        return str(key.value) if key.value is not None else None

    @property
    def keys(self) -> list[str]:
        """The names of the rows shown, in the table's order."""
        return [str(row.key.value) for row in self.ordered_rows]

    @property
    def filter_text(self) -> str:
        return self._filter.text

    def set_filter(self, text: str) -> str | None:
        """Apply a regex filter (``!re`` inverts); returns an error message for a bad regex."""
        error = self._filter.set(text)
        if error:
            return error
        self._resync()
        if self.sort_column is not None:  # the operator's own change: sorted at once
            self._apply_sort()
        return None

    def cycle_sort(self, column: str | None = None) -> str:
        """Sort by ``column`` (or the next column); the same column again reverses. On a
        stale order (``order_stale``), no column given sorts again by the same one."""
        keys = [c.key for c in COLUMNS]
        if column is None and self.order_stale and self.sort_column in keys:
            column = self.sort_column  # o on a stale order: re-sort, same column, same way
        elif column is None:
            column = keys[(keys.index(self.sort_column) + 1) % len(keys)] \
                if self.sort_column in keys else keys[0]
            self.sort_reverse = False
        elif column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_reverse = False
        self.sort_column = column
        self._show_sort()
        self._apply_sort()
        label = next(c.label for c in COLUMNS if c.key == column)
        return f"{label} {'descending' if self.sort_reverse else 'ascending'}"

    def _show_sort(self) -> None:
        if self.order_stale:
            arrow = STALE_DESCENDING if self.sort_reverse else STALE_ASCENDING
        else:
            arrow = DESCENDING if self.sort_reverse else ASCENDING
        self.border_title = STALE_TITLE if self.order_stale else TITLE
        for column in COLUMNS:
            self.columns[ColumnKey(column.key)].label = header_label(
                column, arrow if column.key == self.sort_column else "")
        self._clear_caches()  # the header row is cached like any other
        self.refresh()

    # -- width -----------------------------------------------------------------------------
    def on_resize(self) -> None:
        self._fit_name()

    def _fit_name(self) -> None:
        """The Name column: the longest name and its gutter, at least MIN_NAME, at most what
        the other columns leave (and the scrollbar); a longer name ends in an ellipsis."""
        others = sum(c.width or 0 for c in COLUMNS if c.key != "name")
        room = self.size.width - others - self.styles.scrollbar_size_vertical
        longest = max((cell_len(shown_name(row)) for row in self._rows.values()),
                      default=0) + 1
        width = max(MIN_NAME, min(longest, room))
        # A wide terminal: the last run's outcome takes what is left, not empty space.
        spare = room - width - 1
        for key, wanted in (("name", width), ("outcome", spare if spare >= MIN_OUTCOME else 0)):
            column = self.columns[ColumnKey(key)]
            if column.width != wanted:
                column.width, column.auto_width = wanted, False
                self._require_update_dimensions = True
                self.refresh()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.cycle_sort(str(event.column_key.value))

    # -- the diff --------------------------------------------------------------------------
    def _visible(self, row: ProcessSummary) -> bool:
        return self._filter.matches(row.name, row.state)

    def sync(self, rows: dict[str, ProcessSummary], now: float) -> None:
        previous = self._rows
        self._rows = dict(rows)
        if previous.keys() != rows.keys() or any(
                previous[name].node != row.node for name, row in rows.items()):
            self._fit_name()  # a longer name came (or went), or a process moved node
        self._now = now
        selected = self.selected_name
        structure_changed = False
        wanted = [name for name, row in rows.items() if self._visible(row)]
        wanted_set = set(wanted)
        for gone in [name for name in self._rendered if name not in wanted_set]:
            with contextlib.suppress(RowDoesNotExist):
                self.remove_row(gone)
            del self._rendered[gone]
            self._dirty.discard(gone)
            structure_changed = True
        sort_dirty = False
        top, bottom = self._viewport()
        for name in wanted:
            row = rows[name]
            old = self._rendered.get(name)
            if old is None:
                fresh = cells(row, now)
                self.add_row(*(render_cell(c.key, fresh[c.key]) for c in COLUMNS), key=name)
                self._rendered[name] = fresh
                structure_changed = sort_dirty = True
                continue
            if previous.get(name) == row and name not in self._dirty:
                # Unchanged row: only its age can move (cheap, and mostly not at all).
                fresh = {**old, "last": last_cell(row, now)}
            else:
                fresh = cells(row, now)
            before = previous.get(name)
            if self.sort_column is not None and before is not None and SORT_VALUES[
                    self.sort_column](before) != SORT_VALUES[self.sort_column](row):
                sort_dirty = True
            if not top <= self.get_row_index(name) <= bottom:
                # Off screen: repainting the table for it buys nothing; catch up on scroll.
                if fresh != old:
                    self._dirty.add(name)
                continue
            self._dirty.discard(name)
            for column in COLUMNS:
                value = fresh[column.key]
                if old[column.key] != value:
                    self.update_cell(name, column.key, render_cell(column.key, value))
            self._rendered[name] = fresh
        if sort_dirty and self.sort_column is None:
            self._apply_sort()  # unsorted: back to the runtime's order (rows re-added last)
            structure_changed = True
        elif sort_dirty and not self.order_stale:
            # Sorted by a live column: re-sorting every tick would move rows under the
            # cursor; the order is marked stale instead, and ``o`` sorts again.
            self.order_stale = True
            self._show_sort()
        if structure_changed and selected is not None:
            self.select(selected)

    def _viewport(self) -> tuple[int, int]:
        """Row indexes on screen now, with a little slack."""
        top = int(self.scroll_y)
        return top - 2, top + max(self.size.height, 1) + 2

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if self._dirty and self._rows:
            self.call_later(self._resync)  # rows scrolled into view get their updates

    def _resync(self) -> None:
        if self._rows:
            self.sync(self._rows, getattr(self, "_now", 0.0))

    def _apply_sort(self) -> None:
        if not self.row_count:
            return
        selected = self.selected_name
        rows = self._rows
        order = {name: i for i, name in enumerate(rows)}
        value = SORT_VALUES[self.sort_column] if self.sort_column is not None else (
            lambda r: order.get(r.name, 0))

        def key(name_cell: object) -> object:
            row = rows.get(str(name_cell).strip())  # the name cell is the row's key
            return (value(row), row.name) if row is not None else ("", "")

        self.sort("name", key=key, reverse=self.sort_reverse)
        if self.order_stale:
            self.order_stale = False
            self._show_sort()
        if selected is not None:
            self.select(selected)

    def select(self, name: str) -> None:
        try:
            index = self.get_row_index(name)
        except RowDoesNotExist:
            return
        if index != self.cursor_row:
            self.move_cursor(row=index, animate=False)
