"""The room's overviews and alerts: opening the pulse screen and the fleet inbox (``P`` and
``B`` on the dashboard), and the bell. A new anomaly or a new waiting run rings the terminal
bell (at most once every BELL_SECONDS; the ``bell`` setting turns it off) and counts as "new
since you last looked" in the header until the operator looks: focuses the anomaly feed or
opens the inbox.

A mixin of the app (``ControlRoom``), between it and ``RoomCommands``."""

from __future__ import annotations

from textual import events

from promptui.room_commands import RoomCommands
from promptui.screens.base import OpenInbox, OpenPulse
from promptui.widgets.feeds import AnomalyFeed

BELL_SECONDS = 5.0  # one bell for a burst: a run of anomalies rings once, not once each


class RoomViews(RoomCommands):
    bell_on = True  # the setting (``bell`` in the config file)
    bells = 0  # how many times the room rang (tests read it)
    _alerts_heard = 0  # the store's alert count at the last bell check
    _bell_at: float | None = None

    def ring_on_news(self, now_mono: float) -> None:
        """After the pump folded a tick: ring when an alert came in, unless it rang lately."""
        heard, self._alerts_heard = self._alerts_heard, self.store.alerts_rung
        if self.store.alerts_rung == heard or not self.bell_on:
            return
        if self._bell_at is not None and now_mono - self._bell_at < BELL_SECONDS:
            return
        self._bell_at = now_mono
        self.bells += 1
        self.bell()

    def on_open_pulse(self, message: OpenPulse) -> None:
        from promptui.screens.pulse import PulseScreen  # loaded when first opened

        if not isinstance(self.screen, PulseScreen):
            self.push_screen(self._room_screen(PulseScreen()))

    def on_open_inbox(self, message: OpenInbox) -> None:
        from promptui.screens.inbox import InboxScreen  # loaded when first opened

        self.store.seen_alerts()
        if not isinstance(self.screen, InboxScreen):
            self.push_screen(self._room_screen(InboxScreen()))

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if isinstance(event.widget, AnomalyFeed):  # the operator looks at the anomalies
            self.store.seen_alerts()
