"""Incidents across every process: state, generation, occurrences, last seen and linked runs,
open ones first. ``r`` resolves and ``o`` reopens the selected incident after a confirm; the
request carries the generation and version on screen, so a stale view is refused (and shown)
instead of overriding what happened since."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from rich.markup import escape
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import DataTable, Footer, Static

from promptui.actions import INCIDENT_ACTIONS, bindings
from promptui.format import clip
from promptui.screens.base import LiveScreen
from promptui.screens.dialogs import ConfirmDialog
from promptui.store import ActivityLine, FeedLine, UIStore
from promptui.widgets.incident_table import (
    COLUMNS,
    IncidentTable,
    incident_detail,
    incident_row,
    row_key,
)
from runtime_core.control.plane import ControlError
from runtime_core.control.views import IncidentView

REFRESH_SECONDS = 2.0  # re-read at least this often (ages move); at once on incident events


class IncidentsScreen(LiveScreen):
    CSS_PATH = "incidents.tcss"
    ACTIONS = INCIDENT_ACTIONS
    BINDINGS = bindings(INCIDENT_ACTIONS)

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
            views = await self.room.control.incidents()
        except ControlError as exc:
            self.gone = str(exc)
        except Exception as exc:  # a remote that went away: say so, keep the room up
            self.gone = f"cannot read the incidents: {exc}"
        else:
            self.gone, self.views = "", views
        if self.is_attached:
            self._draw(self.room.clock())
            self.loaded = True

    async def show(self, store: UIStore, now: float, feed: list[FeedLine],
                   activity: list[ActivityLine]) -> None:
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
        if self.room.control.read_only:
            title.append("  read-only", style="bold magenta")
        self.query_one("#incidents-title", Static).update(title)
        self._draw_detail()

    def _draw_detail(self) -> None:
        self.query_one("#incidents-detail", Static).update(
            incident_detail(self.current, self.room.clock(), self.room.store.time_mode))

    @on(DataTable.RowHighlighted, "#incidents-table")
    def _moved(self) -> None:
        self._draw_detail()

    # -- actions -----------------------------------------------------------------------------
    def action_back(self) -> None:
        self.app.pop_screen()

    def _target(self, states: tuple[str, ...], hint: str) -> IncidentView | None:
        view = self.current
        if view is None:
            self.app.notify("no incident selected", severity="warning", timeout=3)
            return None
        if view.state not in states:
            self.app.notify(f"incident {view.incident_id[:8]} is {view.state}; {hint}",
                            severity="warning", timeout=4)
            return None
        return view

    def action_resolve(self) -> None:
        view = self._target(("open",), "only an open incident is resolved "
                                       "(o reopens a closed one)")
        if view is None:
            return
        control = self.room.control
        self._confirm(view, "Resolve", "It is marked resolved by you. The next event with "
                      "this fingerprint opens a new incident (or, within the reopen window, "
                      "reopens this one).",
                      lambda: control.resolve_incident(
                          view.process, view.incident_id, generation=view.generation,
                          version=view.version))

    def action_reopen(self) -> None:
        view = self._target(("resolved", "recovered"), "it is still open (r resolves it)")
        if view is None:
            return
        control = self.room.control
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
                self.room.command(f"{verb.lower()} incident {short}", send,
                                  lambda done: f"incident {short} {done.state} (generation "
                                               f"{done.generation}, version {done.version})")

        self.app.push_screen(ConfirmDialog(
            f"{verb} incident {short} of {view.process}?",
            f"{escape(clip(view.fingerprint, 120))}\nState {view.state}, generation "
            f"{view.generation}, version {view.version}, {view.occurrences} occurrence(s). "
            f"{body}", verb), confirmed)
