"""The app-wide commands on the process the current screen is about: start or stop it (with a
drain while runs are in flight), suspend or resume, restart, inject an event, and ``:`` to jump
to a process by name. Each runs as a worker through ``command`` so the room never blocks, and
asks first the way every bulk or irreversible action does (Cancel focused).

A mixin of the app (``ControlRoom``), which brings the control plane, the store, the screen
stack and ``current_process``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.screen import ModalScreen

from promptui.screens.dashboard import DashboardScreen
from promptui.screens.dialogs import ChoiceDialog, ConfirmDialog, InjectDialog, InjectRequest
from promptui.screens.jump import JumpPrompt
from runtime_core.control.plane import ControlError

if TYPE_CHECKING:
    from promptui.store import UIStore
    from runtime_core.control.plane import ControlPlane

STOP_DRAIN_SECONDS = 30.0  # the stop dialog's drain: as long as serve's default


class RoomCommands(App[None]):
    control: ControlPlane
    store: UIStore

    def current_process(self) -> str | None:  # the app says which, from its screen stack
        raise NotImplementedError

    async def pump(self) -> None:
        raise NotImplementedError

    def _room_screen(self, screen: Any) -> Any:
        return screen

    # -- actions on the current process ---------------------------------------------------
    def _target(self) -> str | None:
        if isinstance(self.screen, ModalScreen):
            return None  # keys typed into a dialog are not commands
        name = self.current_process()
        if name is None:
            self.notify("no process selected", severity="warning", timeout=3)
        return name

    def command(self, label: str, call: Callable[[], Awaitable[Any]],
                done: Callable[[Any], str] | None = None) -> None:
        """Run a control-plane command without blocking the UI; say how it went."""

        async def go() -> None:
            try:
                result = await call()
            except ControlError as exc:
                self.notify(str(exc), severity="error", timeout=6)
                return
            except Exception as exc:  # the runtime said no: show it, keep the room up
                self.notify(f"{label} failed: {exc}", severity="error", timeout=8)
                return
            self.notify(done(result) if done else f"{label}: done", timeout=3)
            await self.pump()

        self.run_worker(go(), group="commands", name=label)

    def _state_of(self, name: str) -> str:
        row = self.store.processes.get(name)
        return row.state if row is not None else ""

    def action_start_stop(self) -> None:
        name = self._target()
        if name is None:
            return
        if self._state_of(name) in ("created", "stopped", "failed"):
            self.command(f"start {name}", lambda: self.control.start(name))
            return

        row = self.store.processes.get(name)
        running = row.active_runs if row is not None else 0

        def chosen(choice: str | None) -> None:
            if choice == "drain":
                self.command(f"stop {name} (draining)",
                             lambda: self.control.stop(name, STOP_DRAIN_SECONDS))
            elif choice == "now":
                self.command(f"stop {name}", lambda: self.control.stop(name, 0.0))

        queued = ("Queued events stay queued in the journal and run once when it starts "
                  "again.")
        if not running:
            self.push_screen(ChoiceDialog(f"Stop {name}?", queued, [("now", "Stop")]), chosen)
            return
        self.push_screen(ChoiceDialog(
            f"Stop {name}? {running} run(s) in flight",
            f"Drain: they finish first (up to {STOP_DRAIN_SECONDS:g} s) while no new event "
            "is taken. Stop now: they are cut off and go on from their last durable step at "
            f"its next start (a write cut off waits for an operator to reconcile). {queued}",
            [("drain", "Drain, then stop"), ("now", "Stop now")]), chosen)

    def action_suspend_resume(self) -> None:
        name = self._target()
        if name is None:
            return
        row = self.store.processes.get(name)
        if row is not None and row.state == "suspended" and row.suspend_reason == "health":
            self._resume_health_paused(name)
        elif self._state_of(name) == "suspended":
            self.command(f"resume {name}", lambda: self.control.resume(name))
        else:
            self.command(f"suspend {name}", lambda: self.control.suspend(name))

    def _resume_health_paused(self, name: str) -> None:
        """Its health monitor paused it: resume as it is (the monitor keeps its memory, so
        an anomaly it reported stays quiet for its cooldown), or resume and watch again (the
        spec's clear_anomalies() first: a recurring anomaly pauses it again at once)."""

        def chosen(choice: str | None) -> None:
            if choice == "resume":
                self.command(f"resume {name}", lambda: self.control.resume(name))
            elif choice == "watch":
                self.command(f"resume {name} and watch again",
                             lambda: self.control.resume(name, watch_again=True))

        self.push_screen(ChoiceDialog(
            f"Resume {name}? Its health monitor paused it",
            "Resume: the monitor keeps its memory; an anomaly it reported is not reported "
            "again within its cooldown. Resume and watch again: it forgets its anomalies and "
            "cooldowns first, so if the anomaly recurs it pauses the process again at once.",
            [("resume", "Resume"), ("watch", "Resume and watch again")]), chosen)

    def action_restart(self) -> None:
        name = self._target()
        if name is None:
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.command(f"restart {name}", lambda: self.control.restart(name))

        self.push_screen(ConfirmDialog(
            f"Restart {name}?", "It stops (runs in flight finish) and starts again.",
            "Restart"), confirmed)

    def action_inject(self) -> None:
        name = self._target()
        if name is None:
            return

        def send(request: InjectRequest | None) -> None:
            if request is not None:
                self.command(f"inject into {name}", lambda: self.control.inject(
                    name, request.payload, request.trigger_type),
                    lambda event_id: f"event {str(event_id)[:8]} queued for {name}")

        self.push_screen(InjectDialog(name), send)

    def action_jump(self) -> None:
        """``:``: jump to a process by name (screens/jump.py)."""
        if isinstance(self.screen, ModalScreen):
            return
        self.push_screen(JumpPrompt(self._names_in_table_order()), self._jump_to)

    def _dashboard(self) -> DashboardScreen | None:
        return next((s for s in self.screen_stack if isinstance(s, DashboardScreen)), None)

    def _names_in_table_order(self) -> list[str]:
        """The dashboard table's rows as they are sorted, then those its filter hides."""
        dashboard = self._dashboard()
        shown = [str(row.key.value) for row in dashboard.table.ordered_rows] \
            if dashboard is not None else []
        return [*shown, *(name for name in self.store.processes if name not in shown)]

    def _jump_to(self, name: str | None) -> None:
        if name is None:
            return
        dashboard = self._dashboard()
        if dashboard is not None:  # the table's cursor and the focus go to it
            dashboard.show_process(name)
        if isinstance(self.screen, DashboardScreen):
            return
        from promptui.screens.detail import ProcessDetailScreen

        screen = self._room_screen(ProcessDetailScreen(name))
        if isinstance(self.screen, ProcessDetailScreen):
            self.switch_screen(screen)  # one detail screen at a time: Esc still goes home
        else:
            self.push_screen(screen)
