"""What one process writes to its journal, at its journal level.

Which entries wait for their commit (``append``) and why; everything else is submitted without
waiting and rides in the next group commit, in order, so whatever waits makes every earlier
entry durable with it:

* ``event_accepted``: before the event is acknowledged (a webhook's 202, ``inject()``'s return);
* ``tool_intent`` (read or write): before the tool's adapter runs;
* ``run_waiting``, ``evidence``, ``reconciled``, the elicitation question and answer: before
  the run goes on, or an operator or a server is answered;
* a write's ``tool_result``: before anything outside hears of the write (a post_tool hook, a
  message the tool sent, the next tool's pre_tool hook): submitted without waiting, so the
  next model turn overlaps its commit, and the run's next intent or its end, which wait, make
  it durable with them. A crash before that commit leaves the write open, as a crash inside
  the tool does: the run waits with ``unknown_write_outcome``, never re-run;
* ``run_finished``: before the run's outcome is reported to anyone outside (the caller awaits the
  future ``run_finished`` returns before it announces the run's end).

Submitted without waiting: transitions, context updates, a read's result, dead letters (nobody
waits, but a dead letter is reported only once its entry's future says it is durable),
checkpoints. A crash loses only entries that nothing outside has seen.

A model turn's usage is held until the run writes its next entry (schema 7 on): a tool intent
or the run's end carries the turns before it in ``data["usage"]`` (``left_out.turns_of`` reads
them back as the ``model_usage`` entries they stand for), and any other entry of the run has
them written as their own ``model_usage`` entries first. Either way they are durable before the
history they produced, in the same commit as the intent that acts on them.

A run's start is held, not written, until the run writes something that must wait: a tool intent
(or any other entry of the run but model usage) writes the start and the usage held so far, and
a run that ends without one folds its start and its model usage into its ``run_finished``
(``data["started"]``, with ``usage``: the model turns' entries, in order). A run that crashes
before either left nothing in the journal but its accepted event, which recovery runs again.
The profile a run executes (policy, budget, evaluator...) is written once per configuration as a
``profile`` entry; a run's identity names it by ``config_digest`` and keeps only its goal
(a folded start keeps not even that: the goal is the run's first message). At the ``full``
(audit) level nothing is held or folded: every start and model turn is its own entry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runtime_core.agent.attachments import without_bytes
from runtime_core.agent.model import ModelTurn, ToolCall
from runtime_core.context import Message
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.left_out import (
    STARTED,
    USAGE,
    carry_turns,
    event_done_kept,
    leave_action_out,
    leave_goal_out,
)
from runtime_core.journal.provider import JournalError, JournalProvider
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
        self._held: dict[str, _HeldStart] = {}  # run id -> its start and usage, not yet written
        self._turns: dict[str, list[dict[str, Any]]] = {}  # run id -> usage since its last entry
        self._goals: dict[str, str] = {}  # run id -> the goal its written run_started keeps
        self._profiles: set[str] = set()  # config digests whose profile entry is written
        self.runs_since_checkpoint = 0
        self.entries_since_checkpoint = 0

    #: Set by a process with scoped secrets: every entry is redacted before it is written.
    redact: Callable[[Any], Any] | None = None
    #: Set by a process whose model has a price: (input tokens, output tokens) -> the cost
    #: each model call's entry records.
    price: Callable[[int, int], float] | None = None
    #: Set by a shutdown for a service restart: nothing more is written, so the journal reads
    #: as a crash at a safe point and the next start takes back what was pending. A durable
    #: append (a tool's intent) then fails: a run still going must not act on a step that is
    #: not in the journal (the next start would run that event again).
    sealed: bool = False

    def _entry(self, entry_type: str, data: dict[str, Any], run_id: str | None = None
               ) -> JournalEntry:
        if self.redact is not None:
            data = self.redact(data)
        return JournalEntry(self.process, entry_type, data, process_id=self.process_id,
                            run_id=run_id)

    def submit(self, entry_type: str, data: dict[str, Any], *, run_id: str | None = None,
               attachment: Any = None) -> JournalEntry:
        if run_id is not None:
            self._write_before(run_id)
        return self._submit(entry_type, data, run_id=run_id, attachment=attachment)

    def _write_before(self, run_id: str) -> None:
        """What an entry of ``run_id`` that carries no model turns follows: the run's held
        start, then its held model turns, each as its own entry."""
        if run_id in self._held:
            self._write_start(run_id)
        for usage in self._turns.pop(run_id, ()):
            self._submit(EntryType.MODEL_USAGE, usage, run_id=run_id)

    def _turns_before(self, run_id: str) -> list[dict[str, Any]]:
        """The run's held start written, and the model turns an entry of it carries."""
        if run_id in self._held:
            self._write_start(run_id)
        return self._turns.pop(run_id, [])

    def _submit(self, entry_type: str, data: dict[str, Any], *, run_id: str | None = None,
                attachment: Any = None) -> JournalEntry:
        entry = self._entry(entry_type, data, run_id)
        self._send(entry, attachment)
        return entry

    def _send(self, entry: JournalEntry, attachment: Any) -> asyncio.Future[None] | None:
        """Submit ``entry``; the future that resolves once it is durable (None: sealed)."""
        if self.sealed:
            return None
        durable = self.journal.submit(entry, attachment=self._attached(attachment))
        self.entries_since_checkpoint += 1
        return durable

    async def append(self, entry_type: str, data: dict[str, Any], *, run_id: str | None = None,
                     attachment: Any = None) -> JournalEntry:
        if run_id is not None:
            self._write_before(run_id)
        self._refuse_sealed(entry_type)
        return await self.journal.append(self._entry(entry_type, data, run_id),
                                         attachment=self._attached(attachment))

    def _refuse_sealed(self, entry_type: str) -> None:
        """An entry that must be durable is refused once the journal is sealed (shut down)."""
        if self.sealed:
            raise JournalError(f"the journal of {self.process!r} is sealed (shut down): "
                               f"the {entry_type} entry is not written")

    def _attached(self, attachment: Any) -> Any:
        return self.redact(attachment) if self.redact is not None and attachment is not None \
            else attachment

    # -- process-level --------------------------------------------------------------------------
    def transition(self, from_state: str, to_state: str, reason: str) -> None:
        self.submit(EntryType.STATE_TRANSITION,
                    {"from_state": from_state, "to_state": to_state, "reason": reason})

    def secret_access(self, name: str) -> None:
        self.submit(EntryType.SECRET_ACCESS, {"name": name})

    async def event_accepted(self, event: TriggerEvent) -> None:
        """Durable before the event is acknowledged: an accepted event is never lost."""
        await self.accepting(event)

    def accepting(self, event: TriggerEvent) -> asyncio.Future[None]:
        """Submit the event's acceptance and return the future that resolves once it is
        durable: the event is acknowledged only after it. Sealed: JournalError, nothing
        submitted."""
        data: dict[str, Any] = {"event_id": event.event_id, "trigger_id": event.trigger_id,
                                "trigger_type": event.trigger_type}
        if self.full:
            data["payload"] = event.payload
        self._refuse_sealed(EntryType.EVENT_ACCEPTED)
        return self.journal.submit(self._entry(EntryType.EVENT_ACCEPTED, data, None),
                                   attachment=self._attached(event.to_dict()))

    def dead_lettered(self, event: TriggerEvent, reason: str, error: str, attempts: int
                      ) -> asyncio.Future[None] | None:
        """Kept in the journal until redelivered or cleared, however many there are (the
        process's own list keeps only the newest ``dead_letter_size``). Returns the future that
        resolves once the entry is durable, or fails if it never will be (None: sealed, not
        written): a dead letter is reported only once it is durable (delivery/dead_letters.py)."""
        entry = self._entry(EntryType.DEAD_LETTERED,
                            {"event_id": event.event_id, "trigger_type": event.trigger_type,
                             "reason": reason, "error": error[:1000], "attempts": attempts})
        return self._send(entry, event.to_dict())

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
        entry = self.submit(EntryType.CHECKPOINT, state)
        self.runs_since_checkpoint = self.entries_since_checkpoint = 0
        return entry

    # -- runs (the RunRecorder protocol of runtime_core.runs) -------------------------------------
    def run_started(self, run_id: str, event_id: str, attempt: int,
                    identity: dict[str, Any] | None = None, *, trace_id: str = "",
                    span_id: str = "") -> None:
        """Held until the run writes an entry that must wait, or folded into its end.
        ``trace_id``, ``span_id``: the OpenTelemetry trace of the run and its span, when it is
        traced (a run resumed after a restart goes on under that span)."""
        data: dict[str, Any] = {"event_id": event_id}
        if attempt != 1:  # the first is left out (schema 7 on): a reader's default
            data["attempt"] = attempt
        if identity is not None:
            data["identity"] = identity
        if trace_id:
            data["trace_id"] = trace_id
        if span_id:
            data["span_id"] = span_id
        self._held[run_id] = _HeldStart(data)
        if self.full:  # the audit level keeps every step as its own entry, in its own time
            self._write_start(run_id)

    def _profile_of(self, identity: dict[str, Any]) -> dict[str, Any]:
        """``identity`` as a run's entry keeps it: the profile entry written once for its
        configuration, and the run's own part (its goal) here."""
        digest = str(identity.get("config_digest") or "")
        if not digest:
            return identity
        if digest not in self._profiles:
            self._profiles.add(digest)
            self._submit(EntryType.PROFILE, {k: v for k, v in identity.items() if k != "goal"})
        return {"config_digest": digest, "goal": identity.get("goal", "")}

    def _start_data(self, run_id: str, held: _HeldStart) -> dict[str, Any]:
        """The data a run's start is written with: its identity as ``_profile_of`` keeps it
        (the profile entry submitted first, once per configuration), its goal remembered for
        its end (``_rebuilt_from_start``)."""
        data = dict(held.start)
        if isinstance(data.get("identity"), dict):
            data["identity"] = self._profile_of(data["identity"])
            goal = data["identity"].get("goal")
            if isinstance(goal, str):
                self._goals[run_id] = goal
        return data

    def _write_start(self, run_id: str) -> None:
        held = self._held.pop(run_id)
        entry = self._entry(EntryType.RUN_STARTED, self._start_data(run_id, held), run_id)
        # A standard goal is left out, rendered again on read (schema 6 on; after redaction,
        # so what is rendered is what would have been kept).
        entry.data = leave_goal_out(entry.data, entry.timestamp, run_id)
        self._send(entry, None)
        if self.full:
            for usage in held.usage:
                self._submit(EntryType.MODEL_USAGE, usage, run_id=run_id)
        elif held.usage:  # carried by the entry that wrote the start, or written before it
            self._turns[run_id] = held.usage

    def _usage(self, run_id: str, data: dict[str, Any]) -> None:
        held = self._held.get(run_id)
        if held is not None:
            held.usage.append(data)
        elif self.full:  # the audit level: every model turn its own entry, in its own time
            self._submit(EntryType.MODEL_USAGE, data, run_id=run_id)
        else:
            self._turns.setdefault(run_id, []).append(data)

    def model_turn(self, run_id: str, step: int, turn_index: int, turn: ModelTurn,
                   prompt: list[Message] | None = None) -> None:
        # Zero counts and no tool calls are left out (schema 5 on: a reader's default).
        data: dict[str, Any] = {"step": step, "turn": turn_index}
        if turn.usage.input_tokens:
            data["input_tokens"] = turn.usage.input_tokens
        if turn.usage.output_tokens:
            data["output_tokens"] = turn.usage.output_tokens
        if turn.tool_calls:
            data["tool_calls"] = [{"name": c.name, "args": c.args, "call_id": c.call_id}
                                  for c in turn.tool_calls]
        if self.price is not None:
            data["cost"] = round(self.price(turn.usage.input_tokens,
                                            turn.usage.output_tokens), 8)
        if self.full or (turn.tool_calls and turn.reply):
            data["reply"] = (turn.reply or "")[:REPLY_LIMIT]
        if self.full and prompt is not None:  # the audit level keeps what the model was shown
            data["prompt"] = [{**without_bytes(m),
                               "content": str(m.get("content", ""))[:REPLY_LIMIT]}
                              for m in prompt]
        self._usage(run_id, data)

    async def tool_intent(self, run_id: str, step: int, call: ToolCall, effect: str,
                          info: dict[str, Any] | None = None) -> None:
        """Durable before any tool runs, read or write (spec: "a tool intent is persisted before
        its adapter executes"). The journal commits in order, so the run's start and the model
        usage before it are durable with it: a crash inside the adapter resumes this run."""
        # Its idempotency key, run_id:step, is left out (schema 6 on: left_out.intent_key);
        # the model turns before it ride in it (schema 7 on: left_out.carry_turns).
        data = {"step": step, "tool": call.name, "call_id": call.call_id, "effect": effect,
                "args": call.args, **(info or {})}
        held = None if self.full or STARTED in data else self._held.get(run_id)
        if held is not None:
            carried = carry_turns(held.usage, data)
            if carried is not None or not held.usage:
                await self._intent_with_start(run_id, held, data, carried)
                return
        turns = self._turns_before(run_id)
        carried = carry_turns(turns, data)
        if carried is not None:
            data[USAGE] = carried
        else:  # none, or not carried exactly: their own entries, as before schema 7
            for usage in turns:
                self._submit(EntryType.MODEL_USAGE, usage, run_id=run_id)
        await self.append(EntryType.TOOL_INTENT, data, run_id=run_id)

    async def _intent_with_start(self, run_id: str, held: _HeldStart, data: dict[str, Any],
                                 carried: list[dict[str, Any]] | None) -> None:
        """The run's first intent, its start folded in (SQLite schema 9, PostgreSQL schema 8:
        ``left_out.STARTED``; a read gives the start back as the ``run_started`` entry it
        stands for): one row where there were two, the start's goal left out as a written
        start's is, by the intent's time. Only when the intent carries the model turns before
        it exactly, so that the start still comes before them."""
        self._refuse_sealed(EntryType.TOOL_INTENT)
        del self._held[run_id]
        if carried is not None:
            data[USAGE] = carried
        start = self._start_data(run_id, held)
        entry = self._entry(EntryType.TOOL_INTENT, data, run_id)
        if self.redact is not None:
            start = self.redact(start)
        entry.data[STARTED] = leave_goal_out(start, entry.timestamp, run_id)
        await self.journal.append(entry)

    def tool_result(self, run_id: str, step: int, call: ToolCall, effect: str,
                    result: str, ok: bool, updates: dict[str, Any],
                    artifacts: list[dict[str, Any]] | None = None, *,
                    attachments: list[dict[str, Any]] | None = None
                    ) -> asyncio.Future[None] | None:
        """Submit a tool's result without waiting. A write's returns the future that resolves
        once it is durable: the caller awaits it before anyone outside hears of the write (a
        hook, a message the tool sent); what the run writes next that waits (its next intent,
        its end) makes it durable with it. A read's returns None. ``attachments``: the binary
        content the tool returned, in its journal form (the bytes only of small content;
        digest and size always)."""
        data: dict[str, Any] = {"step": step, "tool": call.name, "call_id": call.call_id,
                                "ok": ok, "result": result[:RESULT_LIMIT]}
        if updates:  # none: left out (schema 5 on), a reader's default
            data["updates"] = updates
        if artifacts:
            # the automatic action artifact repeats the intent: left out (schema 6 on)
            data["artifacts"] = leave_action_out(artifacts, run_id, step, call.name, call.args)
        if attachments:
            data["attachments"] = attachments
        if effect != "write":
            self.submit(EntryType.TOOL_RESULT, data, run_id=run_id)
            return None
        # as a durable append: the run must not go on from an unwritten write
        self._refuse_sealed(EntryType.TOOL_RESULT)
        self._write_before(run_id)  # a sampling turn during the call: its own entry
        return self._send(self._entry(EntryType.TOOL_RESULT, data, run_id), None)

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
        self._usage(run_id, data)

    async def elicitation_asked(self, run_id: str, data: dict[str, Any]) -> None:
        """An MCP server's question for the operator; the run waits for the answer."""
        await self.append(EntryType.ELICITATION_ASKED, data, run_id=run_id)

    async def elicitation_answered(self, run_id: str, data: dict[str, Any]) -> None:
        """The answer sent back to the server (durable before it is sent)."""
        await self.append(EntryType.ELICITATION_ANSWERED, data, run_id=run_id)

    def run_finished(self, run_id: str, event_id: str, state: str, reason: str, error: str,
                     reply: str, event_done: bool, messages: list[Message]
                     ) -> asyncio.Future[None] | None:
        """Submit the run's end (its start folded in when it was never written) and return the
        future that resolves once it is durable: await it before telling anyone the outcome.
        Empty reason, error and reply are left out (a reader's default)."""
        data: dict[str, Any] = {"event_id": event_id, "state": state}
        for key, value in (("reason", reason), ("error", error[:1000]),
                           ("reply", reply[:REPLY_LIMIT])):
            if value:
                data[key] = value
        if event_done_kept(state, event_done):
            data["event_done"] = event_done
        goal = self._goals.pop(run_id, None)
        if not _rebuilt_from_start(messages, goal, data.get("reply", "")):
            data["messages"] = messages
        held = self._held.pop(run_id, None)
        if held is not None:  # never written: its start and model usage fold into its end
            started: dict[str, Any] = {k: v for k, v in held.start.items() if k == "attempt"}
            if held.usage:
                started["usage"] = held.usage
            for key in ("trace_id", "span_id"):
                if held.start.get(key):
                    started[key] = held.start[key]
            identity = held.start.get("identity")
            if isinstance(identity, dict):
                kept = self._profile_of(identity)
                first = messages[0].get("content") if messages else None
                if first == kept.get("goal"):
                    kept = {k: v for k, v in kept.items() if k != "goal"}
                started["identity"] = kept
            data["started"] = started
        else:
            turns = self._turns.pop(run_id, None)
            if turns:  # the model turns since the run's last entry (schema 7 on)
                data[USAGE] = turns
        entry = self._entry(EntryType.RUN_FINISHED, data, run_id)
        if self.sealed:
            return None
        self.entries_since_checkpoint += 1
        return self.journal.submit(entry)


def _rebuilt_from_start(messages: list[Message], goal: str | None, reply: str) -> bool:
    """Whether a reader rebuilds ``messages`` exactly from the run's written ``run_started``
    (its goal) and the end's reply: then the end leaves them out (schema 5 on; see
    ``rewind.finished_messages``), instead of repeating the goal's text."""
    return goal is not None and messages == [{"role": "user", "content": goal},
                                             {"role": "assistant", "content": reply}]


@dataclass(slots=True)
class _HeldStart:
    start: dict[str, Any]
    usage: list[dict[str, Any]] = field(default_factory=list)
