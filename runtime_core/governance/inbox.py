"""The operator inbox: messages and questions for an agent, shown in its next run's prompt.

A question (``ask``) wakes the agent with an ``inbox`` event and waits for the answer the agent
gives in its reply as ``ANSWER Q<n>: ...``."""

from __future__ import annotations

import asyncio
import itertools
import re
import secrets as _random
from collections import deque
from dataclasses import dataclass, field

from runtime_core.clock import Clock
from runtime_core.governance.config import InboxConfig

_RANK = {"low": 0, "normal": 1, "high": 2, "critical": 3}
ANSWER = re.compile(r"ANSWER Q(\d+):\s*(.*?)(?=ANSWER Q\d+:|\Z)", re.DOTALL)


@dataclass(slots=True)
class InboxMessage:
    message_id: str
    content: str
    message_type: str
    priority: str
    sender_id: str | None
    created: float
    expires: float | None
    number: int = 0  # questions are numbered Q1, Q2, ... in the prompt
    answer: asyncio.Future[str] | None = field(default=None, repr=False)


class Inbox:
    def __init__(self, config: InboxConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self._messages: list[InboxMessage] = []
        self._sent: dict[str, deque[float]] = {}
        self._numbers = itertools.count(1)

    def add(self, content: str, *, message_type: str = "context", priority: str = "normal",
            sender_id: str | None = None, ttl: float | None = None) -> InboxMessage:
        if message_type not in ("directive", "context", "question", "correction"):
            raise ValueError(f"message_type must be directive, context, question or "
                             f"correction, not {message_type!r}")
        if priority not in _RANK:
            raise ValueError(f"priority must be low, normal, high or critical, not {priority!r}")
        now = self.clock.time()
        if sender_id is not None:
            window = self._sent.setdefault(sender_id, deque())
            while window and now - window[0] > 3600:
                window.popleft()
            if len(window) >= self.config.rate_limit_per_sender:
                raise ValueError(f"rate limit exceeded: sender {sender_id!r} sent "
                                 f"{len(window)} messages in the last hour "
                                 f"(limit {self.config.rate_limit_per_sender})")
            window.append(now)
        self.purge()
        life = self.config.default_ttl if ttl is None else min(ttl, self.config.max_ttl)
        message = InboxMessage(
            f"msg_{_random.token_hex(8)}", content[: self.config.max_message_length],
            message_type, priority, sender_id, now, now + life if life else None)
        if message_type == "question":
            message.number = next(self._numbers)
            message.answer = asyncio.get_running_loop().create_future()
        if len(self._messages) >= self.config.max_messages:
            self._evict()
        self._messages.append(message)
        return message

    def _evict(self) -> None:
        candidates = [m for m in self._messages if m.priority != "critical"] or self._messages
        victim = min(candidates, key=lambda m: (_RANK[m.priority], m.created))
        self._messages.remove(victim)
        if victim.answer is not None and not victim.answer.done():
            victim.answer.set_exception(ValueError("question evicted from a full inbox"))

    def purge(self) -> None:
        now = self.clock.time()
        for message in [m for m in self._messages if m.expires is not None and m.expires <= now]:
            self._messages.remove(message)
            if message.answer is not None and not message.answer.done():
                message.answer.set_exception(TimeoutError("question expired unanswered"))

    def pending(self) -> list[InboxMessage]:
        self.purge()
        return sorted(self._messages, key=lambda m: (-_RANK[m.priority], m.created))

    def prompt_block(self) -> str | None:
        pending = self.pending()
        if not pending:
            return None
        lines = ["=== OPERATOR MESSAGES ==="]
        for m in pending:
            who = f" from {m.sender_id}" if m.sender_id else ""
            if m.message_type == "question":
                lines.append(f"[QUESTION Q{m.number}{who}] {m.content}")
                lines.append(f'-> answer in your reply as "ANSWER Q{m.number}: ..."')
            else:
                lines.append(f"[{m.priority.upper()} {m.message_type.upper()}{who}] {m.content}")
        lines.append("=== END OPERATOR MESSAGES ===")
        return "\n".join(lines)

    def after_run(self, reply: str) -> None:
        """Answer the questions the reply answers; other messages have now been seen."""
        answers = {int(n): text.strip() for n, text in ANSWER.findall(reply)}
        keep: list[InboxMessage] = []
        for m in self._messages:
            if m.message_type != "question":
                continue
            if m.number in answers and m.answer is not None and not m.answer.done():
                m.answer.set_result(answers[m.number])
            else:
                keep.append(m)
        self._messages = keep

    def clear(self) -> None:
        for m in self._messages:
            if m.answer is not None and not m.answer.done():
                m.answer.set_exception(RuntimeError("inbox cleared"))
        self._messages.clear()

    def status(self) -> dict[str, object]:
        pending = self.pending()
        return {"pending_messages": len(pending),
                "pending_questions": sum(m.message_type == "question" for m in pending)}
