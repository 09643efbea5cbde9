"""AgentContext (the process's key-value state) and ConversationBuffer (its message history)."""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from runtime_core.strict import StrictModel

Message = dict[str, Any]


class ContextConfig(StrictModel):
    """What a process keeps between runs: a key-value context state the agent reads and
    writes, and the conversation. ``conversation_history``: each run resends up to
    ``conversation_max_messages`` earlier messages to the model (0: none); false sends none,
    not even those a restart restored."""

    writable_keys: list[str] = Field(default_factory=list, description=(
        "The context keys the agent may write; empty: any key."))
    initial_state: dict[str, Any] = Field(default_factory=dict, description=(
        "The context state a new process starts with (a manifest's world:); keys recovered "
        "from the journal replace these."))
    conversation_history: bool = Field(default=True, description=(
        "Resend earlier messages to the model in each run; false sends none, not even those "
        "a restart restored."))
    conversation_max_messages: Annotated[int, Field(ge=0, description=(
        "The most earlier messages a run resends (0: none)."))] = 100
    conversation_clear_on_stop: bool = Field(default=False, description=(
        "Forget the conversation when the process stops."))



@dataclass(frozen=True, slots=True)
class StateEntry:
    key: str
    value: Any
    timestamp: float
    source: str


ContextListener = Callable[[str, Any, str, bool], None]


class AgentContext:
    """Key-value state that survives runs. Every write is reported to the listeners."""

    HISTORY_PER_KEY = 20

    def __init__(
        self,
        *,
        writable_keys: Iterable[str] | None = None,
        initial_state: dict[str, Any] | None = None,
    ) -> None:
        self._writable = frozenset(writable_keys or ())
        self._state: dict[str, Any] = {}
        self._history: dict[str, deque[StateEntry]] = {}
        self._listeners: list[ContextListener] = []
        for key, value in (initial_state or {}).items():
            self._record(key, value, "system")

    @property
    def writable_keys(self) -> frozenset[str]:
        return self._writable

    def add_listener(self, listener: ContextListener) -> None:
        self._listeners.append(listener)

    def is_writable(self, key: str) -> bool:
        return not self._writable or key in self._writable

    def get(self, key: str, default: Any = None) -> Any:
        return self._state.get(key, default)

    def put(self, key: str, value: Any, *, source: str = "agent", record: bool = True) -> None:
        """Set ``key``. ``record=False`` tells listeners the write is already journaled elsewhere
        (a tool's updates travel with its result)."""
        if not self.is_writable(key):
            allowed = ", ".join(sorted(self._writable))
            raise KeyError(f"context key {key!r} is not writable (writable keys: {allowed})")
        self._record(key, value, source)
        for listener in self._listeners:
            listener(key, value, source, record)

    def _record(self, key: str, value: Any, source: str) -> None:
        self._state[key] = value
        history = self._history.setdefault(key, deque(maxlen=self.HISTORY_PER_KEY))
        history.append(StateEntry(key, value, time.time(), source))

    def replace_state(self, state: dict[str, Any], *, source: str = "system") -> None:
        """Replace the whole state (recovery, rewind) without treating it as agent writes."""
        self._state = {}
        for key, value in state.items():
            self._record(key, value, source)

    def state_snapshot(self) -> dict[str, Any]:
        return copy.deepcopy(self._state)

    def state_keys(self) -> list[str]:
        return list(self._state)

    def state_history(self, key: str) -> list[StateEntry]:
        return list(self._history.get(key, ()))

    def __len__(self) -> int:
        return len(self._state)


class ConversationBuffer:
    """Bounded message history. A run commits its messages in one call, so concurrent runs never
    interleave their turns.

    Code written for the reference runtime finds its method names here too: ``append``,
    ``extend``, ``get_messages``, ``set_messages``, ``clear``, the awaitable
    ``async_snapshot``/``async_replace``/``async_append``, ``to_dict``/``from_dict`` and
    ``len()``. One difference: ``max_messages=0`` keeps no message here (the reference kept
    all); pass a large number for "all"."""

    def __init__(self, max_messages: int = 100, *, enabled: bool = True) -> None:
        self.max_messages = max_messages
        self.enabled = enabled
        # maxlen 0 keeps nothing: "at most 0 messages" means none, not unlimited.
        self._messages: deque[Message] = deque(maxlen=max_messages)

    def commit(self, messages: Iterable[Message]) -> None:
        if self.enabled:
            self._messages.extend(messages)

    def messages(self) -> list[Message]:
        """A copy of the messages, oldest first."""
        return list(self._messages) if self.enabled else []

    # -- the reference runtime's names (thin aliases) ---------------------------------------
    def append(self, message: Message) -> None:
        """Add one message (the reference's name; a run uses ``commit``)."""
        self.commit([message])

    def extend(self, messages: Iterable[Message]) -> None:
        """Add messages in order (the reference's name for ``commit``)."""
        self.commit(messages)

    def get_messages(self) -> list[Message]:
        """A copy of the messages, oldest first (the reference's name for ``messages``)."""
        return self.messages()

    async def async_snapshot(self) -> list[Message]:
        """``get_messages``, awaitable (the reference locked its buffer; ours needs no lock:
        a run commits in one call)."""
        return self.messages()

    async def async_replace(self, messages: Iterable[Message]) -> None:
        """``set_messages``, awaitable."""
        self.set_messages(messages)

    async def async_append(self, message: Message) -> None:
        """``append``, awaitable."""
        self.append(message)

    def to_dict(self) -> dict[str, Any]:
        """``{max_messages, enabled, messages}``, the reference's serialised form."""
        return {"max_messages": self.max_messages, "enabled": self.enabled,
                "messages": self.messages()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConversationBuffer:
        """A buffer from ``to_dict``'s form (a missing ``max_messages`` is 100)."""
        buffer = cls(int(data.get("max_messages", 100)), enabled=bool(data.get("enabled", True)))
        buffer.set_messages(list(data.get("messages") or []))
        return buffer

    def set_messages(self, messages: Iterable[Message]) -> None:
        """Replace the history (a recovery, a rewind); kept only while history is on."""
        self._messages = deque(messages if self.enabled else (), maxlen=self.max_messages)

    def clear(self) -> None:
        self._messages.clear()

    def __len__(self) -> int:
        return len(self._messages)
