"""The Chat tab: the process's conversation, role: content, newest at the bottom."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import RichLog

from promptui.format import compact

CONVERSATION_MAX_LINES = 2000
MESSAGE_CHARS = 2000
ROLE_STYLES = {"user": "bold cyan", "assistant": "bold green", "system": "dim",
               "tool": "magenta"}


class ConversationLog(RichLog):
    """Appends when the buffer only grew, redraws when it was trimmed or rewound (rare, so no
    per-tick refill)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_lines=CONVERSATION_MAX_LINES, wrap=True, markup=False,
                         auto_scroll=True, **kwargs)
        self._shown: tuple[dict[str, Any], ...] = ()

    def show(self, messages: tuple[dict[str, Any], ...]) -> None:
        if messages == self._shown:
            return
        old = self._shown
        if len(messages) >= len(old) and messages[: len(old)] == old:
            new = messages[len(old):]
        else:
            self.clear()
            new = messages
        if not messages:
            self.write(Text("no conversation yet", style="dim"))
        for message in new:
            role = str(message.get("role", "?"))
            content = message.get("content")
            body = content if isinstance(content, str) else compact(content)
            if not body and message.get("tool_calls"):
                body = f"(tool calls) {compact(message['tool_calls'])}"
            line = Text(f"{role}: ", style=ROLE_STYLES.get(role, "bold"))
            line.append(body[:MESSAGE_CHARS] + ("…" if len(body) > MESSAGE_CHARS else ""))
            self.write(line)
        self._shown = messages
