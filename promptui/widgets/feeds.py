"""The anomaly feed and the activity log: ``Log`` widgets (fast, bounded), written in batches by
the pump, that follow new lines on their own terms.

Textual's ``Log`` follows only while its view happens to be at the end, so a resize, a spell
hidden under another screen or a filter bar opening left it stranded, and the feed froze. A
``FollowLog`` keeps a follow state of its own: while following it goes to the end after every
write, resize and show, whatever happened to the scroll position meanwhile; once the operator
scrolls up (or pauses it) it holds still, keeps what arrives aside and counts it ("+N new"), and
``end`` or ``F`` (or scrolling back to the bottom) follows again."""

from __future__ import annotations

import time
from typing import Any

from rich.highlighter import Highlighter
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.events import Click, MouseScrollUp
from textual.message import Message
from textual.strip import Strip
from textual.widgets import Log

from promptui.format import TimeMode, clock, when
from promptui.store import ActivityLine, FeedLine

SEVERITY_MARK = {"critical": "✖", "warning": "▲", "info": "·"}
CURSOR_STYLE = Style(reverse=True)
FEED_MAX_LINES = 1000
ACTIVITY_MAX_LINES = 1000
DATED_WIDTH = 100  # a log at least this wide shows today's times with their date too
RETIME_SECONDS = 5.0  # relative times ("3 min ago") are rewritten this often


class SeverityHighlighter(Highlighter):
    """Colours a feed line by the severity mark after its time stamp."""

    STYLES = {"✖": "bold red", "▲": "yellow", "·": "green"}

    def highlight(self, text: Text) -> None:
        plain = text.plain
        # The time comes first and its width depends on the time format: find the mark.
        at = min((i for i in (plain.find(f" {m} ") for m in self.STYLES) if i >= 0),
                 default=-1)
        if at < 0:
            return
        end = plain.find(":", at + 3)
        text.stylize(self.STYLES[plain[at + 1]], at + 1, end if end > 0 else len(plain))
        text.stylize("dim", 0, at)


