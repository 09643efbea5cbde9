"""The pager: one value whole (a row, a dead letter, a run, a step, a journal entry, a feed
line), where the tables cut it to fit. Pretty JSON or text, scrolled like ``less``; ``/``
searches (regex or plain text, case-insensitive), ``n``/``N`` step through the matches; ``y``
copies the value and ``Y`` its id through the terminal (OSC 52: over SSH and in tmux too).

Screens and widgets open it by posting ``ShowValue(title, value, ident)``; the app pushes it.
It is modal: the app's keys (stop, suspend...) do nothing under it, and esc goes back.

A known time field holding epoch seconds (``ts``, ``created_at``, ``since``...) reads as a time,
in the room's time format (``a`` toggles it here too), the raw number after it in brackets for
grep. ``w`` cuts long lines at the edge (left/right scroll sideways) or wraps them again."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static

from promptui.actions import PAGER_ACTIONS, bindings
from promptui.format import TimeMode, with_times
from promptui.widgets.pager_text import MAX_MATCHES, value_text
from promptui.widgets.pager_view import PagerView


class PagerScreen(ModalScreen[None]):
    CSS_PATH = "pager.tcss"
    ACTIONS = PAGER_ACTIONS
    BINDINGS = bindings(PAGER_ACTIONS)

    def __init__(self, title: str, value: Any, ident: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.ident = ident
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.asdict(value)
        self.value = value
        self.text = self._text(self._time_mode())  # what is shown and what y copies
        self.json_like = not isinstance(value, str)
        self.query_text = ""  # the last search

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="pager-title")
        yield PagerView(self.text, json_like=self.json_like, id="pager-body")
        yield Static("", id="pager-status")
        yield Input(placeholder="search: regex or text, case-insensitive; enter finds, esc "
                    "cancels", id="pager-search")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#pager-search", Input).display = False
        self.body.focus()

    # -- times and wrapping ----------------------------------------------------------------
    def _time_mode(self) -> TimeMode:
        store = getattr(self.app, "store", None)  # the room's; a bare app (tests): iso
        mode = getattr(store, "time_mode", "iso")
        return "relative" if mode == "relative" else "iso"

    def _text(self, mode: TimeMode) -> str:
        clock = getattr(self.app, "clock", time.time)
        return value_text(with_times(self.value, mode, clock()))

    async def action_toggle_time(self) -> None:
        await self.app.run_action("toggle_time")  # the room's: every screen at once
        self.text = self._text(self._time_mode())
        self.body.set_text(self.text)
        self.show_status()

    def action_wrap(self) -> None:
        body = self.body
        body.set_wrapped(not body.wrapped)
        self.notify("long lines wrapped (w cuts them)" if body.wrapped else
                    "long lines cut: left/right scroll sideways (w wraps them)", timeout=2)

    def action_left(self) -> None:
        self.body.scroll_relative(x=-8, animate=False)

    def action_right(self) -> None:
        self.body.scroll_relative(x=8, animate=False)

    @property
    def body(self) -> PagerView:
        return self.query_one(PagerView)

    def _title(self) -> Text:
        title = Text(self.title_text, style="bold", no_wrap=True, overflow="ellipsis")
        if self.ident:
            title.append(f"  {self.ident}", style="dim")
        return title

    # -- the status line: where we are, and the search ---------------------------------------
    @on(PagerView.Moved)
    def _moved(self) -> None:
        self.show_status()

    def match_status(self) -> str:
        body = self.body
        if not self.query_text:
            return ""
        if not body.matches:
            return f"no match for {self.query_text!r}"
        more = "+" if len(body.matches) >= MAX_MATCHES else ""  # it stopped counting there
        return f"match {body.current + 1}/{len(body.matches)}{more} · /{self.query_text}"

    def show_status(self) -> None:
        body = self.body
        total = len(body.rows)
        first = min(total, body.top_row + 1)
        last = min(total, body.top_row + body.page_rows)
        share = 100 if last >= total else int(100 * last / max(1, total))
        text = Text(f"rows {first}-{last} of {total} · {share}% · {len(self.text):,} chars",
                    style="dim")
        found = self.match_status()
        if found:
            text.append("   ")
            text.append(found, style="bold" if body.matches else "bold yellow")
        self.query_one("#pager-status", Static).update(text)

    # -- search ------------------------------------------------------------------------------
    def action_search(self) -> None:
        box = self.query_one("#pager-search", Input)
        box.value = self.query_text  # the last search, selected: enter runs it again,
        box.display = True  # typing replaces it
        box.focus()

    @on(Input.Submitted, "#pager-search")
    def _search(self, event: Input.Submitted) -> None:
        event.stop()
        self._close_search()
        self.query_text = event.value
        count = self.body.search(event.value)
        if count:
            self.body.goto(self.body.first_from_top())
        self.show_status()

    def _close_search(self) -> None:
        box = self.query_one("#pager-search", Input)
        box.display = False
        self.body.focus()

    def _step(self, step: int) -> None:
        body = self.body
        if not self.query_text:
            self.notify("no search yet: / searches", timeout=2)
            return
        if not body.matches:
            self.notify(f"no match for {self.query_text!r}", severity="warning", timeout=2)
            return
        body.goto(body.current + step)  # round the end to the start, and back
        self.show_status()

    def action_next_match(self) -> None:
        self._step(+1)

    def action_previous_match(self) -> None:
        self._step(-1)

    # -- copy --------------------------------------------------------------------------------
    def action_copy(self) -> None:
        self._copy(self.text, "the value")

    def action_copy_id(self) -> None:
        if not self.ident:
            self.notify("this value has no id to copy; y copies the value", timeout=3)
            return
        self._copy(self.ident, "the id")

    def _copy(self, text: str, what: str) -> None:
        # Textual writes OSC 52 (ESC ] 52 ; c ; base64 BEL): the terminal sets its clipboard,
        # so it works over SSH; tmux passes it on with `set -g set-clipboard on`.
        self.app.copy_to_clipboard(text)
        self.notify(f"copied {len(text):,} characters ({what})", timeout=3)

    # -- moving ------------------------------------------------------------------------------
    def action_down(self) -> None:
        self.body.scroll_relative(y=1, animate=False)

    def action_up(self) -> None:
        self.body.scroll_relative(y=-1, animate=False)

    def action_page_down(self) -> None:
        self.body.scroll_relative(y=self.body.page_rows, animate=False)

    def action_page_up(self) -> None:
        self.body.scroll_relative(y=-self.body.page_rows, animate=False)

    def action_top(self) -> None:
        self.body.scroll_home(animate=False)

    def action_bottom(self) -> None:
        self.body.scroll_end(animate=False)

    async def action_help(self) -> None:
        await self.app.run_action("help")  # the app's help, on this screen's keys

    def action_close(self) -> None:
        if self.query_one("#pager-search", Input).has_focus:  # esc leaves the search first
            self._close_search()
            return
        self.dismiss(None)
