"""Every operator action in one place: its binding id (remappable from the config file), its
default keys, what it does, and whether it changes the runtime. The bindings, the command
palette, the help screen and the read-only gate are all built from these lists: a screen's
``BINDINGS`` come from its list, and the app refuses a ``mutating`` action in a read-only room
(``refusal`` below says how) before it reaches the screen."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from textual.binding import Binding, BindingType


@dataclass(frozen=True, slots=True)
class ActionSpec:
    id: str  # the binding id, without the "promptui." prefix
    keys: str
    action: str
    description: str
    mutating: bool = False  # it changes the runtime: refused when the room is read-only
    show: bool = True  # in the footer
    palette: bool = True  # in the command palette
    what: str = ""  # how a refusal names it (default: the description in lower case)

    @property
    def binding_id(self) -> str:
        return f"promptui.{self.id}"

    @property
    def refused_as(self) -> str:
        return self.what or self.description.lower()

    def binding(self) -> Binding:
        return Binding(self.keys, self.action, self.description, show=self.show,
                       id=self.binding_id)


def bindings(specs: Iterable[ActionSpec]) -> list[BindingType]:
    return [spec.binding() for spec in specs]


def find(specs: Iterable[ActionSpec], action: str) -> ActionSpec | None:
    """The spec of ``action`` (a method name without ``action_``) in ``specs``."""
    return next((spec for spec in specs if spec.action == action), None)


# -- the read-only gate --------------------------------------------------------------------
def read_only_message(what: str) -> str:
    return f"read-only: {what} is disabled (started with --read-only)"


def refusal(spec: ActionSpec, read_only: bool) -> str:
    """Why ``spec`` may not run in this room, or "" when it may. The one rule: a mutating
    action is off in a read-only room."""
    return read_only_message(spec.refused_as) if spec.mutating and read_only else ""


# -- the lists -----------------------------------------------------------------------------
# App-wide: they work on the process the current screen is about.
GLOBAL_ACTIONS = (
    ActionSpec("help", "question_mark,f1", "help", "Help"),
    ActionSpec("quit", "q", "quit", "Quit"),
    ActionSpec("start_stop", "s", "start_stop", "Start/stop", mutating=True),
    ActionSpec("suspend_resume", "p", "suspend_resume", "Suspend/resume", mutating=True),
    ActionSpec("inject", "i", "inject", "Inject event", mutating=True, what="inject"),
    ActionSpec("restart", "ctrl+r", "restart", "Restart", mutating=True, show=False),
    ActionSpec("theme", "t", "cycle_theme", "Theme", show=False),
    ActionSpec("jump", "colon", "jump", "Jump to process", show=False),
    ActionSpec("time", "a", "toggle_time", "Time: absolute/ago", show=False),
)

DASHBOARD_ACTIONS = (
    ActionSpec("open", "enter", "open_process", "Open"),
    ActionSpec("timeline", "w", "timeline", "Timeline", show=False),
    ActionSpec("view", "v", "view", "View whole", show=False),
    ActionSpec("filter", "slash", "filter", "Filter"),
    ActionSpec("sort", "o", "sort", "Sort", show=False),
    ActionSpec("sort_reverse", "O", "sort_reverse", "Reverse sort", show=False),
    ActionSpec("pause_feed", "space", "pause_feed", "Pause feed", show=False),
    ActionSpec("maximize", "z", "toggle_maximize", "Maximise panel", show=False),
    ActionSpec("incidents", "I", "incidents", "Incidents", show=False),
    ActionSpec("nodes", "N", "nodes", "Cluster nodes", show=False),
    ActionSpec("live_tail", "L", "live_tail", "Live tail", show=False),
    ActionSpec("pulse", "P", "pulse", "Pulse", show=False),
    ActionSpec("inbox", "B", "inbox", "Inbox", show=False),
    ActionSpec("clear_filter", "escape", "clear_filter", "Clear filter", show=False,
               palette=False),
)

# The process detail screen's tabs, in key order (1-9): pane id, name.
DETAIL_TABS = (("live", "Live"), ("queue", "Queue"), ("dead", "Dead letters"), ("runs", "Runs"),
               ("context", "Context"), ("conversation", "Conversation"),
               ("governance", "Governance"), ("config", "Config"), ("timeline", "Timeline"))

DETAIL_ACTIONS = (
    ActionSpec("detail.back", "escape,backspace", "back", "Back"),
    *(ActionSpec(f"detail.tab_{pane}", str(key), f"tab_{pane}", f"Show {name}", show=False)
      for key, (pane, name) in enumerate(DETAIL_TABS, 1)),
    ActionSpec("detail.mark", "space", "mark", "Mark"),
    ActionSpec("detail.redeliver", "r", "redeliver", "Redeliver", mutating=True),
    ActionSpec("detail.redeliver_all", "R", "redeliver_all", "Redeliver all", mutating=True,
               what="redeliver"),
    ActionSpec("detail.clear_dead", "x", "clear_dead", "Clear dead", mutating=True,
               what="clear dead letters"),
    ActionSpec("detail.older_dead", "left_square_bracket", "older_dead", "Older dead letters",
               show=False),
    ActionSpec("detail.newer_dead", "right_square_bracket", "newer_dead",
               "Newer dead letters", show=False),
    ActionSpec("detail.open_run", "enter", "open_run", "Open run"),
    ActionSpec("detail.view", "v", "view", "View whole"),
    ActionSpec("detail.timeline", "w", "timeline", "Timeline", show=False),
    ActionSpec("detail.save_manifest", "m", "save_manifest", "Save as manifest"),
)
# Enter on a waiting run reconciles it (or answers its evidence): the mutating half of open_run,
# gated on its own so a read-only room still shows the run's steps.
RECONCILE = ActionSpec("detail.reconcile", "enter", "open_run", "Reconcile", mutating=True,
                       show=False, palette=False)

INCIDENT_ACTIONS = (
    ActionSpec("incidents.back", "escape", "back", "Back"),
    ActionSpec("incidents.resolve", "r", "resolve", "Resolve", mutating=True),
    ActionSpec("incidents.reopen", "o", "reopen", "Reopen", mutating=True),
)

PULSE_ACTIONS = (
    ActionSpec("pulse.back", "escape", "back", "Back"),
    ActionSpec("pulse.open", "enter", "open_process", "Open"),
)

# The fleet inbox (promptui/screens/inbox.py): every process's dead letters and waiting runs.
INBOX_ACTIONS = (
    ActionSpec("inbox.back", "escape", "back", "Back"),
    ActionSpec("inbox.filter", "slash", "filter", "Filter"),
    ActionSpec("inbox.mark", "space", "mark", "Mark"),
    ActionSpec("inbox.open", "enter", "open_row", "Reconcile/view"),
    ActionSpec("inbox.view", "v", "view", "View whole"),
    ActionSpec("inbox.redeliver", "r", "redeliver", "Redeliver", mutating=True),
    ActionSpec("inbox.redeliver_all", "R", "redeliver_all", "Redeliver all shown",
               mutating=True, what="redeliver"),
)
# Enter on a waiting run in the inbox reconciles it: gated like the detail screen's.
INBOX_RECONCILE = ActionSpec("inbox.reconcile", "enter", "open_row", "Reconcile",
                             mutating=True, show=False, palette=False)

NODE_ACTIONS = (
    ActionSpec("nodes.back", "escape", "back", "Back"),
)

TIMELINE_ACTIONS = (
    ActionSpec("timeline.back", "escape", "back", "Back"),
    ActionSpec("timeline.preview", "p", "preview", "Preview rewind"),
    ActionSpec("timeline.fork", "f", "fork", "Fork", mutating=True),
    ActionSpec("timeline.filter", "slash", "filter", "Filter"),
    ActionSpec("timeline.type", "T", "cycle_type", "Type"),
    ActionSpec("timeline.goto", "g", "goto", "Go to time"),
    ActionSpec("timeline.newest", "n", "newest", "Newest", show=False),
    ActionSpec("timeline.view", "v", "view", "View whole"),
)
TAIL_ACTIONS = (
    ActionSpec("tail.back", "escape", "back", "Back"),
    ActionSpec("tail.search", "slash", "search", "Search"),
    ActionSpec("tail.next", "n", "next_match", "Next match"),
    ActionSpec("tail.previous", "N", "previous_match", "Previous match"),
    ActionSpec("tail.goto", "g", "goto", "Go to time"),
    ActionSpec("tail.follow", "F", "follow", "Follow"),
    ActionSpec("tail.wrap", "w", "wrap", "Wrap"),
)

# Applying a rewind from its preview: the dialog disables it in a read-only room.
REWIND = ActionSpec("timeline.rewind", "y", "apply", "Apply rewind", mutating=True, show=False,
                    palette=False, what="rewind")

# The pager (promptui/screens/pager.py): one value whole, from `v` (or Enter) on a row, a dead
# letter, a run, a step, a journal entry or a feed line. The moving keys are less's too.
PAGER_ACTIONS = (
    ActionSpec("pager.close", "escape,q", "close", "Close"),
    ActionSpec("pager.search", "slash", "search", "Search"),
    ActionSpec("pager.next", "n", "next_match", "Next match"),
    ActionSpec("pager.previous", "N", "previous_match", "Previous match"),
    ActionSpec("pager.copy", "y", "copy", "Copy"),
    ActionSpec("pager.copy_id", "Y", "copy_id", "Copy id"),
    ActionSpec("pager.wrap", "w", "wrap", "Wrap"),
    ActionSpec("pager.time", "a", "toggle_time", "Time: absolute/ago", show=False),
    ActionSpec("pager.left", "left,h", "left", "Left", show=False, palette=False),
    ActionSpec("pager.right", "right,l", "right", "Right", show=False, palette=False),
    ActionSpec("pager.down", "down,j", "down", "Down", show=False, palette=False),
    ActionSpec("pager.up", "up,k", "up", "Up", show=False, palette=False),
    ActionSpec("pager.page_down", "pagedown,space", "page_down", "Page down", show=False,
               palette=False),
    ActionSpec("pager.page_up", "pageup,b", "page_up", "Page up", show=False, palette=False),
    ActionSpec("pager.top", "home,g", "top", "Top", show=False),
    ActionSpec("pager.bottom", "end,G", "bottom", "Bottom", show=False),
    # A modal screen hides the app's keys: help is the pager's own.
    ActionSpec("pager.help", "question_mark,f1", "help", "Help", show=False, palette=False),
)
