"""The tabs of the process detail screen: a keyed DataTable updated by diff, the live run log,
the conversation log, the governance and config views, and the small "steps of a run" dialog.
They draw plain control-plane data (RunView, DeadLetterView, ...), never runtime objects."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml
from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Label, RichLog, Static
from textual.widgets.data_table import ColumnKey, RowDoesNotExist

from promptui.widgets.process_table import age
from runtime_core.control import JournalEntryView, ProcessDetail, RunView, StepView

Cell = Text | str
LIVE_MAX_LINES = 1000
CONVERSATION_MAX_LINES = 2000
MESSAGE_CHARS = 2000
RUN_STATE_STYLES = {
    "waiting": "bold red",
    "running": "bold cyan",
    "queued": "cyan",
    "succeeded": "green",
    "failed": "red",
    "cancelled": "dim",
}
GOVERNANCE_LABELS = {"budget": "budget left", "health_anomalies": "anomalies",
                     "active_secrets": "secrets in use", "memory": "long-term memory"}
ROLE_STYLES = {"user": "bold cyan", "assistant": "bold green", "system": "dim",
               "tool": "magenta"}


# -- formatting -------------------------------------------------------------------------------
def clip(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (newlines folded, an ellipsis when cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + "…"


def compact(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))


def iso_age(iso: str, now: float) -> str:
    try:
        return age(now - datetime.fromisoformat(iso).timestamp())
    except ValueError:
        return "?"


def duration(run: RunView, now: float) -> str:
    if run.started_at is None:
        return "-"
    seconds = (run.finished_at if run.finished_at is not None else now) - run.started_at
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:.1f}s"


def run_outcome(run: RunView) -> str:
    """Why a run is where it is, in a few words: the waiting write, the error, the reply."""
    if run.state == "waiting":
        return " ".join(p for p in (run.waiting_reason, run.write_in_flight or
                                    run.missing_evidence) if p)
    if run.error or run.reason:
        return ": ".join(p for p in (run.reason, run.error) if p)
    return run.reply


def step_line(step: StepView) -> Text:
    line = Text(f"  {step.index:>2} ")
    if step.kind == "tool":
        mark = ("✓", "green") if step.ok else ("✗", "red")
        line.append("tool  ", style="magenta")
        line.append(f"{step.name}({clip(compact(step.args), 120)}) → ")
        line.append(f"{mark[0]} ", style=mark[1])
        line.append(clip(step.result, 200))
    elif step.kind == "refused":
        line.append("refused ", style="bold yellow")
        line.append(f"{step.name}: {clip(step.result, 200)}")
    else:
        line.append("model ", style="cyan")
        line.append(clip(step.result, 200) or "(no text)", style="" if step.ok else "red")
    line.append(f"  {step.duration_ms:.0f}ms", style="dim")
    return line


def run_header(run: RunView) -> Text:
    text = Text("▶ ", style="bold")
    text.append(f"run {run.run_id[:8]}", style="bold")
    text.append(f" · {run.trigger_type} · event {run.event_id[:8]} · attempt {run.attempt}",
                style="dim")
    return text


def identity_lines(run: RunView) -> Text:
    """What the run executes, frozen at its start; a changed configuration stands out."""
    text = Text()
    ident = run.identity
    if ident:
        tools = ident.get("policy", {}).get("tools", {})
        text.append(f"  profile {ident.get('profile', '')}@{ident.get('version', '')}"
                    f" · completion {ident.get('evaluator', '')}"
                    f" · config {ident.get('config_digest', '')}", style="dim")
        if tools:
            text.append("\n  policy " + ", ".join(f"{k} ({v})" for k, v in tools.items()),
                        style="dim")
        budget = ident.get("budget") or {}
        if budget:
            text.append("\n  budget " + ", ".join(f"{k}={v}" for k, v in budget.items()),
                        style="dim")
    if run.config_changed:
        text.append(("\n" if text else "") + f"  ⚠ resumed under another configuration: "
                    f"{run.config_changed}", style="bold yellow")
    return text


def run_end(run: RunView) -> Text:
    if run.state == "succeeded":
        return Text(f"  ✓ reply: {clip(run.reply, 400)}", style="green")
    if run.state == "waiting":
        return Text(f"  ⏸ waiting: {run_outcome(run)}", style="bold red")
    style = "dim" if run.state == "cancelled" else "red"
    return Text(f"  ✗ {run.state}: {clip(run_outcome(run), 400)}", style=style)


def governance_view(governance: dict[str, Any]) -> RenderableType:
    if not governance:
        return Text("governance is off for this process (no health, budget, mission, secrets "
                    "or inbox in its manifest)", style="dim")
    table = Table(box=None, show_header=False, expand=True, padding=(0, 1))
    table.add_column("what", style="bold", no_wrap=True, width=16)
    table.add_column("value", overflow="fold")
    for key, value in governance.items():
        if isinstance(value, dict):
            # budget holds what is left of each limit; None there means no such limit
            none = "no limit" if key == "budget" else "-"
            body = Text("\n".join(
                f"{k}: {none if v is None else v if isinstance(v, str) else compact(v)}"
                for k, v in value.items()) or "-")
        else:
            body = Text(str(value))
        table.add_row(GOVERNANCE_LABELS.get(key, key.replace("_", " ")), body)
    return table


def config_view(data: dict[str, Any]) -> RenderableType:
    """The MCP servers (live state, tools and their effects), then the configuration."""
    config = data.get("config") or {}
    text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True) if config else "{}\n"
    syntax = Syntax(text, "yaml", theme="ansi_dark", background_color="default", word_wrap=True)
    servers = data.get("servers") or []
    if not servers:
        return syntax
    table = Table(box=None, show_header=False, expand=True, padding=(0, 1))
    table.add_column("server", style="bold", no_wrap=True)
    table.add_column("tools", overflow="fold")
    for server in servers:
        state = Text("connected" if server.get("connected") else "not connected",
                     style="green" if server.get("connected") else "yellow")
        head = Text.assemble(f"{server['server']} ", (f"({server['type']}) ", "dim"), state)
        tools = Text()
        for tool in server.get("tools", []):  # one per line: name, then its effect
            idempotent = ", idempotent" if tool.get("idempotent") else ""
            style = "cyan" if tool["effect"] == "read" else "magenta"
            tools.append("\n" if tools else "")
            tools.append(f"{tool['name']} ")
            tools.append(f"{tool['effect']}{idempotent}", style=style)
        table.add_row(head, tools or Text("no tools listed yet", style="dim"))
    return Group(Text("MCP servers", style="bold underline"), table, Text(""), syntax)


# -- a DataTable updated by diff -----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Col:
    key: str
    label: str
    width: int | None


def fill_width(table: DataTable[Any], key: str, fixed: int) -> None:
    """Column ``key`` takes the width the others (``fixed`` cells wide in all) leave, so no
    row ever needs a horizontal scrollbar. Call it from the table's on_resize."""
    fixed += 2 * table.cell_padding * len(table.columns)
    column = table.columns[ColumnKey(key)]
    width = max(10, table.size.width - fixed - 1)  # 1: the vertical scrollbar
    if column.width != width:
        column.width, column.auto_width = width, False
        table._require_update_dimensions = True
        table.refresh()


