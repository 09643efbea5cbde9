"""What a custom trigger type's factory returns, fitted to the process's two ways of listening:
pulled (``wait_for_next``, or an async iterator) or pushed (``start(accept)``). Each event it
hands over is checked to be a TriggerEvent, so a mistake in a plugin is an error the process
logs (and backs off from), never a crash in the journal or the queue."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from typing import Any

from runtime_core.triggers.base import AcceptFn, AcceptResult, TriggerEvent

_SHAPES = ("async start(), async stop() and async wait_for_next() -> TriggerEvent (the "
           "reference's BaseTrigger); or async start()/stop() and async iteration over "
           "TriggerEvents; or async start(accept) and async stop() (a push trigger)")


def _event(item: object, kind: str, trigger_id: str) -> TriggerEvent:
    if not isinstance(item, TriggerEvent):
        raise TypeError(f"custom trigger {kind!r} handed over a {type(item).__name__}, not a "
                        "TriggerEvent")
    if not item.trigger_type:
        item.trigger_type = kind
    if not item.trigger_id:
        item.trigger_id = trigger_id
    return item


def _takes_an_argument(function: Any) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
               for p in parameters)


class _CustomTrigger:
    def __init__(self, inner: Any, kind: str, trigger_id: str) -> None:
        self.inner = inner
        self.trigger_type = kind
        own = getattr(inner, "trigger_id", None)
        self.trigger_id = own if isinstance(own, str) and own else trigger_id

    async def stop(self) -> None:
        await self.inner.stop()

    def status(self) -> dict[str, Any]:
        status = getattr(self.inner, "status", None)
        own = status() if callable(status) else {}
        return {"custom": True, **(own if isinstance(own, dict) else {})}

    def __repr__(self) -> str:
        return f"<custom trigger {self.trigger_type!r} {self.inner!r}>"


class CustomPullTrigger(_CustomTrigger):
    """A pull trigger, or an async iterator of events, as the process's listener pulls it."""

    def __init__(self, inner: Any, kind: str, trigger_id: str) -> None:
        super().__init__(inner, kind, trigger_id)
        self._iterator: AsyncIterator[Any] | None = None

    async def start(self) -> None:
        await self.inner.start()
        if not callable(getattr(self.inner, "wait_for_next", None)):
            self._iterator = aiter(self.inner)

    async def wait_for_next(self) -> TriggerEvent:
        if self._iterator is None:
            item = await self.inner.wait_for_next()
        else:
            try:
                item = await anext(self._iterator)
            except StopAsyncIteration:
                await asyncio.Event().wait()  # a finished source: no more events until stop
                raise  # not reached
        return _event(item, self.trigger_type, self.trigger_id)

    def pending(self) -> list[TriggerEvent]:
        """Events it still holds at stop (dead-lettered or re-queued like the built-ins')."""
        pending = getattr(self.inner, "pending", None)
        items = pending() if callable(pending) else []
        return [_event(item, self.trigger_type, self.trigger_id) for item in items
                if isinstance(item, TriggerEvent)]


class CustomPushTrigger(_CustomTrigger):
    """A push trigger: it calls ``accept(event)`` and tells its source from the answer."""

    async def start(self, accept: AcceptFn) -> None:
        kind, trigger_id = self.trigger_type, self.trigger_id

        async def checked(event: TriggerEvent) -> tuple[AcceptResult, str]:
            return await accept(_event(event, kind, trigger_id))

        await self.inner.start(checked)


def adapt_custom_trigger(made: Any, kind: str, trigger_id: str) -> Any:
    """``made`` (a factory's result) as a trigger the process can listen to; TypeError naming
    the shapes a trigger may have when it has none of them."""
    if not all(callable(getattr(made, name, None)) for name in ("start", "stop")):
        raise TypeError(f"the factory of trigger type {kind!r} returned "
                        f"{type(made).__name__}, which is not a trigger: it needs {_SHAPES}")
    if callable(getattr(made, "wait_for_next", None)) or hasattr(made, "__aiter__"):
        return CustomPullTrigger(made, kind, trigger_id)
    if _takes_an_argument(made.start):
        return CustomPushTrigger(made, kind, trigger_id)
    raise TypeError(f"the factory of trigger type {kind!r} returned {type(made).__name__}, "
                    f"which has start() and stop() but no events: it needs {_SHAPES}")
