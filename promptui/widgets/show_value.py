"""``ShowValue``: how a screen or a widget asks for the pager. It bubbles up to the app, which
opens the pager on top of whatever is showing; esc comes back to it. It lives down here, not
with the screens' other messages, so widgets (the feeds) can post it too."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class ShowValue(Message):
    """Show ``value`` whole: a dict, a list or a dataclass view as pretty JSON, a string as
    text. ``ident`` (an event, run or entry id) is what ``Y`` copies; "" when there is none.
    Only values from the control plane's views (already redacted) belong here."""

    def __init__(self, title: str, value: Any, ident: str = "") -> None:
        super().__init__()
        self.title = title
        self.value = value
        self.ident = ident