class FollowLog(Log):
    """A bounded log that follows new lines until the operator scrolls up or pauses it.

    Each line may carry the item it was made from (a FeedLine, an ActivityLine): with the log
    focused, up and down move a line cursor (the log holds still meanwhile), Enter posts
    ``Chosen`` and ``v`` posts ``Viewed`` with that item, for the screen to drill down or show
    the whole value."""

    BINDINGS = [
        Binding("end,F", "follow", "Follow", show=False, id="promptui.feed.follow"),
        Binding("enter", "choose", "Open", show=False, id="promptui.feed.open"),
        Binding("v", "view", "View", show=False, id="promptui.feed.view"),
    ]

    class Chosen(Message):
        def __init__(self, log: FollowLog, item: Any, text: str) -> None:
            super().__init__()
            self.log, self.item, self.text = log, item, text

    class Viewed(Message):
        def __init__(self, log: FollowLog, item: Any, text: str) -> None:
            super().__init__()
            self.log, self.item, self.text = log, item, text

    def __init__(self, max_lines: int, **kwargs: object) -> None:
        super().__init__(max_lines=max_lines, auto_scroll=False, **kwargs)  # type: ignore[arg-type]
        self.following = True
        self.cursor: int | None = None  # the line the operator moved to
        self._items: list[Any] = []  # in step with the lines shown
        self._pending: list[tuple[str, Any]] = []
        self._pending_count = 0
        self.time_mode: TimeMode = "iso"
        self._now = 0.0  # the room's clock at the last retime (0: not told yet)
        self._retimed = 0.0
        self._dated = False  # the lines carry today's date (the log is DATED_WIDTH wide)

    # -- times ---------------------------------------------------------------------------------
    def stamp(self, at: float) -> str:
        """``at`` as this log shows times now (the room's time format; today's date is left
        out when the log is narrower than DATED_WIDTH)."""
        now = self._now or getattr(self.app, "clock", time.time)()  # the room's clock
        # A log line is never in the future: an event newer than this tick's clock is "now".
        return when(at, self.time_mode, max(now, at), narrow=self.size.width < DATED_WIDTH)

    def render_item(self, item: Any) -> str | None:
        """The line for ``item`` in the current time format; None: keep the text given."""
        return None

    def retime(self, mode: TimeMode, now: float) -> None:
        """Follow the room's time format: rewrite every line when it changed, and relative
        times every RETIME_SECONDS (they age)."""
        changed = mode != self.time_mode
        self.time_mode, self._now = mode, now
        if not changed and not (mode == "relative" and now - self._retimed >= RETIME_SECONDS):
            return
        self._retimed = now
        self.rewrite()

    def rewrite(self) -> None:
        """Draw every line again from its item (a new time format, a new width), keeping the
        cursor on its item and a held view where it was."""
        paired: list[tuple[str, Any]] = []
        cursor_item = self.item_at(self.cursor)
        for index, item in enumerate(self._items):
            if item is not None and paired and paired[-1][1] is item:
                continue  # a wrapped line's next row: the item is drawn whole again
            paired.append((self.lines[index], item))
        top = self.scroll_y
        self.clear()
        self._items = []
        self._write(paired)
        if self.cursor is not None:
            self.cursor = next((i for i, item in enumerate(self._items) if item is cursor_item),
                               min(self.cursor, max(0, self.line_count - 1)))
        if self.following:
            self._to_end()
        else:
            self.scroll_to(0, top, animate=False, immediate=True)

    # -- lines in ------------------------------------------------------------------------------
    def add_lines(self, texts: list[str], items: list[Any] | None = None) -> None:
        if not texts:
            return
        paired = list(zip(texts, items if items is not None else [None] * len(texts),
                          strict=True))
        if self.following:
            self._write(paired)
            self._to_end()
            return
        self._pending.extend(paired)
        del self._pending[:-(self.max_lines or FEED_MAX_LINES)]  # at most what the log holds
        self._pending_count += len(texts)
        self._show_status()

    def reset(self, texts: list[str], items: list[Any] | None = None) -> None:
        """Show ``texts`` afresh (a screen coming back); a held log keeps its view."""
        if not self.following:
            return
        self.clear()
        self._items.clear()
        self.add_lines(texts, items)

    def _write(self, paired: list[tuple[str, Any]]) -> None:
        # One line each: a newline inside a value must not split it from its item.
        paired = [(self.render_item(item) or text if item is not None else text, item)
                  for text, item in paired]  # in the time format of the moment
        self._put(paired)

    def _put(self, paired: list[tuple[str, Any]]) -> None:
        """Write drawn lines, each with its item (a subclass may cut one into rows)."""
        self.write_lines([text.replace("\n", " ⏎ ") for text, _ in paired], scroll_end=False)
        self._items.extend(item for _, item in paired)
        extra = len(self._items) - self.line_count
        if extra > 0:  # the oldest lines were pruned
            del self._items[:extra]
            if self.cursor is not None:
                self.cursor = max(0, self.cursor - extra)

    @property
    def pending(self) -> int:
        """Lines that arrived while the log held still."""
        return self._pending_count

    def item_at(self, index: int | None) -> Any:
        return self._items[index] if index is not None and 0 <= index < len(self._items) \
            else None

    # -- follow and hold -----------------------------------------------------------------------
    def follow(self) -> None:
        if self._pending:
            self._write(self._pending)
        self._pending.clear()
        self._pending_count = 0
        self.following = True
        self.cursor = None
        self._to_end()
        self._show_status()

    def hold(self) -> None:
        self.following = False
        self._show_status()

    def action_follow(self) -> None:
        self.follow()

    def _to_end(self) -> None:
        # Now and once more after the next layout: a hidden or resized log has a stale size.
        self.scroll_to(0, self.max_scroll_y, animate=False, immediate=True)
        self.refresh()
        self.call_after_refresh(self._settle_at_end)

    def _settle_at_end(self) -> None:
        if self.following:
            self.scroll_to(0, self.max_scroll_y, animate=False, immediate=True)

    def _show_status(self) -> None:
        if self.following:
            self.border_subtitle = ""
        else:
            self.border_subtitle = f"held +{self._pending_count} new (end or F follows)"

    # -- the cursor ------------------------------------------------------------------------------
    def move_cursor(self, delta: int) -> None:
        last = self.line_count - 1
        if last < 0:
            return
        start = last + 1 if self.cursor is None else self.cursor
        target = start + delta
        if self.cursor is not None and target > last and delta > 0:
            self.follow()  # down past the newest line: follow again
            return
        self.hold()
        self.cursor = max(0, min(last, target))
        height = max(1, self.scrollable_content_region.height)
        if self.cursor < self.scroll_y:
            self.scroll_to(0, self.cursor, animate=False, immediate=True)
        elif self.cursor >= self.scroll_y + height:
            self.scroll_to(0, self.cursor - height + 1, animate=False, immediate=True)
        self.refresh()

    def _render_line(self, y: int, scroll_x: int, width: int) -> Strip:
        strip = super()._render_line(y, scroll_x, width)
        if y == self.cursor:
            strip = strip.apply_style(CURSOR_STYLE)
        return strip

    def action_choose(self) -> None:
        if self.cursor is not None:
            self.post_message(self.Chosen(self, self.item_at(self.cursor),
                                          self.lines[self.cursor]))

    def action_view(self) -> None:
        if self.cursor is not None:
            self.post_message(self.Viewed(self, self.item_at(self.cursor),
                                          self.lines[self.cursor]))

    def on_click(self, event: Click) -> None:
        line = int(self.scroll_y) + event.y
        if 0 <= line < self.line_count:
            self.move_cursor(line - (self.line_count if self.cursor is None else self.cursor))

    # -- the operator scrolling ---------------------------------------------------------------
    def _on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        self.hold()

    def action_scroll_up(self) -> None:
        self.move_cursor(-1)

    def action_scroll_down(self) -> None:
        if self.cursor is not None:
            self.move_cursor(1)

    def action_page_up(self) -> None:
        self.move_cursor(-max(1, self.scrollable_content_region.height - 1))

    def action_page_down(self) -> None:
        if self.cursor is not None:
            self.move_cursor(max(1, self.scrollable_content_region.height - 1))

    def action_scroll_home(self) -> None:
        self.move_cursor(-self.line_count)

    def action_scroll_end(self) -> None:
        self.follow()

    def on_resize(self) -> None:
        dated = self.size.width >= DATED_WIDTH
        if dated != self._dated:  # lines drawn before the log had its width (or resized)
            self._dated = dated
            self.rewrite()
        if self.following:
            self._to_end()

    def on_show(self) -> None:
        if self.following:
            self._to_end()


