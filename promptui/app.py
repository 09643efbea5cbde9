"""The control room: a Textual app over a ControlPlane. One pump drains the runtime's event
stream at a fixed rate, folds it into the store and hands the active screen a batch to draw;
widgets never see a runtime object and never get one call per event.

The app is the screens' ``Room`` (screens/base.py): they reach the control plane, the store,
the clock and ``command`` through it, and ask to move with messages (``OpenProcess``, ...). Every
key binding and palette entry passes ``run_action``: the one read-only gate."""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from textual import events, on
from textual.actions import ActionParseResult
from textual.actions import parse as parse_action
from textual.app import ScreenStackError, SystemCommand
from textual.css.query import NoMatches
from textual.dom import DOMNode
from textual.geometry import Size
from textual.screen import ModalScreen, Screen
from textual.theme import Theme

from promptui.actions import GLOBAL_ACTIONS, ActionSpec, bindings, find, refusal
from promptui.format import TimeMode, date_time
from promptui.room_commands import STOP_DRAIN_SECONDS
from promptui.room_views import RoomViews
from promptui.screens.base import (
    LiveScreen,
    OpenIncidents,
    OpenProcess,
    OpenTimeline,
    Room,
    ShowValue,
)
from promptui.screens.dashboard import DashboardScreen
from promptui.screens.dialogs import ChoiceDialog, live_under_dialogs, quit_question
from promptui.screens.help import HelpScreen, TooSmallScreen
from promptui.settings import save_setting
from promptui.store import UIStore
from promptui.widgets.feeds import FollowLog
from runtime_core.control.local import LocalControl
from runtime_core.control.plane import ControlError, ControlPlane, EventStream
from runtime_core.control.views import JournalEntryView

MIN_SIZE = (80, 24)
DRAIN_LIMIT = 20_000  # events folded per tick at most; the stream keeps the rest
DEFAULT_HZ = 10.0
DEFAULT_THEME = "promptui-dark"
LOW_BANDWIDTH_HZ = 3.0
RECALLED_ANOMALIES = 20  # per process, read once when the room opens
AnyScreen = TypeVar("AnyScreen", bound=Screen[Any])


