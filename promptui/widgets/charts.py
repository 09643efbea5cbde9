"""The pulse screen's charts: one row per process (and one for all of them), a Textual
``Sparkline`` per series with its last minute's value beside it. At 80 columns a row shows the
essentials (runs/min, failures, p95 run time, queue); from 120 columns every series."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import fmean

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, Sparkline

from promptui.format import clip
from runtime_core.control.pulse import PulseBuckets


@dataclass(frozen=True, slots=True)
class Series:
    """One chart of a row: its key, its column title, whether it shows at 80 columns, and how
    its last value reads."""

    key: str
    title: str
    essential: bool
    shown: Callable[[float], str]


def mean(values: Sequence[float]) -> float:
    """How a chart cell sums up the minutes it covers (60 minutes in 8 cells): their mean,
    so a quiet stretch looks quiet, not as high as its one busy minute."""
    return fmean(values) if values else 0.0


def _count(value: float) -> str:
    return f"{value:,.0f}" if value < 10_000 else f"{value / 1000:.0f}k"


def _ms(value: float) -> str:
    if not value:
        return "-"
    return f"{value:.0f}ms" if value < 1000 else f"{value / 1000:.1f}s"


def _cost(value: float) -> str:
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


SERIES = (
    Series("runs", "runs/min", True, _count),
    Series("failures", "failed", True, _count),
    Series("p50_ms", "p50", False, _ms),
    Series("p95_ms", "p95", True, _ms),
    Series("queue", "queue", True, _count),
    Series("tokens", "tokens", False, _count),
    Series("cost", "cost", False, _cost),
)
ALL = "all"  # the row of every process together


def series_of(buckets: PulseBuckets, now: float) -> dict[str, list[float]]:
    """Every series of ``buckets`` over the window ending at ``now``, oldest minute first."""
    view = buckets.view(now)
    return {"runs": [float(v) for v in view.runs],
            "failures": [float(v) for v in view.failures],
            "p50_ms": view.p50_ms, "p95_ms": view.p95_ms,
            "queue": [float(v) for v in buckets.queue_series(now)],
            "tokens": [float(v) for v in view.tokens], "cost": view.cost}


class ChartHeader(Horizontal):
    """The column titles over the rows."""

    def compose(self) -> ComposeResult:
        yield Label("process", classes="pulse-name")
        for series in SERIES:
            yield Label(series.title, classes="pulse-title" +
                        ("" if series.essential else " wide-only"))


class PulseRow(Horizontal):
    """One process's (or all processes') charts."""

    def __init__(self, process: str) -> None:
        super().__init__(classes="pulse-row")
        self.process = process
        self._shown: dict[str, list[float]] = {}
        self._waiting: tuple[dict[str, list[float]], bool] | None = None  # before mounting

    def compose(self) -> ComposeResult:
        title = "all processes" if self.process == ALL else clip(self.process, 14)
        yield Label(title, classes="pulse-name")
        for series in SERIES:
            extra = "" if series.essential else " wide-only"
            yield Sparkline([], classes="pulse-spark" + extra, id=f"spark-{series.key}",
                            summary_function=mean)
            yield Label("", classes="pulse-value" + extra, id=f"value-{series.key}")

    def on_mount(self) -> None:
        self.call_after_refresh(self._draw_waiting)  # once the charts inside are mounted

    def _draw_waiting(self) -> None:
        if self._waiting is not None:
            self.show(*self._waiting)

    def show(self, data: dict[str, list[float]], cost_recorded: bool) -> None:
        """Redraw the series that changed since the last time."""
        if not self.is_mounted or not self.children:  # appended this tick: drawn on mount
            self._waiting = (data, cost_recorded)
            return
        self._waiting = None
        for series in SERIES:
            points = data[series.key]
            if self._shown.get(series.key) == points:
                continue
            self._shown[series.key] = points
            self.query_one(f"#spark-{series.key}", Sparkline).data = points
            last = points[-1] if points else 0.0
            text = series.shown(last) if series.key != "cost" or cost_recorded else "n/a"
            self.query_one(f"#value-{series.key}", Label).update(text)