class AnomalyFeed(FollowLog):
    """Severity-marked lines; ``space`` pauses (lines wait, counted) and resumes (they flush)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(FEED_MAX_LINES, highlight=True, **kwargs)
        self.highlighter = SeverityHighlighter()
        self.border_title = "Anomalies"

    @staticmethod
    def render_line_text(line: FeedLine, stamp: str | None = None) -> str:
        mark = SEVERITY_MARK.get(line.severity, "·")
        return f"{stamp or clock(line.at)} {mark} {line.process}: {line.text}"

    def render_item(self, item: Any) -> str | None:
        return self.render_line_text(item, self.stamp(item.at)) \
            if isinstance(item, FeedLine) else None

    def add(self, lines: list[FeedLine]) -> None:
        self.add_lines([self.render_line_text(line) for line in lines], list(lines))

    @property
    def paused(self) -> bool:
        return not self.following

    def toggle_pause(self) -> bool:
        if self.following:
            self.hold()
        else:
            self.follow()
        return not self.following


class ActivityLog(FollowLog):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(ACTIVITY_MAX_LINES, **kwargs)
        self.border_title = "Activity"

    @staticmethod
    def render_line_text(line: ActivityLine, stamp: str | None = None) -> str:
        who = f"{line.process}: " if line.process else ""
        return f"{stamp or clock(line.at)} {who}{line.text}"

    def render_item(self, item: Any) -> str | None:
        return self.render_line_text(item, self.stamp(item.at)) \
            if isinstance(item, ActivityLine) else None

    def add(self, lines: list[ActivityLine]) -> None:
        self.add_lines([self.render_line_text(line) for line in lines], list(lines))