def _signature(cell: Cell) -> tuple[str, str, str]:
    # rich's Text equality ignores the base style; a colour change must still redraw.
    if isinstance(cell, Text):
        return cell.plain, str(cell.style), repr(cell.spans)
    return cell, "", ""


class KeyedTable(DataTable[Cell]):
    """Rows keyed by an id: ``sync`` adds, removes and updates only what changed, keeps the
    given order and keeps the cursor on the same key."""

    def __init__(self, columns: Sequence[Col], **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.spec = tuple(columns)
        self._cells: dict[str, tuple[tuple[str, str, str], ...]] = {}
        for col in self.spec:  # here, not on mount: a screen's first refresh may sync before
            self.add_column(col.label, key=col.key, width=col.width)

    @property
    def cursor_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            value = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # the cursor sits on a row that just went
            return None
        return str(value) if value is not None else None

    @property
    def keys(self) -> list[str]:
        return [str(row.key.value) for row in self.ordered_rows]

    def sync(self, rows: Sequence[tuple[str, Sequence[Cell]]], *, ordered: bool = False) -> None:
        """Show ``rows`` (key, cells); ``ordered`` re-sorts when the order differs (the first
        column must then be unique per row, e.g. a short id)."""
        cursor = self.cursor_key
        wanted = {key: cells for key, cells in rows}
        changed = False
        for gone in [key for key in self._cells if key not in wanted]:
            with contextlib.suppress(RowDoesNotExist):  # already gone with a cleared table
                self.remove_row(gone)
            del self._cells[gone]
            changed = True
        for key, cells in wanted.items():
            fresh = tuple(_signature(c) for c in cells)
            old = self._cells.get(key)
            if old is None:
                self.add_row(*cells, key=key)
                changed = True
            elif old != fresh:
                for col, before, after, cell in zip(self.spec, old, fresh, cells, strict=True):
                    if before != after:
                        self.update_cell(key, col.key, cell)
            self._cells[key] = fresh
        if ordered and self.keys != list(wanted):
            rank = {_signature(cells[0])[0]: i for i, (_, cells) in enumerate(rows)}
            first = self.spec[0].key
            self.sort(first, key=lambda value: rank.get(
                value.plain if isinstance(value, Text) else str(value), len(rank)))
            changed = True
        if changed and cursor is not None and cursor in wanted:
            self.move_cursor(row=self.get_row_index(cursor), animate=False)


# -- the rows of the four tables -----------------------------------------------------------
Row = tuple[str, tuple[Cell, ...]]
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
TIMELINE_COLS = (Col("time", "Time", 8), Col("seq", "Seq", 6), Col("type", "Type", 16),
                 Col("summary", "Summary", None))


def timeline_rows(entries: Sequence[JournalEntryView]) -> list[Row]:
    """The newest entries, a rewind marked, newest first."""
    rows: list[Row] = []
    for e in entries:
        style = "bold" if e.entry_type == "rewind" else ""
        mark = "⟲ " if e.entry_type == "rewind" else ""
        rows.append((e.entry_id, (time.strftime("%H:%M:%S", time.localtime(e.timestamp)),
                                  str(e.seq), Text(mark + e.entry_type, style=style),
                                  clip(e.summary, 200))))
    return rows


def queue_rows(d: ProcessDetail, now: float) -> list[Row]:
    return [(q.event_id, (q.event_id[:8], clip(q.trigger_type, 10), age(now - q.timestamp),
                          clip(q.payload_preview, 80))) for q in d.queued]


def dead_rows(d: ProcessDetail, now: float, marked: set[str]) -> list[Row]:
    return [(x.event_id, (
        Text("●", style="bold yellow") if x.event_id in marked else "", x.event_id[:8],
        clip(x.reason, 17), Text(clip(x.error, 18), style="red"), str(x.attempts),
        iso_age(x.dead_lettered_at, now), clip(x.payload_preview, 80)))
        for x in d.dead_letters]


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


def row_detail(pane: str, d: ProcessDetail, key: str | None, marked: set[str]) -> Text:
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
        text.append(f"{len(d.dead_letters)} dead letters, {len(marked)} marked", style="dim")
        dead = next((x for x in d.dead_letters if x.event_id == key), None)
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
                hint = "enter: evidence" if run.missing_evidence else "enter: reconcile"
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


# -- the live run log ----------------------------------------------------------------------
class LiveView(Vertical):
    """The steps of the running run(s) as they happen; runs that finished between two ticks
    are written whole, so a fast run is not missed. When nothing runs it says "idle"."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._written: dict[str, int] = {}  # run id -> steps already in the log
        self._runs_ended: set[str] = set()  # runs whose end line is in the log
        self._started = False

    def compose(self) -> ComposeResult:
        yield Static("", id="live-status")
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

    def show(self, runs: Sequence[RunView], now: float) -> None:
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


# -- the conversation ------------------------------------------------------------------------
class ConversationLog(RichLog):
    """role: content, newest at the bottom; appends when the buffer only grew, redraws when it
    was trimmed or rewound (rare, so no per-tick refill)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_lines=CONVERSATION_MAX_LINES, wrap=True, markup=False,
                         auto_scroll=True, **kwargs)
        self._shown: tuple[dict[str, Any], ...] = ()

    def show(self, messages: tuple[dict[str, Any], ...]) -> None:
        if messages == self._shown:
            return
        old = self._shown
        if len(messages) >= len(old) and messages[: len(old)] == old:
            new = messages[len(old):]
        else:
            self.clear()
            new = messages
        if not messages:
            self.write(Text("no conversation yet", style="dim"))
        for message in new:
            role = str(message.get("role", "?"))
            content = message.get("content")
            body = content if isinstance(content, str) else compact(content)
            if not body and message.get("tool_calls"):
                body = f"(tool calls) {compact(message['tool_calls'])}"
            line = Text(f"{role}: ", style=ROLE_STYLES.get(role, "bold"))
            line.append(body[:MESSAGE_CHARS] + ("…" if len(body) > MESSAGE_CHARS else ""))
            self.write(line)
        self._shown = messages


