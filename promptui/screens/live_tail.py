"""The live tail (`L`): every process's runs and steps as they happen, one line each, filtered
by the dashboard's process filter. It follows the newest line until the operator moves up
(then it holds and counts "+N new"; end or F follows again); `/` searches with n and N, `g`
goes to a time, Enter drills down to the line's run and `v` shows the whole line; `w` wraps
long lines (each row of a wrapped line stands for it: Enter and v work on any of them) or cuts
them again."""

from __future__ import annotations

import re
import textwrap
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Footer, Input, Static

from promptui.actions import TAIL_ACTIONS, bindings
from promptui.format import clock, parse_when
from promptui.screens.base import LiveScreen, drill_down, view_line
from promptui.screens.dialogs import AskDialog
from promptui.store import ActivityLine, FeedLine, UIStore
from promptui.widgets.feeds import FollowLog

TAIL_SHOWN = 5000  # lines the tail widget holds


WRAP_INDENT = "    "  # a wrapped line's next rows, so they read as one line


class TailLog(FollowLog):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(TAIL_SHOWN, **kwargs)
        self.border_title = "Live tail"
        self.wrapped = False  # long lines cut at the edge (False) or wrapped (True)

    @staticmethod
    def render_line_text(line: ActivityLine, stamp: str | None = None) -> str:
        who = f"{line.process[:20]:<20} " if line.process else ""
        return f"{stamp or clock(line.at)} {who}{line.text}"

    def render_item(self, item: Any) -> str | None:
        return self.render_line_text(item, self.stamp(item.at)) \
            if isinstance(item, ActivityLine) else None

    def _put(self, paired: list[tuple[str, Any]]) -> None:
        width = self.scrollable_content_region.width
        if not self.wrapped or width < 2 * len(WRAP_INDENT):
            super()._put(paired)
            return
        rows: list[tuple[str, Any]] = []
        for text, item in paired:
            pieces = textwrap.wrap(text.replace("\n", " ⏎ "), width,
                                   subsequent_indent=WRAP_INDENT, drop_whitespace=False,
                                   replace_whitespace=False) or [""]
            rows.extend((piece, item) for piece in pieces)
        super()._put(rows)

    def toggle_wrap(self) -> bool:
        """Wrap long lines, or cut them again; True when they are wrapped now."""
        self.wrapped = not self.wrapped
        self.rewrite()
        return self.wrapped

    def on_resize(self) -> None:
        if self.wrapped:
            self.rewrite()  # the rows follow the new width
        super().on_resize()

    def add(self, lines: list[ActivityLine]) -> None:
        self.add_lines([self.render_line_text(line) for line in lines], list(lines))


