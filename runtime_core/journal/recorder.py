"""What one process writes to its journal, at its journal level.

Ordering rules (spec: run lifecycle): model usage is submitted before the history it produced; a
tool's intent is durable before the tool runs, and its result (with the context updates it made)
is one entry. Other entries are submitted without waiting: the journal commits them in
order, so a later durable entry (an acknowledgement, an intent) covers them too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime_core.agent.attachments import without_bytes
from runtime_core.agent.model import ModelTurn, ToolCall
from runtime_core.context import Message
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.provider import JournalProvider
from runtime_core.triggers.base import TriggerEvent

RESULT_LIMIT = 2000
REPLY_LIMIT = 2000


class ProcessRecorder:
    def __init__(self, journal: JournalProvider, process: str, process_id: str, level: str
                 ) -> None:
        self.journal = journal
        self.process = process
        self.process_id = process_id
        self.full = level == "full"

    #: Set by a process with scoped secrets: every entry is redacted before it is written.
    redact: Callable[[Any], Any] | None = None
    #: Set by a shutdown for a service restart: nothing more is written, so the journal reads
    #: as a crash at a safe point and the next start takes back what was pending.
    sealed: bool = False

    def _entry(self, entry_type: str, data: dict[str, Any], run_id: str | None = None
               ) -> JournalEntry:
        if self.redact is not None:
            data = self.redact(data)
        return JournalEntry(self.process, entry_type, data, process_id=self.process_id,
                            run_id=run_id)

    def submit(self, entry_type: str, data: dict[str, Any], *, run_id: str | None = None,
               attachment: Any = None) -> JournalEntry:
        entry = self._entry(entry_type, data, run_id)
        if self.sealed:
            return entry
        if self.redact is not None and attachment is not None:
            attachment = self.redact(attachment)
        self.journal.submit(entry, attachment=attachment)
        return entry

    async def append(self, entry_type: str, data: dict[str, Any], *, run_id: str | None = None,
                     attachment: Any = None) -> JournalEntry:
        if self.sealed:
            return self._entry(entry_type, data, run_id)
        if self.redact is not None and attachment is not None:
            attachment = self.redact(attachment)
        return await self.journal.append(self._entry(entry_type, data, run_id),
                                         attachment=attachment)

    # -- process-level --------------------------------------------------------------------------
    def transition(self, from_state: str, to_state: str, reason: str) -> None:
        self.submit(EntryType.STATE_TRANSITION,
                    {"from_state": from_state, "to_state": to_state, "reason": reason})

    def secret_access(self, name: str) -> None:
        self.submit(EntryType.SECRET_ACCESS, {"name": name})

    async def event_accepted(self, event: TriggerEvent) -> None:
        """Durable before the event is acknowledged: an accepted event is never lost."""
        data: dict[str, Any] = {"event_id": event.event_id, "trigger_id": event.trigger_id,
                                "trigger_type": event.trigger_type}
        if self.full:
            data["payload"] = event.payload
        await self.append(EntryType.EVENT_ACCEPTED, data, attachment=event.to_dict())

    def dead_lettered(self, event: TriggerEvent, reason: str, error: str, attempts: int
                      ) -> None:
        """Kept in the journal until redelivered or cleared, however many there are (the
        process's own list keeps only the newest ``dead_letter_size``)."""
        self.submit(EntryType.DEAD_LETTERED,
                    {"event_id": event.event_id, "trigger_type": event.trigger_type,
                     "reason": reason, "error": error[:1000], "attempts": attempts},
                    attachment=event.to_dict())

    def redelivered(self, event_ids: list[str]) -> None:
        self.submit(EntryType.REDELIVERED, {"event_ids": event_ids})

    def dead_letters_cleared(self, event_ids: list[str] | None) -> None:
        self.submit(EntryType.DEAD_LETTERS_CLEARED, {"event_ids": event_ids})

    def context_update(self, key: str, value: Any, source: str) -> None:
        self.submit(EntryType.CONTEXT_UPDATE, {"key": key, "value": value, "source": source})

    def restart(self, reason: str, attempt: int | None) -> None:
        self.submit(EntryType.RESTART, {"reason": reason, "attempt": attempt})

    def restart_exhausted(self, reason: str, restarts: int) -> None:
        self.submit(EntryType.RESTART_EXHAUSTED, {"reason": reason, "restarts": restarts})

    def checkpoint(self, state: dict[str, Any]) -> JournalEntry:
        return self.submit(EntryType.CHECKPOINT, state)

    # -- runs (the RunRecorder protocol of runtime_core.runs) -------------------------------------
    def run_started(self, run_id: str, event_id: str, attempt: int,
                    identity: dict[str, Any] | None = None) -> None:
        data: dict[str, Any] = {"event_id": event_id, "attempt": attempt}
        if identity is not None:
            data["identity"] = identity
        self.submit(EntryType.RUN_STARTED, data, run_id=run_id)

    def model_turn(self, run_id: str, step: int, turn_index: int, turn: ModelTurn,
                   prompt: list[Message] | None = None) -> None:
        data: dict[str, Any] = {
            "step": step,
            "turn": turn_index,
            "input_tokens": turn.usage.input_tokens,
            "output_tokens": turn.usage.output_tokens,
            "tool_calls": [{"name": c.name, "args": c.args, "call_id": c.call_id}
                           for c in turn.tool_calls],
        }
        if self.full or turn.tool_calls:
            data["reply"] = (turn.reply or "")[:REPLY_LIMIT]
        if self.full and prompt is not None:  # the audit level keeps what the model was shown
            data["prompt"] = [{**without_bytes(m),
                               "content": str(m.get("content", ""))[:REPLY_LIMIT]}
                              for m in prompt]
        self.submit(EntryType.MODEL_USAGE, data, run_id=run_id)

    async def tool_intent(self, run_id: str, step: int, call: ToolCall, effect: str,
                          info: dict[str, Any] | None = None) -> None:
        """Durable before any tool runs, read or write (spec: "a tool intent is persisted before
        its adapter executes"). The journal commits in order, so the run's start and the model
        usage before it are durable with it: a crash inside the adapter resumes this run."""
        data = {"step": step, "tool": call.name, "call_id": call.call_id, "effect": effect,
                "args": call.args, "idempotency_key": f"{run_id}:{step}", **(info or {})}
        await self.append(EntryType.TOOL_INTENT, data, run_id=run_id)

    async def tool_result(self, run_id: str, step: int, call: ToolCall, effect: str,
                          result: str, ok: bool, updates: dict[str, Any],
                          artifacts: list[dict[str, Any]] | None = None, *,
                          attachments: list[dict[str, Any]] | None = None) -> None:
        """``attachments``: the binary content the tool returned, in its journal form (the
        bytes only of small content; digest and size always)."""
        data: dict[str, Any] = {"step": step, "tool": call.name, "call_id": call.call_id,
                                "ok": ok, "result": result[:RESULT_LIMIT], "updates": updates}
        if artifacts:
            data["artifacts"] = artifacts
        if attachments:
            data["attachments"] = attachments
        if effect == "write":
            await self.append(EntryType.TOOL_RESULT, data, run_id=run_id)
        else:
            self.submit(EntryType.TOOL_RESULT, data, run_id=run_id)

    def tool_refused(self, run_id: str, step: int, call: ToolCall, message: str) -> None:
        self.submit(EntryType.TOOL_REFUSED, {"step": step, "tool": call.name,
                                             "call_id": call.call_id, "result": message},
                    run_id=run_id)

    def tool_interrupted(self, run_id: str, step: int, call_id: str, tool: str) -> None:
        self.submit(EntryType.TOOL_INTERRUPTED,
                    {"step": step, "call_id": call_id, "tool": tool}, run_id=run_id)

    async def run_waiting(self, run_id: str, step: int, tool: str, reason: str,
                          **extra: Any) -> None:
        await self.append(EntryType.RUN_WAITING,
                          {"step": step, "tool": tool, "reason": reason, **extra}, run_id=run_id)

    async def evidence(self, run_id: str, data: dict[str, Any]) -> None:
        """An operator's decision on a run waiting for completion evidence (durable)."""
        await self.append(EntryType.EVIDENCE, data, run_id=run_id)

    async def reconciled(self, run_id: str, data: dict[str, Any]) -> None:
        await self.append(EntryType.RECONCILED, data, run_id=run_id)

    def sampling_turn(self, run_id: str, step: int, turn_index: int, turn: ModelTurn,
                      server: str, tool: str, prompt: list[Message]) -> None:
        """A model turn an MCP server asked for during tool call ``step`` (sampling): a model
        turn like the run's own, marked so replay counts it without making it history."""
        data: dict[str, Any] = {
            "step": step, "turn": turn_index, "input_tokens": turn.usage.input_tokens,
            "output_tokens": turn.usage.output_tokens, "tool_calls": [],
            "sampling": {"server": server, "tool": tool},
            "reply": (turn.reply or "")[:REPLY_LIMIT]}
        if self.full:
            data["prompt"] = [{"role": m.get("role"),
                               "content": str(m.get("content", ""))[:REPLY_LIMIT]}
                              for m in prompt]
        self.submit(EntryType.MODEL_USAGE, data, run_id=run_id)

    async def elicitation_asked(self, run_id: str, data: dict[str, Any]) -> None:
        """An MCP server's question for the operator; the run waits for the answer."""
        await self.append(EntryType.ELICITATION_ASKED, data, run_id=run_id)

    async def elicitation_answered(self, run_id: str, data: dict[str, Any]) -> None:
        """The answer sent back to the server (durable before it is sent)."""
        await self.append(EntryType.ELICITATION_ANSWERED, data, run_id=run_id)

    def run_finished(self, run_id: str, event_id: str, state: str, reason: str, error: str,
                     reply: str, event_done: bool, messages: list[Message]) -> None:
        self.submit(EntryType.RUN_FINISHED, {
            "event_id": event_id, "state": state, "reason": reason, "error": error[:1000],
            "reply": reply[:REPLY_LIMIT], "event_done": event_done, "messages": messages,
        }, run_id=run_id)
