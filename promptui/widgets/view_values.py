"""The whole value behind a row, for the pager: a control-plane view (already redacted) as JSON
data, with a payload or a result that is JSON text unpacked so it reads as nested JSON."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from runtime_core.control.views import (
    DeadLetterView,
    JournalEntryView,
    ProcessDetail,
    ProcessSummary,
    QueuedEventView,
    RunView,
    StepView,
)


def unpacked(text: str) -> Any:
    """JSON text as its data; anything else (plain text, a preview cut short) as it is."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[", '"'):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    return text


def _fields(view: Any, *, payload: str = "payload_preview") -> dict[str, Any]:
    data: dict[str, Any] = dataclasses.asdict(view)
    if payload in data:  # named for what it is once unpacked
        data["payload"] = unpacked(data.pop(payload))
    return data


def process_value(summary: ProcessSummary | None, status: Any) -> dict[str, Any]:
    """A process row: its table summary and its full status."""
    return {"summary": dataclasses.asdict(summary) if summary is not None else None,
            "status": status}


def dead_letter_value(letter: DeadLetterView) -> dict[str, Any]:
    return _fields(letter)


def queued_value(event: QueuedEventView) -> dict[str, Any]:
    return _fields(event)


def step_value(step: StepView) -> dict[str, Any]:
    data = dataclasses.asdict(step)
    data["result"] = unpacked(step.result)
    return data


def run_value(run: RunView) -> dict[str, Any]:
    data = dataclasses.asdict(run)
    data["steps"] = [step_value(s) for s in run.steps]
    if not run.trace_id:  # runs are not traced: an empty field says nothing
        del data["trace_id"]
    return data


def entry_value(entry: JournalEntryView) -> dict[str, Any]:
    return dataclasses.asdict(entry)


Shown = tuple[str, Any, str]  # the pager's title, value and id


def detail_row(pane: str, process: str, detail: ProcessDetail, key: str | None,
               letters: Sequence[DeadLetterView] = (),
               entries: Sequence[JournalEntryView] = ()) -> Shown | None:
    """The row ``key`` of a detail tab, whole; None when the tab has no such row. ``letters``
    is the page of dead letters shown, ``entries`` the timeline tab's entries."""
    if key is None:
        return None
    if pane == "queue":
        event = next((q for q in detail.queued if q.event_id == key), None)
        return None if event is None else (
            f"Queued event {key[:8]} of {process}", queued_value(event), key)
    if pane == "dead":
        letter = next((x for x in letters if x.event_id == key), None)
        return None if letter is None else (
            f"Dead letter {key[:8]} of {process}", dead_letter_value(letter), key)
    if pane == "runs":
        run = next((r for r in detail.runs if r.run_id == key), None)
        return None if run is None else (f"Run {key[:8]} of {process}", run_value(run), key)
    if pane == "context":
        return (f"Context {key} of {process}", detail.context[key], key) \
            if key in detail.context else None
    if pane == "timeline":
        entry = next((e for e in entries if e.entry_id == key), None)
        return None if entry is None else (
            f"Journal entry #{entry.seq} of {process}", entry_value(entry), entry.entry_id)
    return None
