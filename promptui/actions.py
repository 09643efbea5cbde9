"""Every operator action in one place: its binding id (remappable from the config file), its
default keys, what it does, and whether it changes the runtime (refused when read-only). The
bindings, the command palette and the help screen are all built from this list."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True, slots=True)
class ActionSpec:
    id: str  # the binding id, without the "promptui." prefix
    keys: str
    action: str
    description: str
    mutating: bool = False
    show: bool = True  # in the footer
    palette: bool = True  # in the command palette

    @property
    def binding_id(self) -> str:
        return f"promptui.{self.id}"

    def binding(self) -> Binding:
        return Binding(self.keys, self.action, self.description, show=self.show,
                       id=self.binding_id)


# App-wide: they work on the process the current screen is about.
GLOBAL_ACTIONS = (
    ActionSpec("help", "question_mark,f1", "help", "Help"),
    ActionSpec("quit", "q", "quit", "Quit"),
    ActionSpec("start_stop", "s", "start_stop", "Start/stop", mutating=True),
    ActionSpec("suspend_resume", "p", "suspend_resume", "Suspend/resume", mutating=True),
    ActionSpec("inject", "i", "inject", "Inject event", mutating=True),
    ActionSpec("restart", "ctrl+r", "restart", "Restart", mutating=True, show=False),
    ActionSpec("theme", "t", "cycle_theme", "Theme", show=False),
)

DASHBOARD_ACTIONS = (
    ActionSpec("open", "enter", "open_process", "Open"),
    ActionSpec("filter", "slash", "filter", "Filter"),
    ActionSpec("sort", "o", "sort", "Sort", show=False),
    ActionSpec("sort_reverse", "O", "sort_reverse", "Reverse sort", show=False),
    ActionSpec("pause_feed", "space", "pause_feed", "Pause feed", show=False),
    ActionSpec("incidents", "I", "incidents", "Incidents", show=False),
    ActionSpec("clear_filter", "escape", "clear_filter", "Clear filter", show=False,
               palette=False),
)

MUTATING_ACTIONS = frozenset(spec.action for spec in (*GLOBAL_ACTIONS, *DASHBOARD_ACTIONS)
                             if spec.mutating)
