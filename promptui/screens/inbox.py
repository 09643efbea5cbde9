"""The fleet inbox: every process's dead letters and runs waiting for an operator in one list,
newest first. ``/`` filters by process, reason or error text; ``space`` marks rows across
processes (k9s marks); ``r`` redelivers the marked dead letters (or the one under the cursor),
``R`` every dead letter shown; Enter on a waiting run opens the dialog that settles it (the
detail screen's), on a dead letter the pager, as ``v`` does. An action on several items asks
first, saying how many and of which processes."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import DataTable, Footer, Input, Static

from promptui.actions import INBOX_ACTIONS, INBOX_RECONCILE, bindings
from promptui.format import clip, when
from promptui.screens.base import LiveScreen, ShowValue
from promptui.screens.dialogs import ConfirmDialog
from promptui.screens.reconcile_flow import settle_waiting
from promptui.store import ActivityLine, FeedLine, UIStore
from promptui.widgets.keyed_table import Col, KeyedTable, fill_width
from runtime_core.control.plane import ControlError
from runtime_core.control.views import DeadLetterView

REFRESH_SECONDS = 3.0  # re-read the dead letters at least this often (at once on news)
COLUMNS = (Col("id", "Item", 11), Col("mark", "●", 1), Col("process", "Process", 14),
           Col("reason", "Reason", 18), Col("error", "Error / write in flight", 12),
           Col("when", "When", 11))
FIXED = 11 + 1 + 14 + 18 + 11  # every column but the error, which takes what is left


@dataclass(frozen=True, slots=True)
class InboxItem:
    """One row: a dead letter (``kind`` "dead", ``ident`` its event id) or a waiting run
    (``kind`` "waiting", ``ident`` its run id)."""

    kind: str
    process: str
    ident: str
    reason: str
    error: str
    at: float

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.process}:{self.ident}"

    def matches(self, needle: str) -> bool:
        return not needle or needle in f"{self.process} {self.reason} {self.error}".lower()


def _epoch(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return 0.0


def dead_item(process: str, letter: DeadLetterView) -> InboxItem:
    return InboxItem("dead", process, letter.event_id, letter.reason, letter.error,
                     _epoch(letter.dead_lettered_at))


def waiting_items(store: UIStore) -> list[InboxItem]:
    return [InboxItem("waiting", row.name, w.run_id, w.reason, w.write_in_flight,
                      w.started_at or 0.0)
            for row in store.processes.values() for w in row.waiting]


def processes_named(items: list[InboxItem]) -> str:
    names = sorted({item.process for item in items})
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f"{len(names)} process{'es' if len(names) != 1 else ''} ({shown})"


class InboxScreen(LiveScreen):
    CSS_PATH = "inbox.tcss"
    ACTIONS = INBOX_ACTIONS
    BINDINGS = bindings(INBOX_ACTIONS)

    def __init__(self) -> None:
        super().__init__()
        self.letters: dict[str, list[InboxItem]] = {}  # process -> its dead letters
        self.items: list[InboxItem] = []  # what the table shows, newest first
        self.marked: set[str] = set()  # row keys
        self.loaded = False  # the first read has arrived (tests wait on it)
        self.problem = ""
        self._dead_seen: dict[str, int] = {}
        self._next_read = 0.0

    def compose(self) -> ComposeResult:
        yield Static(Text("Inbox", style="bold"), id="inbox-title")
        yield KeyedTable(COLUMNS, id="inbox-table")
        yield Static("", id="inbox-detail")
        yield Input(placeholder="filter: text in the process, reason or error; enter keeps, "
                    "esc clears", id="inbox-filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#inbox-filter", Input).display = False
        self.table.focus()

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#inbox-table", KeyedTable)

    @property
    def needle(self) -> str:
        return self.query_one("#inbox-filter", Input).value.strip().lower()

    @property
    def current(self) -> InboxItem | None:
        key = self.table.cursor_key
        return next((item for item in self.items if item.key == key), None)

    def current_process(self) -> str | None:
        item = self.current
        return item.process if item is not None else None

    # -- reading and drawing -----------------------------------------------------------------
    async def show(self, store: UIStore, now: float, feed: list[FeedLine],
                   activity: list[ActivityLine]) -> None:
        store.seen_alerts()  # the operator is looking at them
        counts = {name: row.dead_letters for name, row in store.processes.items()}
        if counts != self._dead_seen or time.monotonic() >= self._next_read:
            self._dead_seen = counts
            await self._read_letters(counts)
        self.draw(store, now)

    async def _read_letters(self, counts: dict[str, int]) -> None:
        self._next_read = time.monotonic() + REFRESH_SECONDS
        control, letters, problems = self.room.control, {}, []
        for name, count in counts.items():
            if not count:
                continue
            try:
                found = await control.dead_letters(name)
            except ControlError as exc:
                problems.append(f"{name}: {exc}")
                continue
            except Exception as exc:  # a remote that went away: say so, keep the room up
                problems.append(f"{name}: cannot read its dead letters: {exc}")
                continue
            letters[name] = [dead_item(name, letter) for letter in found]
        self.letters, self.problem, self.loaded = letters, "; ".join(problems), True

    def draw(self, store: UIStore, now: float) -> None:
        every = [*waiting_items(store), *(i for found in self.letters.values() for i in found)]
        every.sort(key=lambda item: (item.at, item.key), reverse=True)
        self.items = [item for item in every if item.matches(self.needle)]
        keys = {item.key for item in self.items}
        self.marked &= keys
        mode = store.time_mode
        self.table.sync([(item.key, (
            Text(("dl " if item.kind == "dead" else "wr ") + item.ident[:8],
                 style="yellow" if item.kind == "dead" else "bold red"),
            Text("●", style="bold yellow") if item.key in self.marked else "",
            clip(item.process, 14), clip(item.reason, 18),
            Text(clip(item.error, 200), style="red" if item.kind == "dead" else ""),
            when(item.at, mode, now, narrow=True) if item.at else ""))
            for item in self.items], ordered=True)
        self._draw_title(every)
        self._draw_detail()

    def _draw_title(self, every: list[InboxItem]) -> None:
        dead = sum(1 for item in every if item.kind == "dead")
        title = Text("Inbox", style="bold")
        title.append(f" · {len(every) - dead} waiting", style="bold red"
                     if len(every) > dead else "dim")
        title.append(f" · {dead} dead letters", style="yellow" if dead else "dim")
        if self.needle:
            title.append(f" · filter {self.needle!r}: {len(self.items)} shown", style="cyan")
        if self.marked:
            title.append(f" · {len(self.marked)} marked", style="bold yellow")
        if self.room.control.read_only:
            title.append("  read-only", style="bold magenta")
        if self.problem:
            title.append(f"\n⚠ {clip(self.problem, 200)}", style="yellow")
        self.query_one("#inbox-title", Static).update(title)

    def _draw_detail(self) -> None:
        item = self.current
        text = Text()
        if item is not None:
            what = "dead letter" if item.kind == "dead" else "run waiting for an operator"
            text.append(f"{item.process} · {what} {item.ident}\n", style="bold")
            text.append(f"{item.reason}: {item.error}" if item.error else item.reason)
            hint = "r redeliver · v view" if item.kind == "dead" else "enter: settle it"
            text.append(f"\n{hint}", style="dim")
        self.query_one("#inbox-detail", Static).update(text)

    def on_resize(self) -> None:
        fill_width(self.table, "error", FIXED)

    @on(DataTable.RowHighlighted, "#inbox-table")
    def _moved(self) -> None:
        self._draw_detail()

    @on(DataTable.RowSelected, "#inbox-table")
    def _chosen(self) -> None:
        self.action_open_row()

    # -- the filter --------------------------------------------------------------------------
    def action_filter(self) -> None:
        box = self.query_one("#inbox-filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, "#inbox-filter")
    def _filter_changed(self) -> None:
        self.draw(self.room.store, self.room.clock())

    @on(Input.Submitted, "#inbox-filter")
    def _filter_kept(self, event: Input.Submitted) -> None:
        event.input.display = bool(event.value)
        self.table.focus()

    # -- actions -----------------------------------------------------------------------------
    def action_back(self) -> None:
        box = self.query_one("#inbox-filter", Input)
        if box.has_focus or box.value:  # esc clears the filter first, then goes back
            box.value, box.display = "", False
            self.table.focus()
            return
        self.app.pop_screen()

    def action_mark(self) -> None:
        item = self.current
        if item is None:
            return
        self.marked ^= {item.key}
        self.draw(self.room.store, self.room.clock())
        self.table.action_cursor_down()  # mark a run of rows with repeated space

    def _chosen_items(self) -> list[InboxItem]:
        """The marked rows, or the row under the cursor when none is marked."""
        marked = [item for item in self.items if item.key in self.marked]
        if marked:
            return marked
        return [self.current] if self.current is not None else []

    def action_view(self) -> None:
        item = self.current
        if item is None:
            self.app.notify("no row to show", severity="warning", timeout=2)
            return
        self.run_worker(self._view(item), group="inbox-view", exclusive=True)

    async def _view(self, item: InboxItem) -> None:
        control = self.room.control
        try:
            whole: Any = await (control.dead_letter(item.process, item.ident)
                                if item.kind == "dead"
                                else control.waiting_detail(item.process, item.ident))
        except ControlError as exc:  # redelivered or settled meanwhile
            whole = f"{item.reason}: {item.error} ({exc})"
        kind = "Dead letter" if item.kind == "dead" else "Waiting run"
        self.post_message(ShowValue(f"{kind} {item.ident[:8]} of {item.process}", whole,
                                    item.ident))

    def action_open_row(self) -> None:
        item = self.current
        if item is None:
            return
        if item.kind == "dead":
            self.action_view()
        elif self.room.permits(INBOX_RECONCILE):
            self.run_worker(settle_waiting(self, item.process, item.ident),
                            group="reconcile", exclusive=True)

    def action_redeliver(self) -> None:
        chosen = self._chosen_items()
        letters = [item for item in chosen if item.kind == "dead"]
        if not letters:
            self.app.notify("no dead letter chosen (waiting runs are settled with enter)",
                            severity="warning", timeout=3)
            return
        self._redeliver(letters, ask=len(letters) > 1)

    def action_redeliver_all(self) -> None:
        letters = [item for item in self.items if item.kind == "dead"]
        if not letters:
            self.app.notify("no dead letters to redeliver", severity="warning", timeout=3)
            return
        self._redeliver(letters, ask=True)

    def _redeliver(self, letters: list[InboxItem], *, ask: bool) -> None:
        """Redeliver ``letters``, grouped by process; several ask first (how many, where)."""
        by_process: dict[str, list[str]] = {}
        for item in letters:
            by_process.setdefault(item.process, []).append(item.ident)
        control, count = self.room.control, len(letters)

        async def send() -> int:
            done = 0
            for name, ids in by_process.items():
                done += await control.redeliver(name, ids)
            return done

        def go(ok: bool | None = True) -> None:
            if ok:
                self.marked -= {item.key for item in letters}
                self._next_read = 0.0  # re-read at the next tick
                self.room.command(f"redeliver {count} dead letter(s)", send,
                                  lambda n: f"{n} of {count} redelivered to "
                                            f"{processes_named(letters)}")

        if not ask:
            go()
            return
        self.app.push_screen(ConfirmDialog(
            f"Redeliver {count} dead letters of {processes_named(letters)}?",
            "Each goes back on its process's queue and runs again.", "Redeliver"), go)
