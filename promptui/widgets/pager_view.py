"""The pager's body: a whole value, wrapped to the width it has (or its lines cut at the edge and
scrolled sideways: ``wrapped``), drawn a row at a time (a value of 100,000 lines costs what is
on screen), JSON coloured, search matches highlighted and the current one marked. It scrolls
with the mouse; the keys are the pager screen's."""

from __future__ import annotations

import re
from bisect import bisect_right

from rich.cells import cell_len
from rich.text import Text
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from promptui.widgets.pager_text import Match, Row, display_lines, find, wrap

LINE_CACHE = 2_000  # highlighted lines kept (a page of a long value needs a few dozen)
# Pretty JSON has one key or item per line, so a line at a time colours it right.
JSON_TOKENS = re.compile(r'(?P<key>"(?:[^"\\]|\\.)*")(?=\s*:)|(?P<string>"(?:[^"\\]|\\.)*")'
                         r'|(?P<number>-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b)'
                         r'|(?P<literal>\b(?:true|false|null)\b)')


class PagerView(ScrollView, can_focus=True, inherit_bindings=False):
    """``text`` wrapped to the view's width; ``search`` marks matches, ``goto`` shows one. It
    has no keys of its own: the pager screen's (with ids, remappable) scroll it."""

    COMPONENT_CLASSES = {"pager--match", "pager--current", "pager--key", "pager--string",
                         "pager--number", "pager--literal"}
    DEFAULT_CSS = """
    PagerView {
        background: $surface;
        overflow-x: hidden;
        overflow-y: scroll;
        scrollbar-size-vertical: 1;
    }
    PagerView > .pager--key { color: $text-primary; text-style: bold; }
    PagerView > .pager--string { color: $text-success; }
    PagerView > .pager--number { color: $text-warning; }
    PagerView > .pager--literal { color: $text-accent; }
    PagerView > .pager--match { background: $warning 45%; }
    PagerView > .pager--current { background: $accent; color: $text; text-style: bold; }
    """

    class Moved(Message):
        """The view scrolled or re-wrapped: the position line needs redrawing."""

    def __init__(self, text: str, *, json_like: bool = False, **kwargs: str | None) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.lines = display_lines(text)
        self.rows: list[Row] = []
        self._row_starts: list[int] = []  # (line, start) of each row, for bisect
        self._first_row: list[int] = []  # each line's first row
        self._width = 0
        self.json_like = json_like
        self._texts: dict[int, Text] = {}
        self.matches: list[Match] = []
        self.current = -1  # index into matches, -1: none chosen
        self._query = ""
        self._by_line: dict[int, list[int]] = {}
        self.wrapped = True  # long lines wrap; False: cut at the edge, scrolled sideways

    def set_text(self, text: str) -> None:
        """Show ``text`` instead (the same value in another time format), at the same row;
        the search is run again on it."""
        self.lines = display_lines(text)
        self._texts.clear()
        self._width = 0
        self.rewrap()
        if self.matches:
            current = self.current
            query = self._query
            self.search(query)
            self.current = min(current, len(self.matches) - 1)

    def set_wrapped(self, wrapped: bool) -> None:
        """Wrap long lines, or cut them at the edge (left and right scroll sideways)."""
        self.wrapped = wrapped
        self.styles.overflow_x = "hidden" if wrapped else "auto"
        self._width = 0
        self.scroll_to(x=0, animate=False, immediate=True)
        self.rewrap()

    # -- layout ----------------------------------------------------------------------------
    def on_resize(self) -> None:
        self.rewrap()

    def rewrap(self) -> None:
        width = max(1, self.scrollable_content_region.width)
        if width == self._width and self.rows:
            return
        top = self.rows[self.top_row] if self.rows and self.top_row < len(self.rows) else None
        self._width = width
        self.rows = wrap(self.lines, width) if self.wrapped else \
            [Row(index, 0, len(line)) for index, line in enumerate(self.lines)]
        self._first_row = [0] * len(self.lines)
        for index in range(len(self.rows) - 1, -1, -1):
            self._first_row[self.rows[index].line] = index
        self._row_starts = [r.line * 0x1_0000_0000 + r.start for r in self.rows]
        widest = width if self.wrapped else max(
            (cell_len(line) for line in self.lines), default=width)
        self.virtual_size = Size(max(width, widest), len(self.rows))
        if top is not None:  # keep the same text at the top
            self.scroll_to(y=self.row_of(top.line, top.start), animate=False, immediate=True)
        self.refresh()
        self.post_message(self.Moved())

    @property
    def top_row(self) -> int:
        return int(self.scroll_y)

    @property
    def page_rows(self) -> int:
        return max(1, self.scrollable_content_region.height)

    def row_of(self, line: int, column: int) -> int:
        """The row that shows character ``column`` of ``line``."""
        index = bisect_right(self._row_starts, line * 0x1_0000_0000 + column) - 1
        return max(0, index)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self.post_message(self.Moved())

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._texts.clear()  # a theme change: colours baked into the cached lines

    # -- search ----------------------------------------------------------------------------
    def search(self, query: str) -> int:
        """Mark every match of ``query``; return how many (no match is chosen yet)."""
        self._query = query
        self.matches = find(self.lines, query)
        self.current = -1
        self._by_line = {}
        for index, match in enumerate(self.matches):
            self._by_line.setdefault(match.line, []).append(index)
        self.refresh()
        return len(self.matches)

    def first_from_top(self) -> int:
        """The first match at or below the top of the view (the first one when none is)."""
        if not self.rows or not self.matches:
            return -1
        top = self.rows[min(self.top_row, len(self.rows) - 1)]
        for index, match in enumerate(self.matches):
            if (match.line, match.end) > (top.line, top.start):
                return index
        return 0

    def goto(self, index: int) -> None:
        """Make match ``index`` the current one and scroll it into view."""
        if not self.matches:
            return
        self.current = index % len(self.matches)
        match = self.matches[self.current]
        row = self.row_of(match.line, match.start)
        if not self.top_row <= row < self.top_row + self.page_rows:
            self.scroll_to(y=max(0, row - self.page_rows // 3), animate=False, immediate=True)
        if not self.wrapped:  # the match in view sideways too
            left = cell_len(self.lines[match.line][:match.start])
            width = self.scrollable_content_region.width
            if not self.scroll_x <= left < self.scroll_x + width:
                self.scroll_to(x=max(0, left - width // 3), animate=False, immediate=True)
        self.refresh()

    # -- drawing ---------------------------------------------------------------------------
    def _line_text(self, line: int) -> Text:
        text = self._texts.get(line)
        if text is None:
            if len(self._texts) >= LINE_CACHE:
                self._texts.clear()
            text = Text(self.lines[line], style=self.rich_style, no_wrap=True, end="")
            if self.json_like:
                for token in JSON_TOKENS.finditer(text.plain):
                    kind = token.lastgroup or "string"
                    text.stylize(self.get_component_rich_style(f"pager--{kind}"),
                                 token.start(), token.end())
            self._texts[line] = text
        return text

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        index = self.top_row + y
        if index >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        row = self.rows[index]
        piece = self._line_text(row.line)[row.start:row.end]
        for match_index in self._by_line.get(row.line, ()):
            match = self.matches[match_index]
            start, end = max(match.start, row.start), min(match.end, row.end)
            if start < end:
                style = "pager--current" if match_index == self.current else "pager--match"
                piece.stylize(self.get_component_rich_style(style), start - row.start,
                              end - row.start)
        strip = Strip(piece.render(self.app.console))
        left = 0 if self.wrapped else int(self.scroll_x)
        return strip.crop_extend(left, left + width, self.rich_style)
