"""A DataTable whose rows are keyed by an id and updated by diff: ``sync`` adds, removes and
updates only what changed, keeps the given order and keeps the cursor on the same key. The
detail tabs and the incidents screen draw with it."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowDoesNotExist

Cell = Text | str
#: Home/End (and less's g/G) move a row cursor to the first and last row; DataTable's own
#: Home/End move along the columns, which a row cursor does not have.
ROW_KEYS: list[BindingType] = [
    Binding("home,g", "scroll_top", "First row", show=False, id="promptui.table.first"),
    Binding("end,G", "scroll_bottom", "Last row", show=False, id="promptui.table.last"),
]
Row = tuple[str, tuple[Cell, ...]]


@dataclass(frozen=True, slots=True)
class Col:
    key: str
    label: str
    width: int | None


def fill_width(table: DataTable[Any], key: str, fixed: int) -> None:
    """Column ``key`` takes the width the others (``fixed`` cells wide in all) leave, so no
    row ever needs a horizontal scrollbar. Call it from the table's on_resize."""
    fixed += 2 * table.cell_padding * len(table.columns)
    column = table.columns[ColumnKey(key)]
    width = max(10, table.size.width - fixed - 1)  # 1: the vertical scrollbar
    if column.width != width:
        column.width, column.auto_width = width, False
        table._require_update_dimensions = True
        table.refresh()


def _signature(cell: Cell) -> tuple[str, str, str]:
    # rich's Text equality ignores the base style; a colour change must still redraw.
    if isinstance(cell, Text):
        return cell.plain, str(cell.style), repr(cell.spans)
    return cell, "", ""


class KeyedTable(DataTable[Cell]):
    """Rows keyed by an id: ``sync`` adds, removes and updates only what changed, keeps the
    given order and keeps the cursor on the same key."""

    BINDINGS = ROW_KEYS

    def __init__(self, columns: Sequence[Col], **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.spec = tuple(columns)
        self._cells: dict[str, tuple[tuple[str, str, str], ...]] = {}
        for col in self.spec:  # here, not on mount: a screen's first refresh may sync before
            self.add_column(col.label, key=col.key, width=col.width)

    @property
    def cursor_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            value = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # the cursor sits on a row that just went
            return None
        return str(value) if value is not None else None

    @property
    def keys(self) -> list[str]:
        return [str(row.key.value) for row in self.ordered_rows]

    def sync(self, rows: Sequence[tuple[str, Sequence[Cell]]], *, ordered: bool = False) -> None:
        """Show ``rows`` (key, cells); ``ordered`` re-sorts when the order differs (the first
        column must then be unique per row, e.g. a short id)."""
        cursor = self.cursor_key
        wanted = {key: cells for key, cells in rows}
        changed = False
        for gone in [key for key in self._cells if key not in wanted]:
            with contextlib.suppress(RowDoesNotExist):  # already gone with a cleared table
                self.remove_row(gone)
            del self._cells[gone]
            changed = True
        for key, cells in wanted.items():
            fresh = tuple(_signature(c) for c in cells)
            old = self._cells.get(key)
            if old is None:
                self.add_row(*cells, key=key)
                changed = True
            elif old != fresh:
                for col, before, after, cell in zip(self.spec, old, fresh, cells, strict=True):
                    if before != after:
                        self.update_cell(key, col.key, cell)
            self._cells[key] = fresh
        if ordered and self.keys != list(wanted):
            rank = {_signature(cells[0])[0]: i for i, (_, cells) in enumerate(rows)}
            first = self.spec[0].key
            self.sort(first, key=lambda value: rank.get(
                value.plain if isinstance(value, Text) else str(value), len(rank)))
            changed = True
        if changed and cursor is not None and cursor in wanted:
            self.move_cursor(row=self.get_row_index(cursor), animate=False)
