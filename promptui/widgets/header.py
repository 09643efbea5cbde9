"""The one-line header: a read-only badge (first, so a narrow terminal never cuts it off),
runtime name, clock, the journal badges (degraded; a damaged journal left behind), a
reconnecting badge when an attached server is away, process counts by
state, events/s and total queued."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from promptui.format import clock
from promptui.store import UIStore

STATE_MARKS = (("running", "●", "green"), ("suspended", "◐", "yellow"),
               ("failed", "✖", "red"), ("stopped", "○", "grey50"))
WIDE = 110  # below this the state counts drop their words


class StatusHeader(Static):
    DEFAULT_CSS = """
    StatusHeader { height: 1; width: 1fr; }
    """

    def show(self, runtime_name: str, store: UIStore, now: float, read_only: bool,
             link: str = "") -> None:
        counts = store.counts_by_state()
        text = Text()
        if read_only:  # first: the header is cut on the right at 80 columns, never this
            text.append(" READ-ONLY ", style="bold black on yellow")
        text.append(" promptui ", style="bold reverse")
        text.append(f" {runtime_name} ", style="bold")
        text.append(clock(now), style="dim")
        text.append("  ")
        faults = store.journal_faults
        if faults:  # the runtime refuses events until its journal writes again
            text.append(f" journal degraded ({faults}) ", style="bold white on red")
            text.append("  ")
        left = len(store.journals_left_behind)
        if left:  # started fresh on a damaged journal: what it held waits to be salvaged
            text.append(f" journal left behind ({left}) ", style="bold black on dark_orange")
            text.append("  ")
        draining, runs_left = store.draining
        if draining:
            text.append(f" draining {runs_left} run(s) ", style="bold black on cyan")
            text.append("  ")
        if link:  # attached and the server went away: the view below is the last one seen
            text.append(f" ⟳ {link.split(':', 1)[0]} ", style="bold white on red")
            text.append("  ")
        if store.unseen_alerts:  # new anomalies or waiting runs since the operator looked
            text.append(f" ⚑ {store.unseen_alerts} new ", style="bold black on yellow")
            text.append("  ")
        wide = self.size.width >= WIDE
        for state, mark, style in STATE_MARKS:
            n = counts.get(state, 0)
            if n or state in ("running", "failed"):
                label = f"{mark} {n} {state}  " if wide else f"{mark}{n} "
                text.append(label, style=style if n else "dim")
        others = sum(v for k, v in counts.items() if k not in {s for s, _, _ in STATE_MARKS})
        if others:
            text.append(f"◌ {others} other  " if wide else f"◌{others} ", style="cyan")
        text.append(f" {store.events_per_second:4.0f} ev/s", style="bold")
        text.append(f"  queued {store.total_queued}")
        if store.dropped:
            text.append(f"  dropped {store.dropped}", style="red")
        self.update(text, layout=False)  # height 1, full width: a new text never resizes it
