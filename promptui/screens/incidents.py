"""Incidents across every process: state, generation, occurrences, last seen and linked runs,
open ones first. ``r`` resolves and ``o`` reopens the selected incident after a confirm; the
request carries the generation and version on screen, so a stale view is refused (and shown)
instead of overriding what happened since."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from promptui.actions import ActionSpec
from promptui.screens.dialogs import ConfirmDialog
from promptui.store import FeedLine, UIStore
from promptui.widgets.detail_tabs import Cell, Col, KeyedTable, clip, fill_width
from promptui.widgets.process_table import age
from runtime_core.control import ControlError, IncidentView

if TYPE_CHECKING:
    from promptui.app import ControlRoom

REFRESH_SECONDS = 2.0  # re-read at least this often (ages move); at once on incident events
STATE_STYLES = {"open": "bold red", "recovered": "green", "resolved": "cyan"}
# Widths that keep every column but the fingerprint on an 80-column terminal.
COLUMNS = (Col("id", "Incident", 8), Col("process", "Process", 14), Col("state", "State", 9),
           Col("gen", "Gen", 3), Col("occ", "Occ", 4), Col("seen", "Seen", 4),
           Col("runs", "Runs", 10), Col("fingerprint", "Fingerprint", 10))

INCIDENT_ACTIONS = (
    ActionSpec("incidents.back", "escape", "back", "Back"),
    ActionSpec("incidents.resolve", "r", "resolve", "Resolve", mutating=True),
    ActionSpec("incidents.reopen", "o", "reopen", "Reopen", mutating=True),
)


def clock_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).strftime("%H:%M:%S")


def incident_row(view: IncidentView, now: float) -> tuple[str, tuple[Cell, ...]]:
    runs = f"{len(view.run_ids)} {view.run_ids[-1][:8]}" if view.run_ids else "0"
    return (row_key(view), (
        Text(view.incident_id[:8], style="bold" if view.state == "open" else ""),
        clip(view.process, 14), Text(view.state, style=STATE_STYLES.get(view.state, "")),
        str(view.generation), str(view.occurrences), age(now - view.last_seen), runs,
        clip(view.fingerprint, 200)))


def row_key(view: IncidentView) -> str:
    return f"{view.process}/{view.incident_id}"


def incident_detail(view: IncidentView | None, now: float) -> Text:
    if view is None:
        return Text("no incidents: a process opens one when a webhook or event with a new "
                    "fingerprint arrives ('incidents:' in its manifest)", style="dim")
    text = Text(view.incident_id[:16], style="bold")  # what fits 80 columns on one line
    text.append(f"  {view.process}  ", style="dim")
    text.append(view.state, style=STATE_STYLES.get(view.state, ""))
    text.append(f"  generation {view.generation} · version {view.version}", style="dim")
    text.append(f"\nfingerprint {clip(view.fingerprint, 300)}")
    text.append(f"\nopened {clock_time(view.opened_at)} · last seen "
                f"{age(now - view.last_seen)} ago · {view.occurrences} occurrence"
                f"{'' if view.occurrences == 1 else 's'} · runs "
                f"{', '.join(r[:8] for r in view.run_ids[-4:]) or 'none'}")
    if view.closed_at is not None:
        text.append(f"\n{view.state} {clock_time(view.closed_at)} by {view.resolved_by}",
                    style=STATE_STYLES.get(view.state, ""))
        if view.note:
            text.append(f": {clip(view.note, 200)}")
    elif view.note:
        text.append(f"\nnote: {clip(view.note, 200)}")
    if view.last_payload:
        text.append(f"\nlast payload {clip(view.last_payload, 300)}", style="dim")
    return text


class IncidentTable(KeyedTable):
    def on_resize(self) -> None:
        fill_width(self, "fingerprint",
                   sum(col.width or 0 for col in COLUMNS if col.key != "fingerprint"))


class IncidentsScreen(Screen[None]):
    CSS_PATH = "incidents.tcss"
    PALETTE_ACTIONS: tuple[ActionSpec, ...] = INCIDENT_ACTIONS
    BINDINGS = [spec.binding() for spec in INCIDENT_ACTIONS]

    app: ControlRoom

    def __init__(self) -> None:
        super().__init__()
        self.views: list[IncidentView] = []
        self.loaded = False  # the first read has arrived (tests wait on it)
        self.gone = ""
        self._changes_seen = -1
        self._next_refresh = 0.0

    def compose(self) -> ComposeResult:
        yield Static(Text("Incidents", style="bold"), id="incidents-title")
        yield IncidentTable(COLUMNS, id="incidents-table")
        yield Static("", id="incidents-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.table.focus()
        self.reload()

    @property
    def table(self) -> IncidentTable:
        return self.query_one(IncidentTable)

    @property
    def current(self) -> IncidentView | None:
        key = self.table.cursor_key
        return next((v for v in self.views if row_key(v) == key), None)

    def current_process(self) -> str | None:
        view = self.current
        return view.process if view is not None else None

    # -- loading -----------------------------------------------------------------------------
    def reload(self) -> None:
        self.run_worker(self._load(), group="incidents-load", exclusive=True)

    async def _load(self) -> None:
        self._next_refresh = time.monotonic() + REFRESH_SECONDS
        try:
            views = await self.app.control.incidents()
        except ControlError as exc:
            self.gone = str(exc)
        except Exception as exc:  # a remote that went away: say so, keep the room up
            self.gone = f"cannot read the incidents: {exc}"
        else:
            self.gone, self.views = "", views
        if self.is_attached:
            self._draw(self.app.clock())
            self.loaded = True

    async def show(self, store: UIStore, now: float, feed: list[FeedLine],
                   activity: list[str]) -> None:
        """The pump: re-read when an incident changed, else now and then for the ages."""
        news = store.incident_changes != self._changes_seen
        self._changes_seen = store.incident_changes
        if news or time.monotonic() >= self._next_refresh:
            await self._load()

    # -- drawing -----------------------------------------------------------------------------
    def _draw(self, now: float) -> None:
        self.table.sync([incident_row(v, now) for v in self.views], ordered=True)
        title = Text("Incidents", style="bold")
        if self.gone:
            title.append(f"  ⚠ {self.gone} — esc goes back", style="bold red")
        else:
            opened = sum(1 for v in self.views if v.state == "open")
            title.append(f" · {opened} open", style="bold red" if opened else "dim")
            title.append(f" · {len(self.views)} in all · r resolve · o reopen", style="dim")
        if self.app.control.read_only:
            title.append("  read-only", style="bold magenta")
        self.query_one("#incidents-title", Static).update(title)
        self._draw_detail()

    def _draw_detail(self) -> None:
        self.query_one("#incidents-detail", Static).update(
            incident_detail(self.current, self.app.clock()))

    @on(DataTable.RowHighlighted, "#incidents-table")
    def _moved(self) -> None:
        self._draw_detail()

    # -- actions -----------------------------------------------------------------------------
    def action_back(self) -> None:
        self.app.pop_screen()

    def _target(self, what: str, states: tuple[str, ...], hint: str) -> IncidentView | None:
        view = self.current
        if self.app.control.read_only:  # same wording as the app's global keys
            self.app.notify(f"read-only: {what} is disabled (started with --read-only)",
                            severity="warning", timeout=4)
            return None
        if view is None:
            self.app.notify("no incident selected", severity="warning", timeout=3)
            return None
        if view.state not in states:
            self.app.notify(f"incident {view.incident_id[:8]} is {view.state}; {hint}",
                            severity="warning", timeout=4)
            return None
        return view

    def action_resolve(self) -> None:
        view = self._target("resolve", ("open",), "only an open incident is resolved "
                                                  "(o reopens a closed one)")
        if view is None:
            return
        control = self.app.control
        self._confirm(view, "Resolve", "It is marked resolved by you. The next event with "
                      "this fingerprint opens a new incident (or, within the reopen window, "
                      "reopens this one).",
                      lambda: control.resolve_incident(
                          view.process, view.incident_id, generation=view.generation,
                          version=view.version))

    def action_reopen(self) -> None:
        view = self._target("reopen", ("resolved", "recovered"),
                            "it is still open (r resolves it)")
        if view is None:
            return
        control = self.app.control
        self._confirm(view, "Reopen", f"Generation {view.generation + 1} opens and a run "
                      "starts on the last payload seen.",
                      lambda: control.reopen_incident(
                          view.process, view.incident_id, generation=view.generation,
                          version=view.version))

    def _confirm(self, view: IncidentView, verb: str, body: str,
                 call: Callable[[], Awaitable[IncidentView]]) -> None:
        """Ask, then send the request with the generation and version shown; re-read after
        either answer, so a refusal for a stale view is followed by the fresh one."""
        short = view.incident_id[:8]

        async def send() -> IncidentView:
            try:
                return await call()
            finally:
                self.reload()

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.app.command(f"{verb.lower()} incident {short}", send,
                                 lambda done: f"incident {short} {done.state} (generation "
                                              f"{done.generation}, version {done.version})")

        self.app.push_screen(ConfirmDialog(
            f"{verb} incident {short} of {view.process}?",
            f"{escape(clip(view.fingerprint, 120))}\nState {view.state}, generation "
            f"{view.generation}, version {view.version}, {view.occurrences} occurrence(s). "
            f"{body}", verb), confirmed)
