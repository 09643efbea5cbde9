"""The rows of the detail screen's tables (queue, dead letters, runs, context, timeline) and the
full text of the row under the cursor. Plain control-plane data in, cells out."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from promptui.format import TimeMode, age, clip, compact, iso_age, when
from promptui.widgets.keyed_table import Col, Row
from promptui.widgets.runs import RUN_STATE_STYLES, duration, run_outcome
from runtime_core.control.views import DeadLetterView, JournalEntryView, ProcessDetail

# Widths that keep every column but the payload/value on an 80-column terminal.
QUEUE_COLS = (Col("id", "Event", 8), Col("trigger", "Trigger", 10), Col("age", "Age", 4),
              Col("payload", "Payload", None))
DEAD_COLS = (Col("mark", "●", 1), Col("id", "Event", 8), Col("reason", "Reason", 17),
             Col("error", "Error", 18), Col("attempts", "Try", 3), Col("age", "Age", 4),
             Col("payload", "Payload", None))
RUN_COLS = (Col("id", "Run", 8), Col("trigger", "Trigger", 9), Col("state", "State", 9),
            Col("outcome", "Reason / error / reply", 24), Col("took", "Took", 6),
            Col("steps", "Steps", 5))
CONTEXT_COLS = (Col("key", "Key", 22), Col("value", "Value", None))
TIMELINE_COLS = (Col("time", "Time", 11), Col("seq", "Seq", 6), Col("type", "Type", 16),
                 Col("summary", "Summary", None))


def timeline_rows(entries: Sequence[JournalEntryView], mode: TimeMode = "iso",
                  now: float | None = None) -> list[Row]:
    """The newest entries, a rewind marked, newest first; times in ``mode`` at ``now``."""
    now = time.time() if now is None else now
    rows: list[Row] = []
    for e in entries:
        style = "bold" if e.entry_type == "rewind" else ""
        mark = "⟲ " if e.entry_type == "rewind" else ""
        rows.append((e.entry_id, (when(e.timestamp, mode, now, narrow=True), str(e.seq),
                                  Text(mark + e.entry_type, style=style),
                                  clip(e.summary, 200))))
    return rows


def queue_rows(d: ProcessDetail, now: float) -> list[Row]:
    return [(q.event_id, (q.event_id[:8], clip(q.trigger_type, 10), age(now - q.timestamp),
                          clip(q.payload_preview, 80))) for q in d.queued]


def dead_rows(letters: Sequence[DeadLetterView], now: float, marked: set[str]) -> list[Row]:
    return [(x.event_id, (
        Text("●", style="bold yellow") if x.event_id in marked else "", x.event_id[:8],
        clip(x.reason, 17), Text(clip(x.error, 18), style="red"), str(x.attempts),
        iso_age(x.dead_lettered_at, now), clip(x.payload_preview, 80)))
        for x in letters]


@dataclass(frozen=True, slots=True)
class DeadPage:
    """An older page of a process's dead letters, read from the journal: ``back`` pages of
    DEAD_PAGE before the newest ones, starting at ``offset`` (oldest first)."""

    back: int
    offset: int
    letters: tuple[DeadLetterView, ...]


DEAD_PAGE = 100


def dead_header(total: int, shown: int, page: DeadPage | None, marked: int) -> str:
    if page is None:
        head = f"{total} dead letters" if shown == total else (
            f"newest {shown} of {total} dead letters · [ older")
    else:
        head = (f"dead letters {page.offset + 1}-{page.offset + len(page.letters)} of "
                f"{total} · [ older · ] newer")
    return f"{head}, {marked} marked"


def run_rows(d: ProcessDetail, now: float) -> list[Row]:
    rows: list[Row] = []
    for run in d.runs:
        style = "bold" if run.state == "waiting" else ""
        state = "⏸ waiting" if run.state == "waiting" else run.state
        rows.append((run.run_id, (
            Text(run.run_id[:8], style=style), clip(run.trigger_type, 9),
            Text(state, style=RUN_STATE_STYLES.get(run.state, "")),
            Text(clip(run_outcome(run), 24), style=style), duration(run, now),
            str(len(run.steps)))))
    return rows


def context_rows(d: ProcessDetail) -> list[Row]:
    return [(key, (clip(key, 22), clip(compact(value), 200))) for key, value in d.context.items()]


def row_detail(pane: str, d: ProcessDetail, key: str | None, marked: set[str],
               page: DeadPage | None = None) -> Text:
    """A count for the tab, then the full text of the row under the cursor."""
    text = Text()
    if pane == "queue":
        text.append(f"{len(d.queued)} queued (capacity {d.summary.queue_capacity})",
                    style="dim")
        event = next((q for q in d.queued if q.event_id == key), None)
        if event is not None:
            text.append(f"\n{event.event_id} · {event.trigger_type} · {event.trigger_id}"
                        f"\npayload: {event.payload_preview}")
    elif pane == "dead":
        letters = d.dead_letters if page is None else page.letters
        text.append(dead_header(max(d.summary.dead_letters, len(d.dead_letters)), len(letters),
                                page, len(marked)), style="dim")
        dead = next((x for x in letters if x.event_id == key), None)
        if dead is not None:
            text.append(f"\n{dead.event_id} · {dead.trigger_type} · {dead.reason}\n")
            text.append(f"error: {dead.error}", style="red")
            text.append(f"\npayload: {dead.payload_preview}")
    elif pane == "runs":
        text.append(f"{len(d.runs)} runs, {d.summary.waiting_runs} waiting", style="dim")
        run = next((r for r in d.runs if r.run_id == key), None)
        if run is not None:
            hint = "enter: steps"
            if run.state == "waiting":
                hint = "enter: evidence" if run.missing_evidence else "enter: answer" \
                    if run.waiting_reason == "elicitation" else "enter: reconcile"
            text.append(f"\n{run.run_id} · event {run.event_id[:8]} · attempt {run.attempt}"
                        f" · {hint}")
            if run.config_changed:
                text.append(f" · ⚠ config changed {run.config_changed}", style="bold yellow")
            text.append(f"\n{run_outcome(run)}")
    elif pane == "context":
        text.append(f"{len(d.context)} keys", style="dim")
        if key is not None and key in d.context:
            text.append(f"\n{key} = {compact(d.context[key])}")
    return text
