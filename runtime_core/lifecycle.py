"""Process lifecycle: the states, the allowed transitions and the error for the others."""

from __future__ import annotations

import contextlib
import enum
import logging
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, Self

from runtime_core.errors import RuntimeBaseError

log = logging.getLogger(__name__)


class ProcessState(str, enum.Enum):
    """A process's lifecycle state: ``created`` (never started), ``starting``, ``running``,
    ``suspended`` (events queue, nothing runs), ``stopping``, ``stopped`` and ``failed``
    (after ``max_consecutive_failures``, or a start that raised). ProcessLifecycle holds the
    allowed transitions; a forbidden one raises StateError."""

    CREATED = "created"
    STARTING = "starting"
    RUNNING = "running"
    SUSPENDED = "suspended"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


S = ProcessState

VALID_TRANSITIONS: dict[ProcessState, frozenset[ProcessState]] = {
    S.CREATED: frozenset({S.STARTING, S.STOPPED}),
    S.STARTING: frozenset({S.RUNNING, S.FAILED, S.STOPPING}),
    S.RUNNING: frozenset({S.SUSPENDED, S.STOPPING, S.FAILED}),
    S.SUSPENDED: frozenset({S.RUNNING, S.STOPPING, S.FAILED}),
    S.STOPPING: frozenset({S.STOPPED, S.FAILED}),
    S.STOPPED: frozenset({S.STARTING}),
    S.FAILED: frozenset({S.STARTING, S.STOPPING}),
}


class StateError(ValueError, RuntimeBaseError):
    """A lifecycle transition or a method call that the current state does not allow.

    Also known by the reference runtime's name, ``ProcessStateError`` (with its attributes
    ``current_state`` and ``attempted_state``)."""

    def __init__(self, current: ProcessState, target: ProcessState | str, detail: str = "") -> None:
        self.current = current
        self.target = target
        allowed = sorted(s.value for s in VALID_TRANSITIONS[current])
        target_text = target.value if isinstance(target, ProcessState) else target
        message = (
            f"Cannot transition from '{current.value}' to '{target_text}'. "
            f"Allowed targets: {allowed}"
        )
        if detail:
            message = f"{detail}: {message}"
        super().__init__(message)

    @property
    def current_state(self) -> str:
        return self.current.value

    @property
    def attempted_state(self) -> str:
        return self.target.value if isinstance(self.target, ProcessState) else str(self.target)


#: The reference runtime's name for the error a state that does not allow a call raises.
ProcessStateError = StateError


class AlreadyDone:
    """Something a call returns at once that code written for the reference runtime awaits
    (there the call is a coroutine): ``await x`` is ``x``, and ``x`` works unawaited too.
    ``ProcessLifecycle.transition`` returns one, and ``AgentRuntime.add_process`` (an
    AgentProcess is one)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, Self]:
        yield from ()
        return self


@dataclass(frozen=True, slots=True)
class ProcessTransition(AlreadyDone):
    """One change of state: from, to, when (epoch seconds), why, and what came with it.
    Awaitable (it is itself), as the reference runtime's ``await lifecycle.transition(...)``
    expects."""

    from_state: ProcessState
    to_state: ProcessState
    timestamp: float
    reason: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "from_state": self.from_state.value,
            "to_state": self.to_state.value,
            "timestamp": self.timestamp,
            "reason": self.reason,
            "metadata": dict(self.metadata),
        }


TransitionListener = Callable[[ProcessTransition], None]


class ProcessLifecycle:
    """Holds the current state and a bounded history of transitions.

    Transitions are synchronous: asyncio is single-threaded, so checking and changing the state in
    one call cannot interleave with another task.
    """

    HISTORY_LIMIT = 200

    def __init__(self, initial: ProcessState = S.CREATED) -> None:
        self._state = initial
        self._history: list[ProcessTransition] = []
        self._listeners: list[TransitionListener] = []

    @property
    def state(self) -> ProcessState:
        return self._state

    @property
    def history(self) -> list[ProcessTransition]:
        return list(self._history)

    def can_transition(self, target: ProcessState) -> bool:
        return target in VALID_TRANSITIONS[self._state]

    def add_listener(self, listener: TransitionListener) -> None:
        self._listeners.append(listener)

    def transition(
        self, target: ProcessState, *, reason: str = "", metadata: dict[str, Any] | None = None
    ) -> ProcessTransition:
        """Move to ``target`` (StateError if the current state does not allow it), record the
        transition and tell the listeners. Returns the transition, which may also be awaited:
        ``await lifecycle.transition(...)``, as written for the reference, works the same."""
        if target not in VALID_TRANSITIONS[self._state]:
            raise StateError(self._state, target)
        record = ProcessTransition(self._state, target, time.time(), reason, dict(metadata or {}))
        self._state = target
        self._history.append(record)
        if len(self._history) > self.HISTORY_LIMIT:
            del self._history[: len(self._history) - self.HISTORY_LIMIT]
        for listener in list(self._listeners):
            try:
                listener(record)
            except Exception:  # a listener must never undo or block a transition
                log.exception("lifecycle listener failed")
        return record

    def __repr__(self) -> str:
        return f"ProcessLifecycle(state={self._state.value!r}, transitions={len(self._history)})"


# -- where a start failed ------------------------------------------------------------------------
#: The note a startup error carries to name the config field it comes from.
FIELD_NOTE = "in the config field "


@contextlib.contextmanager
def config_field(name: str) -> Iterator[None]:
    """Name the config (manifest) field, e.g. ``tools[0]`` or ``servers.ledger``, that an error
    raised inside comes from, as a note on the error (shown with its traceback; read back with
    :func:`field_of`). The innermost name wins, so names are full paths."""
    try:
        yield
    except Exception as exc:
        name_field(exc, name)
        raise


def name_field(exc: BaseException, name: str) -> None:
    """Note on ``exc`` the config field it comes from, unless a closer one is noted already."""
    if field_of(exc) is None:
        exc.add_note(FIELD_NOTE + name)


def field_of(exc: BaseException) -> str | None:
    """The config field :func:`config_field` named for ``exc``, if any."""
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, str) and note.startswith(FIELD_NOTE):
            return note[len(FIELD_NOTE):]
    return None


def one_line(exc: BaseException) -> str:
    """What went wrong, on one line: the message, with the error's type when the message alone
    may not say it (a bare ``KeyError('x')``, an empty message); the runtime's own errors and
    ValueError, RuntimeError and OSError speak for themselves."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in text:
        text = f"{text}: {exc.filename}"
    text = " ".join(text.split())
    if not text:
        return type(exc).__name__
    ours = type(exc).__module__.startswith("runtime_core.")
    if ours or type(exc) in (ValueError, RuntimeError) or isinstance(exc, OSError):
        return text
    return f"{type(exc).__name__}: {text}"