def tune_gc() -> None:
    """Fewer, cheaper garbage collections for a long-lived UI over a busy runtime: move what
    exists at start (modules, processes, widgets) out of the collector's way and collect the
    young generation less often. Measured in bench/tui_load.py: full collections of ~330k
    objects otherwise stall the event loop for 200-300 ms every second or two."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 10, 1_000)


class ControlRoom(RoomViews):
    CSS_PATH = "app.tcss"
    TITLE = "promptui"
    BINDINGS = bindings(GLOBAL_ACTIONS)

    def __init__(
        self, control: ControlPlane, *,
        themes: Iterable[Theme] = (),
        theme: str | None = None,
        refresh_hz: float = DEFAULT_HZ,
        low_bandwidth: bool = False,
        keymap: dict[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        start_runtime: bool = True,
        autopump: bool = True,
        time_format: TimeMode = "iso",
        settings_path: Path | None = None,
        bell: bool = True,
    ) -> None:
        super().__init__()
        self.bell_on = bell  # a new anomaly or waiting run rings (room_views.py)
        self.control = control
        self.store = UIStore()
        self.store.time_mode = time_format
        self._settings_path = settings_path  # where the time key writes its choice (None: not)
        self.clock = clock
        self.monotonic = monotonic
        self._autopump = autopump  # off in snapshot tests, which pump by hand
        self.low_bandwidth = low_bandwidth
        self.refresh_hz = LOW_BANDWIDTH_HZ if low_bandwidth else max(1.0, min(30.0, refresh_hz))
        self._themes = list(themes)
        self._theme_name = theme
        self._keymap = dict(keymap or {})
        self._start_runtime = start_runtime
        self._stream: EventStream | None = None
        self._last_tick = 0.0
        # Not ``_closed``: that is Textual's own (the app's message pump), and setting it
        # before exit() stops the app from processing the messages that would end it.
        self.runtime_closed = False
        self.pump_count = 0
        self._too_small: TooSmallScreen | None = None
        self._quitting = False  # a drain before quitting is under way
        self._runtime_stopping = False  # the runtime is being stopped (shutdown() entered)
        #: What the embedded runtime kept as it stopped with the room: each process's
        #: {"pending": queued events kept for the next start, "dead_letters": ...}; None
        #: attached, or before the room closes.
        self.kept: dict[str, dict[str, int]] | None = None
        self._link_lost_at: float | None = None  # attached: when the server went away
        if low_bandwidth:
            self.animation_level = "none"
        hide_refused(self, GLOBAL_ACTIONS, control.read_only)

    # -- start and stop --------------------------------------------------------------------
    def on_mount(self) -> None:
        for theme in self._themes:
            self.register_theme(theme)
        if self._theme_name and self._theme_name in self.available_themes:
            self.theme = self._theme_name
        elif any(t.name == DEFAULT_THEME for t in self._themes):
            self.theme = DEFAULT_THEME
        if self._keymap:
            self.set_keymap(self._keymap)
        self._stream = self.control.subscribe(maxsize=50_000)
        self._last_tick = self.monotonic()
        if self._autopump:
            self.set_interval(1.0 / self.refresh_hz, self.pump, name="ui-pump")
        if self._start_runtime:
            self.run_worker(self._start_all(), name="start-runtime", group="runtime")
        self.run_worker(self._recall_anomalies(), name="recall-anomalies", group="recall")
        self.call_after_refresh(self._check_size)  # on top of the dashboard, not under it

    def get_default_screen(self) -> Screen[Any]:
        # the base of the stack, so nothing can slip underneath it
        return self._room_screen(DashboardScreen())

    async def _start_all(self) -> None:
        try:
            await self.control.start_all()
        except Exception as exc:  # one process failing to start must not take the room down
            self.notify(f"a process failed to start: {exc}", severity="error", timeout=10)
        self._hide_refused()  # attached: the server may have said it is read-only

    async def _recall_anomalies(self) -> None:
        """The health monitors' recent anomalies (RECALLED_ANOMALIES per process) into the
        feed: a room attached to a runtime that found them before it opened shows them."""
        try:
            summaries = await self.control.list_processes()
        except Exception:  # a server away now: the live feed still comes
            return
        added = 0
        for summary in summaries:
            try:
                anomalies = await self.control.health_anomalies(summary.name)
            except Exception:  # gone, or no health: nothing to recall
                continue
            if anomalies:
                added += self.store.recall_anomalies(summary.name,
                                                     anomalies[-RECALLED_ANOMALIES:])
        dashboard = next((s for s in self.screen_stack if isinstance(s, DashboardScreen)), None)
        if added and dashboard is not None and dashboard.is_mounted:
            dashboard.replay(self.store)

    async def action_quit(self) -> None:
        """Quit. Embedded, the runtime stops with the room: with runs in flight it asks first
        (drain them, or cut them off). Attached, quitting only detaches: nothing to ask."""
        if self._quitting:  # q again while the runs drain: cut the drain short
            if isinstance(self.control, LocalControl):
                self.control.end_drains()
            return
        flights = await self._runs_in_flight()
        if not flights:
            await self._quit()
            return

        def chosen(choice: str | None) -> None:
            if choice is not None:
                drain = STOP_DRAIN_SECONDS if choice == "drain" else None
                self.run_worker(self._quit(drain), name="quit", group="runtime")

        def figures(store: UIStore, now: float) -> tuple[str, str]:
            # the store's rows, fresh each tick: the count stays true while the dialog is up
            return quit_question({name: row.active_runs for name, row in store.processes.items()
                                  if row.active_runs}, STOP_DRAIN_SECONDS)

        title, body = quit_question(flights, STOP_DRAIN_SECONDS)
        self.push_screen(ChoiceDialog(
            title, body,
            [("drain", "Drain, then quit"), ("now", "Quit now")], figures=figures), chosen)

    async def _runs_in_flight(self) -> dict[str, int]:
        """Runs in flight per process, when quitting stops them (an embedded runtime)."""
        if not isinstance(self.control, LocalControl):
            return {}
        summaries = await self.control.list_processes()
        return {s.name: s.active_runs for s in summaries if s.active_runs}

    async def _quit(self, drain: float | None = None) -> None:
        if drain is not None and isinstance(self.control, LocalControl):
            self._quitting = True  # the header shows "draining N run(s)" meanwhile
            self.notify(f"draining before quitting (up to {drain:g} s); q again quits now",
                        timeout=drain)
        await self.shutdown(drain or 0.0)
        self.exit()

    async def shutdown(self, drain: float = 0.0) -> None:
        """Stop the embedded runtime as every host stops (``AgentRuntime.shutdown``): the runs
        in flight may finish first (``drain`` seconds), what is still queued stays in the
        journal and runs at the next start (``kept`` says how much). Attached: detach."""
        if self._runtime_stopping:
            return
        self._runtime_stopping = True
        if isinstance(self.control, LocalControl):
            try:  # the pump goes on meanwhile: the header shows the drain
                self.kept = await self.control.shutdown(drain)
            except Exception as exc:  # closing below stops whatever is left
                self.notify(f"stop failed: {exc}", severity="error", timeout=8)
        self.runtime_closed = True
        if self._stream is not None:
            self._stream.close()
        if self.kept is None:  # attached, or the shutdown failed: close what is left
            await self.control.close()

    async def on_unmount(self) -> None:
        await self.shutdown()

    # -- the pump ----------------------------------------------------------------------------
    async def pump(self) -> None:
        if self._stream is None or self.runtime_closed:
            return
        now_mono = self.monotonic()
        elapsed, self._last_tick = now_mono - self._last_tick, now_mono
        if elapsed <= 0:  # a frozen test clock: count one nominal tick
            elapsed = 1.0 / self.refresh_hz
        events = self._stream.drain(DRAIN_LIMIT)
        self.store.dropped = self._stream.dropped
        try:
            summaries = await self.control.list_processes()
        except ControlError:  # an attached server refusing us: its link state says why
            summaries = list(self.store.processes.values())
        now = self.clock()
        self.store.update_processes(summaries)
        feed, activity = self.store.ingest(events, now, elapsed)
        self.ring_on_news(now_mono)
        self._tell_link(now)
        self.pump_count += 1
        try:
            stack = list(self.screen_stack)
        except ScreenStackError:  # quitting: the screens went while the pump awaited the runtime
            return
        # Under dialogs the screen stays live (k9s, lazygit): the topmost live screen draws,
        # and a dialog that shows figures is told the fresh ones, so its counts stay true.
        screen, dialogs = live_under_dialogs(stack)
        for dialog in dialogs:
            dialog.refresh_figures(self.store, now)
        if screen is None:
            return  # a full screen that is not live (help over nothing, too small)
        retime(screen, self.store.time_mode, now)
        try:
            await screen.show(self.store, now, feed, activity)
        except NoMatches:  # the screen is being torn down (quit): nothing to draw on
            return

    # -- navigation: screens ask by message ----------------------------------------------------
    @on(OpenProcess)
    def _open_process(self, message: OpenProcess) -> None:
        self.open_process(message.name, message.run_id)

    @on(OpenIncidents)
    def _open_incidents(self) -> None:
        self.open_incidents()

    @on(OpenTimeline)
    def _open_timeline(self, message: OpenTimeline) -> None:
        from promptui.screens.timeline import TimelineScreen  # loaded when first opened

        if not message.run_id:
            self.push_screen(self._room_screen(TimelineScreen(message.process)))
            return

        async def at_the_step() -> None:
            try:
                entries = await self.control.journal_entries(message.process,
                                                             run_id=message.run_id, limit=5000)
            except ControlError as exc:
                self.notify(str(exc), severity="warning", timeout=5)
                return
            anchor = step_entry(entries, message.step)
            if anchor is None:
                self.notify(f"no journal entry records step {message.step} of run "
                            f"{message.run_id[:8]} (a process without a journal keeps none)",
                            severity="warning", timeout=5)
                return
            self.push_screen(self._room_screen(TimelineScreen(message.process, anchor=anchor)))

        self.run_worker(at_the_step(), group="drill-down", exclusive=True)

    @on(ShowValue)
    def _show_value(self, message: ShowValue) -> None:
        from promptui.screens.pager import PagerScreen  # loaded when first opened

        self.push_screen(PagerScreen(message.title, message.value, message.ident))

    def open_process(self, name: str, run_id: str = "") -> None:
        from promptui.screens.detail import ProcessDetailScreen

        self.push_screen(self._room_screen(ProcessDetailScreen(name, focus_run=run_id)))

    def open_incidents(self) -> None:
        from promptui.screens.incidents import IncidentsScreen  # loaded when first opened

        if not isinstance(self.screen, IncidentsScreen):
            self.push_screen(self._room_screen(IncidentsScreen()))

    def current_process(self) -> str | None:
        for screen in reversed(self.screen_stack):
            if isinstance(screen, ModalScreen):
                continue
            return screen.current_process() if isinstance(screen, LiveScreen) else None
        return None

    # -- the read-only gate ------------------------------------------------------------------
    def _room_screen(self, screen: AnyScreen) -> AnyScreen:
        """``screen`` as this room offers it: its footer without the keys the room refuses."""
        if isinstance(screen, LiveScreen):
            hide_refused(screen, screen.ACTIONS, self.control.read_only)
        return screen

    def _hide_refused(self) -> None:
        """Take what a read-only room refuses out of the app's and every screen's footer."""
        if not self.control.read_only:
            return
        hide_refused(self, GLOBAL_ACTIONS, True)
        for screen in self.screen_stack:
            self._room_screen(screen)
        self.screen.refresh_bindings()

    def permits(self, spec: ActionSpec) -> bool:
        """False, and the operator told why, when ``spec`` may not run in this room."""
        why = refusal(spec, self.control.read_only)
        if why:
            self.notify(why, severity="warning", timeout=4)
        return not why

    async def run_action(self, action: str | ActionParseResult,
                         default_namespace: DOMNode | None = None,
                         namespaces: Mapping[str, DOMNode] | None = None) -> bool:
        """Every key binding and palette entry comes here. A mutating action of the app or of a
        live screen is refused in a read-only room before its method runs; the refusal counts
        as handled, so the key goes no further. An action its screen disables (check_action)
        is left to Textual, which passes the key on, as before."""
        destination, name, params = action if isinstance(action, tuple) else parse_action(action)
        target = self if default_namespace is None else default_namespace
        spec = None if destination else self._spec(target, name)
        if spec is None or not refusal(spec, self.control.read_only):
            return await super().run_action(action, default_namespace, namespaces)
        if not target.check_action(name, params):
            return False  # not on offer here (another tab's key): Textual passes it on
        if not (target is self and isinstance(self.screen, ModalScreen)):
            self.permits(spec)  # (under a dialog the app's keys are not commands: silence)
        return True

    def _spec(self, target: DOMNode, action: str) -> ActionSpec | None:
        if target is self:
            return find(GLOBAL_ACTIONS, action)
        return find(target.ACTIONS, action) if isinstance(target, LiveScreen) else None

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen | TooSmallScreen):
            return
        self.push_screen(HelpScreen(self.screen))

    def _tell_link(self, now: float) -> None:
        """Attached: a toast when the server goes away and when it is back (the header shows
        the link meanwhile). Embedded, the link is always "" and this says nothing."""
        link = self.control.link
        if link and self._link_lost_at is None:
            self._link_lost_at = now
            why = link.split(": ", 1)[-1]
            self.notify(f"lost the server at {date_time(now)} ({why}); retrying",
                        severity="warning", timeout=8)
        elif not link and self._link_lost_at is not None:
            away, self._link_lost_at = now - self._link_lost_at, None
            self.notify(f"reconnected after {away:.0f} s", timeout=5)

    def action_toggle_time(self) -> None:
        """Times absolute (local date and time) or relative ("3 min ago"), on every screen at
        once; the choice is written to the config file (``time_format``) for the next start."""
        mode: TimeMode = "relative" if self.store.time_mode == "iso" else "iso"
        self.store.time_mode = mode
        now = self.clock()
        for screen in self.screen_stack:
            retime(screen, mode, now)
        shown = "relative (3 min ago)" if mode == "relative" else \
            f"absolute ({date_time(now)})"
        self.notify(f"times: {shown}; a toggles", timeout=2)
        if self._settings_path is not None:
            try:
                save_setting("time_format", mode, self._settings_path)
            except OSError as exc:
                self.notify(f"time format not saved to {self._settings_path}: "
                            f"{exc.strerror or exc}", severity="warning", timeout=5)

    def action_cycle_theme(self) -> None:
        names = [t.name for t in self._themes] or sorted(self.available_themes)
        current = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(current + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    # -- command palette -------------------------------------------------------------------
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The app's actions, then the screen's: the lists the bindings and help come from.
        Each runs through ``run_action``, like its key (so through the read-only gate)."""
        for command in super().get_system_commands(screen):
            if command.title != "Theme":  # Textual's theme picker: ours (below) is the one
                yield command
        own = getattr(screen, "ACTIONS", ())  # a live screen's, or the pager's
        for target, specs in ((self, GLOBAL_ACTIONS), (screen, own)):
            for spec in specs:
                if spec.palette and spec.action != "quit":
                    yield SystemCommand(spec.description, f"{spec.keys} · {spec.binding_id}",
                                        self._runner(target, spec.action))
        for theme in self._themes:
            yield SystemCommand(f"Theme: {theme.name}", "switch to this theme",
                                _theme_setter(self, theme.name))

    # -- too small -----------------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        # The event's size: ``self.size`` is still the old one while this handler runs (the
        # App's own resize handler, which updates it, comes after ours).
        self._check_size(event.size)

    def _runner(self, target: DOMNode, action: str) -> Callable[[], Awaitable[bool]]:
        def run() -> Awaitable[bool]:
            return self.run_action(action, target)

        return run

    def _check_size(self, size: Size | None = None) -> None:
        size = size or self.size
        small = size.width < MIN_SIZE[0] or size.height < MIN_SIZE[1]
        if small and self._too_small is not None:
            self._too_small.show_size(size)
        elif small:
            self._too_small = TooSmallScreen(MIN_SIZE, size)
            self.push_screen(self._too_small)
        elif self._too_small is not None:
            screen, self._too_small = self._too_small, None
            if self.screen is screen:
                self.pop_screen()