# -- a run's steps, for any run picked in the Runs tab ------------------------------------
class RunStepsDialog(ModalScreen[None]):
    BINDINGS = [Binding("escape,enter", "close", "Close", id="promptui.dialog.close")]
    DEFAULT_CSS = """
    RunStepsDialog #run-steps { height: auto; max-height: 16; }
    """

    def __init__(self, process: str, run: RunView, note: str = "") -> None:
        super().__init__(classes="dialog-screen")
        self.process = process
        self.run_view = run
        self.note = note

    def compose(self) -> ComposeResult:
        run = self.run_view
        lines: list[RenderableType] = [run_header(run)]
        if run.identity or run.config_changed:
            lines.append(identity_lines(run))
        lines += [step_line(s) for s in run.steps] or [Text("  (no steps)", style="dim")]
        if run.state != "running":
            lines.append(run_end(run))
        if self.note:
            lines.append(Text(self.note, style="yellow"))
        with Vertical(classes="dialog dialog-wide"):
            yield Label(f"Run {run.run_id[:12]} of {self.process} — {run.state}",
                        classes="dialog-title")
            with VerticalScroll(id="run-steps"):
                yield Static(Group(*lines))
            with Horizontal(classes="dialog-buttons"):
                yield Button("Close", id="close")

    def on_mount(self) -> None:
        self.query_one("#close", Button).focus()

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        self.dismiss(None)
