"""The hosts' inject (the HTTP API, the CLI through it, the control room): an operator's event is
taken as a webhook's is, and with an idempotency key it is taken once.

Taken as a webhook's (``AgentProcess.accept_pushed``): made durable before it is acknowledged,
and refused *without a trace* while the process cannot take it, so the client keeps its event
and is told why: 409 ``NOT_RUNNING`` (stopped, failed), 503 with Retry-After ``NOT_ACCEPTING``
(stopping, draining, shutting down for a restart), ``QUEUE_FULL`` or ``JOURNAL_UNAVAILABLE``.
``AgentProcess.inject``, the spec's call for code, still dead-letters what it refuses (it returns
False and the event waits in the dead letters); a host does not, because its client retries: a
refused inject kept as a dead letter, then the client's retry, then "redeliver all", ran twice.

An idempotency key (``Idempotency-Key`` on the API, ``--idempotency-key`` on the CLI) makes a
retry after a timeout safe: the event is given the delivery key ``inject:<key>``, which the
process's journal keeps in its delivery index with the event (a week), so a repeat of the key
for the same process returns the first event's id and queues nothing, across restarts. A repeat
while the first is still being taken waits for its answer. Without a journal the key is
remembered here, in memory, for a day.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from runtime_core.control.plane import ControlError, Injected
from runtime_core.lifecycle import ProcessState
from runtime_core.triggers.base import DELIVERY_KEY, AcceptResult, TriggerEvent
from runtime_core.triggers.webhook.deliveries import DeliveryLedger

if TYPE_CHECKING:
    from runtime_core.process.process import AgentProcess

__all__ = ["KEY_PREFIX", "HostInject", "check_idempotency_key"]

KEY_PREFIX = "inject:"  # the namespace of inject keys in the journal's delivery index
KEEP_SECONDS = 24 * 3600.0  # in memory; the journal's delivery index keeps them a week
MAX_KEY_LENGTH = 255
_KEY = re.compile(rf"[\x21\x23-\x7e]{{1,{MAX_KEY_LENGTH}}}")  # printable ASCII: no " or space
_TRANSIENT = (ProcessState.STARTING, ProcessState.RUNNING, ProcessState.SUSPENDED,
              ProcessState.STOPPING)


def check_idempotency_key(key: str) -> str:
    """``key`` as it is kept: 1 to 255 printable ASCII characters without spaces (a quoted
    key, as the IETF draft writes it, loses its quotes). ControlError INVALID_REQUEST else."""
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1]
    if not _KEY.fullmatch(key):
        raise ControlError(
            f"the idempotency key must be 1 to {MAX_KEY_LENGTH} printable ASCII characters "
            "without spaces or quotes (e.g. a UUID); send a new one per event and the same "
            "one when you retry", "INVALID_REQUEST")
    return key


class HostInject:
    """The inject of one control plane: the refusals it answers, the keys it remembers."""

    def __init__(self) -> None:
        self._keys: dict[str, DeliveryLedger] = {}  # per process name

    async def inject(self, process: AgentProcess, payload: dict[str, Any], trigger_type: str,
                     idempotency_key: str | None) -> Injected:
        """Take the event (ControlError when ``process`` refuses it; nothing is kept then)."""
        event = TriggerEvent("operator", trigger_type, payload)
        if idempotency_key is None:
            return Injected(await self._take(process, event))
        key = KEY_PREFIX + check_idempotency_key(idempotency_key)
        event.metadata[DELIVERY_KEY] = key
        ledger = self._keys.setdefault(process.name,
                                       DeliveryLedger(keep_seconds=KEEP_SECONDS))
        first = await ledger.claim(key)
        if first is not None:
            return Injected(first, replayed=True)
        taken_as: str | None = None
        try:
            result, found = await self._accept(process, event)
            taken_as = found if result is AcceptResult.DUPLICATE else event.event_id
            return Injected(taken_as, replayed=result is AcceptResult.DUPLICATE)
        finally:
            ledger.settle(key, taken_as)

    async def _take(self, process: AgentProcess, event: TriggerEvent) -> str:
        result, found = await self._accept(process, event)
        return found if result is AcceptResult.DUPLICATE else event.event_id

    async def _accept(self, process: AgentProcess, event: TriggerEvent
                      ) -> tuple[AcceptResult, str]:
        """ACCEPTED, or DUPLICATE with the first event's id (its key found in the journal's
        delivery index); any refusal is raised as the ControlError the client is answered."""
        try:
            result, reason = await process.accept_pushed(event)
        except Exception as exc:  # lose nothing: the client keeps its event and is told
            raise ControlError(f"{process.name} did not accept the event: {exc}; nothing was "
                               "kept: try again") from None
        if result in (AcceptResult.ACCEPTED, AcceptResult.DUPLICATE):
            return result, reason
        raise refusal(process, result, reason)


def refusal(process: AgentProcess, result: AcceptResult, reason: str) -> ControlError:
    """The answer to an inject ``process`` refused, saying why and what to do (nothing was
    kept: the client still has the event)."""
    name = process.name
    status = process.status_snapshot()
    if result is AcceptResult.QUEUE_FULL:
        return ControlError(f"{name}'s queue is full ({status.queue_size}/"
                            f"{status.queue_capacity}); nothing was accepted: try again after "
                            "Retry-After", "QUEUE_FULL")
    if status.journal_fault or reason == "journal unavailable":
        return ControlError(f"{name} cannot journal events now ({reason}); nothing was "
                            "accepted: try again after Retry-After", "JOURNAL_UNAVAILABLE")
    state = process.state
    if state in _TRANSIENT:  # stopping, draining, shutting down for a restart
        draining = status.draining
        why = (f"draining: {draining['runs_left']} run(s) finishing first" if draining
               else "stopping" if state is ProcessState.STOPPING
               else "stopping for a restart of its host")
        return ControlError(f"{name} is {why}; nothing was accepted: try again after "
                            "Retry-After", "NOT_ACCEPTING")
    return ControlError(f"{name} is {state.value} ({reason}); nothing was accepted: start it "
                        f"first (promptui start {name})", "NOT_RUNNING")