class LiveTailScreen(LiveScreen):
    ACTIONS = TAIL_ACTIONS
    BINDINGS = bindings(TAIL_ACTIONS)
    DEFAULT_CSS = """
    LiveTailScreen #tail-title { height: 1; padding: 0 1; }
    LiveTailScreen TailLog { height: 1fr; border: round $panel-lighten-2;
                             border-subtitle-color: $warning; overflow-x: hidden; }
    LiveTailScreen #tail-search { dock: bottom; margin-bottom: 1; height: 3;
                                  border: tall $accent; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._seen = 0  # the store's tail_count already taken
        self._filter_text = ""
        self._search: re.Pattern[str] | None = None
        self._matches: list[int] = []
        self._match = -1

    def compose(self) -> ComposeResult:
        yield Static("", id="tail-title")
        yield TailLog(id="tail-log")
        yield Input(placeholder="search: text or regex in the lines; enter finds, n/N next, "
                    "esc closes", id="tail-search")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#tail-search", Input).display = False
        self.log_widget.focus()
        self._refill(self.room.store)

    @property
    def log_widget(self) -> TailLog:
        return self.query_one(TailLog)

    # -- the pump --------------------------------------------------------------------------------
    async def show(self, store: UIStore, now: float, feed: list[FeedLine],
                   activity: list[ActivityLine]) -> None:
        if not self.is_mounted:
            return
        if store.process_filter.text != self._filter_text:
            self._refill(store)
            return
        fresh = store.tail_count - self._seen
        self._seen = store.tail_count
        if fresh > 0:
            lines = list(store.tail)[-min(fresh, len(store.tail)):]
            self.log_widget.add(self._kept(store, lines))
        self._draw_title(store)

    def on_screen_resume(self) -> None:
        self._refill(self.room.store)

    def _refill(self, store: UIStore) -> None:
        self._filter_text = store.process_filter.text
        self._seen = store.tail_count
        lines = self._kept(store, list(store.tail))
        self.log_widget.reset([TailLog.render_line_text(x) for x in lines], lines)  # re-timed
        self._draw_title(store)

    def _kept(self, store: UIStore, lines: list[ActivityLine]) -> list[ActivityLine]:
        """The lines of the processes the dashboard's filter shows (summaries always)."""
        wanted = store.process_filter
        if not wanted.text:
            return lines
        states = {name: row.state for name, row in store.processes.items()}
        return [x for x in lines if not x.process or wanted.matches(
            x.process, states.get(x.process, ""))]

    def _draw_title(self, store: UIStore) -> None:
        text = Text("Live tail", style="bold")
        text.append(f"  {len(store.processes)} processes", style="dim")
        if store.process_filter.text:
            text.append(f"  filter /{store.process_filter.text}", style="cyan")
        if self._search is not None:
            found = len(self._matches)
            where = f"{self._match + 1}/{found}" if found and self._match >= 0 else f"0/{found}"
            text.append(f"  search {self._search.pattern!r}: match {where}", style="yellow")
        if self.size.width >= 110:  # the footer has the keys; a wide screen says more
            text.append("  (enter: its run · v: whole line · F: follow)", style="dim")
        self.query_one("#tail-title", Static).update(text)

    # -- search ----------------------------------------------------------------------------------
    def action_search(self) -> None:
        box = self.query_one("#tail-search", Input)
        box.display = True
        box.focus()

    @on(Input.Submitted, "#tail-search")
    def _searched(self, event: Input.Submitted) -> None:
        event.input.display = False
        self.log_widget.focus()
        text = event.value.strip()
        if not text:
            self._search, self._matches = None, []
            self._draw_title(self.room.store)
            return
        try:
            self._search = re.compile(text, re.IGNORECASE)
        except re.error:
            self._search = re.compile(re.escape(text), re.IGNORECASE)
        self._find(backwards=True, fresh=True)

    def _find(self, *, backwards: bool, fresh: bool = False) -> None:
        log = self.log_widget
        if self._search is None:
            self.notify("search first with /", timeout=2)
            return
        self._matches = [i for i, line in enumerate(log.lines) if self._search.search(line)]
        if not self._matches:
            self._match = -1
            self.notify(f"no line matches {self._search.pattern!r}", timeout=3)
            self._draw_title(self.room.store)
            return
        here = log.line_count if fresh or log.cursor is None else log.cursor
        if backwards:
            before = [i for i in self._matches if i < here]
            target = before[-1] if before else self._matches[-1]  # wrap to the newest
        else:
            after = [i for i in self._matches if i > here]
            target = after[0] if after else self._matches[0]  # wrap to the oldest
        self._match = self._matches.index(target)
        log.move_cursor(target - (log.line_count if log.cursor is None else log.cursor))
        self._draw_title(self.room.store)

    def action_next_match(self) -> None:
        self._find(backwards=False)

    def action_previous_match(self) -> None:
        self._find(backwards=True)

    # -- time, follow, drill down ------------------------------------------------------------
    def action_goto(self) -> None:
        now = self.room.clock()

        def check(value: str) -> str:
            return "" if parse_when(value, now) is not None else \
                "HH:MM, HH:MM:SS (today) or an ISO date-time, e.g. 2026-05-28T20:00"

        def jump(value: str | None) -> None:
            when = parse_when(value or "", now)
            if when is None:
                return
            log = self.log_widget
            index = next((i for i in range(log.line_count)
                          if (item := log.item_at(i)) is not None and item.at >= when), None)
            if index is None:
                self.notify("no line at or after that time is held here", timeout=3)
                return
            log.move_cursor(index - (log.line_count if log.cursor is None else log.cursor))

        self.app.push_screen(AskDialog("Go to time", "the first line at or after this time",
                                       clock(now), check), jump)

    def action_follow(self) -> None:
        self.log_widget.follow()

    def action_wrap(self) -> None:
        wrapped = self.log_widget.toggle_wrap()
        self.notify("long lines wrapped (w cuts them)" if wrapped
                    else "long lines cut at the edge (w wraps them)", timeout=2)

    @on(FollowLog.Chosen)
    def _line_chosen(self, event: FollowLog.Chosen) -> None:
        event.stop()
        drill_down(self, event.item)

    @on(FollowLog.Viewed)
    def _line_viewed(self, event: FollowLog.Viewed) -> None:
        event.stop()
        view_line(self, event.item, event.text)

    def action_back(self) -> None:
        box = self.query_one("#tail-search", Input)
        if box.display:
            box.display = False
            self.log_widget.focus()
            return
        self.app.pop_screen()
