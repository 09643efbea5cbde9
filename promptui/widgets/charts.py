"""The pulse screen's charts: one row per process (and one for all of them), Textual's
sparkline per series with its last minute's value beside it. At 80 columns a row shows the
essentials (runs/min, failures, p95 run time, queue); from 120 columns every series."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import fmean

from rich.color import Color
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.renderables.sparkline import Sparkline as SparklineChart
from textual.widgets import Static

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


WIDE_COLUMNS = 120  # from this width every series shows; below, the essentials
NAME_WIDTH, SPARK_WIDTH, VALUE_WIDTH = 13, 8, 7  # 13 + 7 x 15 = 118: 120 columns


def shown_series(wide: bool) -> tuple[Series, ...]:
    """The series a row shows at this width."""
    return SERIES if wide else tuple(series for series in SERIES if series.essential)


def _grid(wide: bool) -> Table:
    grid = Table.grid()
    grid.add_column(width=NAME_WIDTH, no_wrap=True)
    for _ in shown_series(wide):
        grid.add_column(width=SPARK_WIDTH, no_wrap=True)
        grid.add_column(width=VALUE_WIDTH, no_wrap=True)
    return grid


class ChartHeader(Static):
    """The column titles over the rows."""

    def show(self, wide: bool) -> None:
        """The titles of the series shown at this width."""
        grid = _grid(wide)
        cells: list[RenderableType] = [Text("process")]
        for series in shown_series(wide):
            cells += [Text(series.title), Text("")]
        grid.add_row(*cells)
        self.update(grid)


class PulseRow(Static):
    """One process's (or all processes') charts, drawn as one widget: a sparkline renderable
    (Textual's own) and the last value per series. One widget a row, not fifteen: 200
    processes' rows are 200 widgets to style and lay out, not 3,000."""

    def __init__(self, process: str) -> None:
        super().__init__("", classes="pulse-row")
        self.process = process
        self._shown: tuple[object, ...] | None = None

    def show(self, data: dict[str, list[float]], cost_recorded: bool, wide: bool) -> None:
        """Redraw when a series (or the width) changed since the last time."""
        key = (wide, cost_recorded, *(tuple(data[s.key]) for s in SERIES))
        if key == self._shown:
            return
        self._shown = key
        low, high = _colours(self)
        title = "(all)" if self.process == ALL else clip(self.process, NAME_WIDTH - 1)
        grid = _grid(wide)
        cells: list[RenderableType] = [Text(title)]
        for series in shown_series(wide):
            points = data[series.key]
            last = points[-1] if points else 0.0
            value = series.shown(last) if series.key != "cost" or cost_recorded else "n/a"
            cells += [SparklineChart(points, width=SPARK_WIDTH, min_color=low, max_color=high,
                                     summary_function=mean), Text(" " + value)]
        grid.add_row(*cells)
        self.update(grid)


def _colours(widget: Static) -> tuple[Color, Color]:
    """The theme's quiet and loud colours for a chart's low and high values."""
    theme = widget.app.current_theme
    return (Color.parse(theme.success or theme.primary),
            Color.parse(theme.error or theme.accent or theme.primary))
