"""The anomaly feed and the activity log: plain ``Log`` widgets (fast, bounded), written in
batches by the pump. The feed can be paused with a "+N new" count so an operator can read."""

from __future__ import annotations

from rich.highlighter import Highlighter
from rich.text import Text
from textual.widgets import Log

from promptui.format import clock
from promptui.store import FeedLine

SEVERITY_MARK = {"critical": "✖", "warning": "▲", "info": "·"}
FEED_MAX_LINES = 1000
ACTIVITY_MAX_LINES = 1000


class SeverityHighlighter(Highlighter):
    """Colours a feed line by the severity mark after its time stamp."""

    STYLES = {"✖": "bold red", "▲": "yellow", "·": "green"}

    def highlight(self, text: Text) -> None:
        plain = text.plain
        style = self.STYLES.get(plain[9:10]) if len(plain) > 9 else None
        if style is not None:
            end = plain.find(":", 11)
            text.stylize(style, 9, end if end > 0 else len(plain))
        text.stylize("dim", 0, 8)


class AnomalyFeed(Log):
    """Severity-marked lines; ``space`` pauses (lines wait, counted) and resumes (they flush)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(max_lines=FEED_MAX_LINES, auto_scroll=True, highlight=True,
                         **kwargs)  # type: ignore[arg-type]
        self.highlighter = SeverityHighlighter()
        self.paused = False
        self._pending: list[str] = []
        self._pending_count = 0
        self.border_title = "Anomalies"

    @staticmethod
    def render_line_text(line: FeedLine) -> str:
        mark = SEVERITY_MARK.get(line.severity, "·")
        return f"{clock(line.at)} {mark} {line.process}: {line.text}"

    def add(self, lines: list[FeedLine]) -> None:
        if not lines:
            return
        texts = [self.render_line_text(line) for line in lines]
        if self.paused:
            self._pending.extend(texts)
            del self._pending[:-FEED_MAX_LINES]  # the pause holds at most what the feed shows
            self._pending_count += len(texts)
            self._show_status()
        else:
            self.write_lines(texts)

    def toggle_pause(self) -> bool:
        self.paused = not self.paused
        if not self.paused:
            if self._pending:
                self.write_lines(self._pending)
            self._pending.clear()
            self._pending_count = 0
        self._show_status()
        return self.paused

    def _show_status(self) -> None:
        if self.paused:
            self.border_subtitle = f"paused +{self._pending_count} new (space resumes)"
        else:
            self.border_subtitle = ""

    @property
    def pending(self) -> int:
        return self._pending_count


class ActivityLog(Log):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(max_lines=ACTIVITY_MAX_LINES, auto_scroll=True, **kwargs)  # type: ignore[arg-type]
        self.border_title = "Activity"

    def add(self, lines: list[str], at: float) -> None:
        if lines:
            stamp = clock(at)
            self.write_lines([f"{stamp} {line}" for line in lines])

