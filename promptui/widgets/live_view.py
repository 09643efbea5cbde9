"""The Live tab: the steps of the running run(s) as they happen; runs that finished between two
ticks are written whole, so a fast run is not missed. When nothing runs it says "idle". A tool
call that reports progress (an MCP server's notifications) shows a bar with its message under
the status line while it runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import RichLog, Static

from promptui.format import age, clip
from promptui.store import ProgressLine
from promptui.widgets.runs import duration, run_end, run_header, step_line
from runtime_core.control.views import RunView

LIVE_MAX_LINES = 1000
BAR_WIDTH = 20


def progress_text(line: ProgressLine) -> Text:
    """``  ⋯ step 3 fetch ████████░░░░ 40% 2/5 downloading``; no bar when the total is unknown."""
    text = Text(f"  ⋯ step {line.step} ", style="dim")
    text.append(f"{line.tool} ", style="magenta")
    fraction = line.fraction
    if fraction is not None:
        filled = round(fraction * BAR_WIDTH)
        text.append("█" * filled, style="cyan")
        text.append("░" * (BAR_WIDTH - filled), style="dim")
        text.append(f" {fraction:4.0%} {line.progress:g}/{line.total:g}")
    else:
        text.append(f"{line.progress:g} so far")
    if line.message:
        text.append(f"  {clip(line.message, 120)}")
    return text


class LiveView(Vertical):
    """A status line over a log of the runs' steps."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._written: dict[str, int] = {}  # run id -> steps already in the log
        self._runs_ended: set[str] = set()  # runs whose end line is in the log
        self._started = False

    def compose(self) -> ComposeResult:
        yield Static("", id="live-status")
        yield Static("", id="live-progress")
        yield RichLog(id="live-log", max_lines=LIVE_MAX_LINES, wrap=True, markup=False)

    @property
    def log_widget(self) -> RichLog:
        return self.query_one("#live-log", RichLog)

    def _steps(self, run: RunView) -> None:
        log = self.log_widget
        if run.run_id not in self._written:
            log.write(run_header(run))
            self._written[run.run_id] = 0
        for step in run.steps[self._written[run.run_id]:]:
            log.write(step_line(step))
        self._written[run.run_id] = len(run.steps)

    def show(self, runs: Sequence[RunView], now: float,
             progress: Mapping[str, ProgressLine] | None = None) -> None:
        running = [r for r in runs if r.state == "running"]
        finished = sorted((r for r in runs if r.finished_at is not None
                           and r.state not in ("running", "waiting")),
                          key=lambda r: r.finished_at or 0.0)
        if not self._started:
            # Opening the screen: history stays in the Runs tab; show the last run when idle.
            self._started = True
            history = finished if running else finished[:-1]
            self._runs_ended.update(r.run_id for r in history)
        for run in finished:
            if run.run_id not in self._runs_ended:
                self._steps(run)
                self.log_widget.write(run_end(run))
                self._runs_ended.add(run.run_id)
        for run in running:
            self._steps(run)
        # The runtime keeps a bounded list of runs: forget the ones it dropped.
        present = {r.run_id for r in runs}
        self._runs_ended &= present
        self._written = {k: v for k, v in self._written.items() if k in present}
        self.query_one("#live-status", Static).update(self._status(running, finished, now))
        shown = progress or {}
        self._progress([shown[r.run_id] for r in running if r.run_id in shown])

    def _progress(self, lines: list[ProgressLine]) -> None:
        shown = self.query_one("#live-progress", Static)
        shown.display = bool(lines)
        if lines:
            shown.update(Text("\n").join(progress_text(line) for line in lines))

    @staticmethod
    def _status(running: list[RunView], finished: list[RunView], now: float) -> Text:
        if running:
            text = Text("● running ", style="bold cyan")
            text.append(", ".join(f"run {r.run_id[:8]} ({r.trigger_type}, step "
                                  f"{len(r.steps)}, {duration(r, now)})" for r in running))
            return text
        text = Text("idle", style="bold")
        if finished:
            last = finished[-1]
            ago = age(now - last.finished_at) if last.finished_at is not None else "?"
            text.append(f" — last run {last.run_id[:8]} {last.state} {ago} ago", style="dim")
        else:
            text.append(" — no runs yet", style="dim")
        return text