def hide_refused(node: DOMNode, specs: Iterable[ActionSpec], read_only: bool) -> None:
    """Leave the actions a read-only room refuses out of ``node``'s footer hints. Their keys
    stay bound, so pressing one still says why (``run_action``'s gate). Textual's Footer shows
    a binding when its ``show`` is set and has no per-instance switch (a check_action False
    would also unbind the key), so the node's own copy of its bindings (made from BINDINGS for
    each instance, keymaps are applied on top later) gets copies with ``show`` off."""
    refused = {spec.action for spec in specs if refusal(spec, read_only)}
    if not refused:
        return
    keys = node._bindings.key_to_bindings
    for key, bound in keys.items():
        keys[key] = [replace(b, show=False) if b.action in refused else b for b in bound]


def retime(screen: Screen[Any], mode: TimeMode, now: float) -> None:
    """Bring the logs of ``screen`` (feeds, the live tail) to the time format ``mode``."""
    for log in screen.query(FollowLog):
        log.retime(mode, now)


def _theme_setter(app: ControlRoom, name: str) -> Callable[[], None]:
    def set_theme() -> None:
        app.theme = name

    return set_theme


_ROOM: type[Room] = ControlRoom  # the app is what its screens expect (checked by mypy)


def step_entry(entries: list[JournalEntryView], step: int | None) -> JournalEntryView | None:
    """The entry that recorded ``step`` of a run, from its entries: its own (a tool's intent),
    else the next (a model turn rides in its run's next intent or end); for None, its start."""
    if step is None:  # its run_started; else its first entry: the first tool intent carries
        # the start (SQLite schema 9), a run that called no tool folded it into its end
        started = [e for e in entries if e.entry_type == "run_started"]
        return started[-1] if started else min(entries, key=lambda e: e.seq, default=None)
    mine = [e for e in entries if e.step == step] or [e for e in entries if (
        e.step or 0) > step or e.entry_type == "run_finished"]  # schema 7: a turn carried
    return min(mine, key=lambda e: e.seq) if mine else None
