"""What a screen knows of the control room, without knowing the app class.

- ``Room``: the little a screen asks of the app (the control plane, the store, the clock, a way
  to run a command and the read-only gate). The app implements it; screens reach it as
  ``self.room`` (dialogs: ``room_of(self)``).
- ``LiveScreen``: a screen the UI pump draws on, once a tick (``show``), that names the process
  the app-wide keys act on (``current_process``) and lists its actions (``ACTIONS``: its
  bindings, its palette entries and what the read-only gate checks).
- ``OpenProcess``, ``OpenIncidents``, ``OpenTimeline``: a screen asks to go somewhere by
  posting one; the app decides how to get there.
- ``ShowValue(title, value, ident)``: a screen (or a widget: it is defined among them) asks
  for the pager on one whole value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from textual.message import Message
from textual.screen import Screen

from promptui.widgets.show_value import ShowValue as ShowValue  # screens ask by message

if TYPE_CHECKING:
    from textual.dom import DOMNode

    from promptui.actions import ActionSpec
    from promptui.store import ActivityLine, FeedLine, UIStore
    from runtime_core.control.plane import ControlPlane


class Room(Protocol):
    """The control room as its screens see it."""

    @property
    def control(self) -> ControlPlane: ...

    @property
    def store(self) -> UIStore: ...

    def clock(self) -> float: ...

    def command(self, label: str, call: Callable[[], Awaitable[Any]],
                done: Callable[[Any], str] | None = None) -> None:
        """Run a control-plane call without blocking the UI, and say how it went."""

    def permits(self, spec: ActionSpec) -> bool:
        """The read-only gate: False (and the operator told why) when ``spec`` may not run."""


def room_of(node: DOMNode) -> Room:
    """The room ``node`` is in (the app implements ``Room``)."""
    return cast("Room", node.app)


class LiveScreen(Screen[None]):
    """A full screen over live data: the pump calls ``show`` once a tick while it is on top."""

    ACTIONS: ClassVar[tuple[ActionSpec, ...]] = ()

    @property
    def room(self) -> Room:
        return room_of(self)

    async def show(self, store: UIStore, now: float, feed: list[FeedLine],
                   activity: list[ActivityLine]) -> None:
        """Draw one tick: ``feed`` and ``activity`` are this tick's new lines."""

    def current_process(self) -> str | None:
        """The process the app-wide keys (s, p, i, ctrl+r) act on here, if any."""
        return None


class OpenProcess(Message):
    """Open the detail screen of ``name`` (at its run ``run_id``'s steps, when given)."""

    def __init__(self, name: str, run_id: str = "") -> None:
        super().__init__()
        self.name = name
        self.run_id = run_id


class OpenIncidents(Message):
    """Open the incidents screen (unless it is already on top)."""


class OpenPulse(Message):
    """Open the pulse screen (the last hour's charts)."""


class OpenInbox(Message):
    """Open the fleet inbox (every dead letter and waiting run)."""


class OpenTimeline(Message):
    """Open the rewind timeline of ``process``; with ``run_id`` and ``step``, at the journal
    entry that recorded that step of that run (a drill-down from a run's steps)."""

    def __init__(self, process: str, run_id: str = "", step: int | None = None) -> None:
        super().__init__()
        self.process = process
        self.run_id = run_id
        self.step = step


def view_line(screen: Screen[Any], item: object, text: str) -> None:
    """``v`` on a feed, activity or tail line: the line whole, in the pager."""
    value: Any = dataclasses.asdict(item) if dataclasses.is_dataclass(item) \
        and not isinstance(item, type) else text
    ident = str(getattr(item, "run_id", "") or "")
    screen.post_message(ShowValue("Line", value, ident))


def drill_down(screen: Screen[Any], item: object) -> None:
    """From a feed, activity or tail line to its process, at its run when it names one."""
    process = str(getattr(item, "process", "") or "")
    if not process or process == "*":
        screen.notify("this line is about no single process", timeout=3)
        return
    if process not in room_of(screen).store.processes:
        screen.notify(f"process {process} is not in this runtime any more", timeout=3)
        return
    screen.post_message(OpenProcess(process, str(getattr(item, "run_id", "") or "")))
