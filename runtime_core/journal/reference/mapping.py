"""One reference process's entries as our journal entries, in order, so recovery resumes it
where the reference left it.

What maps to what (reference type -> ours):

* ``state_transition`` -> ``state_transition``; ``context_update`` -> ``context_update``;
  ``checkpoint`` -> ``checkpoint`` (its state translated, see ``state``); ``restart``,
  ``restart_exhausted``, ``secret_access`` -> the same.
* ``trigger_event`` (the ``full`` level; also read under the names ``event_accepted`` and
  ``event_queued``) -> ``event_accepted`` with the event. An event accepted and never finished
  stays pending: recovery redelivers it once.
* ``invocation_start`` -> ``run_started``; ``tool_call`` -> a model turn asking for the call and
  its ``tool_intent`` (effect ``write`` unless the entry says ``read``: the reference did not
  record effects, and an undeclared tool is a write here); ``tool_result`` -> ``tool_result``.
  A run whose write has no result waits for an operator (``unknown_write_outcome``).
* ``invocation_result`` -> ``run_finished`` (succeeded, with the conversation messages the next
  checkpoint added); ``error`` -> ``run_finished`` (failed), and when no later entry retries
  that event, a ``dead_lettered`` entry ("retries exhausted"), as the reference's in-memory dead
  letters held it; ``dead_letter``/``dead_lettered`` entries, where a journal has them, ->
  ``dead_lettered``.
* A clean stop (``state_transition`` to ``stopped``) or a failure dead-letters what was still
  pending ("process stopped" / "process failed"), as a stop does here.

Entries a run needs but the reference left out (at the ``checkpoint`` level there are no
``trigger_event`` or ``invocation_start`` entries) are made from the entry that implies them.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.reference.reader import Problem, RawEntry, ReferenceProcess
from runtime_core.journal.reference.state import (
    added_messages,
    checkpoint_body,
    checkpoint_state,
    conversation_of,
    parse_time,
)

EVENT_TYPES = ("trigger_event", "event_accepted", "event_queued")
DEAD_TYPES = ("dead_letter", "dead_lettered")
RUN_TYPES = ("invocation_start", "invocation_result", "error")
SIMPLE = {"restart": EntryType.RESTART, "restart_exhausted": EntryType.RESTART_EXHAUSTED}
NOT_CARRIED = {
    "mission_evaluation": "no entry of ours; the mission's state comes from the checkpoints",
    "rewind": "the reference's rewind changed no process (it only returned a state)",
    "user_prompt": "the conversation comes from the checkpoints",
    "assistant_message": "the conversation comes from the checkpoints",
    "conversation_turn": "the conversation comes from the checkpoints",
}
IMPORT_SOURCE = "reference import"


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat()


@dataclass(slots=True)
class Mapped:
    entry: JournalEntry
    attachment: Any = None
    source: str = ""  # "file:line" of the reference entry it came from


@dataclass(slots=True)
class _Call:
    call_id: str
    tool: str
    args: dict[str, Any]
    step: int
    effect: str
    settled: bool = False


@dataclass(slots=True)
class _Run:
    run_id: str
    event_id: str
    step: int = 0
    turns: int = 0
    calls: list[_Call] = field(default_factory=list)
    turn_calls: list[dict[str, Any]] | None = None  # the open model turn's tool_calls list

    def unsettled(self) -> list[_Call]:
        return [c for c in self.calls if not c.settled]


@dataclass(slots=True)
class MappedProcess:
    name: str
    entries: list[Mapped] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    read: Counter[str] = field(default_factory=Counter)  # reference entry types read
    not_carried: Counter[str] = field(default_factory=Counter)
    dropped_keys: set[str] = field(default_factory=set)  # checkpoint keys not carried over


class _Mapper:
    def __init__(self, process: ReferenceProcess) -> None:
        self.process = process
        self.out = MappedProcess(process.name)
        self.process_id = ""
        self.at = 0.0
        self.source = ""
        self.events: dict[str, dict[str, Any]] = {}
        self.pending: dict[str, None] = {}  # accepted, not settled (ordered)
        self.dead: set[str] = set()  # dead-lettered, not redelivered
        self.runs: dict[str, _Run] = {}  # open runs by event id
        self.current: _Run | None = None  # the run tool calls belong to
        self.attempts: Counter[str] = Counter()
        self.last_touch: dict[str, int] = {}
        self.conversation: list[dict[str, Any]] = []
        self.unfilled: dict[str, Any] | None = None  # a run's end awaiting its messages
        self.checkpoints: list[dict[str, Any]] = []  # the raw states, in order
        self.payloads: set[str] = set()  # events whose payload the reference recorded

    # -- output ----------------------------------------------------------------------------
    def emit(self, kind: str, data: dict[str, Any], *, run_id: str | None = None,
             attachment: Any = None) -> JournalEntry:
        entry = JournalEntry(self.process.name, kind, data, process_id=self.process_id,
                             run_id=run_id, timestamp=self.at)
        self.out.entries.append(Mapped(entry, attachment, self.source))
        return entry

    def problem(self, raw: RawEntry, kind: str, message: str) -> None:
        self.out.problems.append(Problem(raw.file, raw.line, kind, message))

    # -- events and runs ---------------------------------------------------------------------
    def event_of(self, body: dict[str, Any]) -> dict[str, Any] | None:
        inner = body.get("event")
        src: dict[str, Any] = inner if isinstance(inner, dict) else body
        event_id = src.get("event_id") or body.get("event_id")
        if not isinstance(event_id, str | int) or isinstance(event_id, bool) or event_id == "":
            return None
        event_id = str(event_id)
        known = self.events.get(event_id)
        if known is not None and src is body and "payload" not in body:
            return known
        if "payload" in src:
            self.payloads.add(event_id)
        metadata = src.get("metadata")
        event = {"trigger_id": str(src.get("trigger_id") or (known or {}).get("trigger_id", "")),
                 "trigger_type": str(src.get("trigger_type")
                                     or (known or {}).get("trigger_type", "")),
                 "payload": src.get("payload", (known or {}).get("payload", {})),
                 "event_id": event_id,
                 "timestamp": _iso(parse_time(src.get("timestamp")) or self.at),
                 "metadata": dict(metadata) if isinstance(metadata, dict) else {}}
        self.events[event_id] = event
        return event

    def accept(self, event: dict[str, Any], full: bool) -> None:
        if event["event_id"] in self.pending:
            return  # a retry journals its event again; it is still the one accepted
        if event["event_id"] in self.dead:  # the reference redelivered a dead letter
            self.emit(EntryType.REDELIVERED, {"event_ids": [event["event_id"]]})
            self.dead.discard(event["event_id"])
            self.pending[event["event_id"]] = None
            return
        data = {"event_id": event["event_id"], "trigger_id": event["trigger_id"],
                "trigger_type": event["trigger_type"]}
        if full:
            data["payload"] = event["payload"]
        self.emit(EntryType.EVENT_ACCEPTED, data, attachment=event)
        self.pending[event["event_id"]] = None

    def start_run(self, event: dict[str, Any]) -> _Run:
        event_id = event["event_id"]
        self.accept(event, False)
        open_run = self.runs.get(event_id)
        if open_run is not None:
            return open_run
        self.attempts[event_id] += 1
        run = _Run(uuid.uuid4().hex[:16], event_id)
        self.emit(EntryType.RUN_STARTED, {"event_id": event_id,
                                          "attempt": self.attempts[event_id]}, run_id=run.run_id)
        self.runs[event_id] = run
        self.current = run
        return run

    def finish(self, run: _Run, state: str, *, reason: str = "", error: str = "",
               reply: str = "", done: bool) -> dict[str, Any]:
        data: dict[str, Any] = {"event_id": run.event_id, "state": state, "reason": reason,
                                "error": error[:1000], "reply": reply[:2000],
                                "event_done": done, "messages": []}
        self.emit(EntryType.RUN_FINISHED, data, run_id=run.run_id)
        self.runs.pop(run.event_id, None)
        if self.current is run:
            self.current = next(reversed(self.runs.values()), None) if self.runs else None
        if done:
            self.pending.pop(run.event_id, None)
        return data

    def dead_letter(self, event: dict[str, Any], reason: str, error: str, attempts: int,
                    at: float | None = None) -> None:
        run = self.runs.get(event["event_id"])
        if run is not None:
            self.finish(run, "cancelled", reason="cancelled", error=error, done=False)
        if event["event_id"] not in self.payloads:
            error = (f"{error}; " if error else "") + "its payload is not in the reference " \
                "journal (not journaled at its level): a redelivery runs with an empty payload"
        saved, self.at = self.at, at if at is not None else self.at
        self.emit(EntryType.DEAD_LETTERED, {
            "event_id": event["event_id"], "trigger_type": event["trigger_type"],
            "reason": reason, "error": error[:1000], "attempts": attempts},
            attachment=event)
        self.at = saved
        self.pending.pop(event["event_id"], None)
        self.dead.add(event["event_id"])

    def settle_all(self, reason: str) -> None:
        """A stop or a failure: what was pending goes to the dead letters, as here."""
        for event_id in list(self.pending):
            run = self.runs.get(event_id)
            error = "run cancelled" if run is not None else ""
            if run is not None and run.unsettled():
                call = run.unsettled()[0]
                error += (f" with {call.effect} {call.tool} unfinished; its outcome is not "
                          "known")
            self.dead_letter(self.events[event_id], reason, error, self.attempts[event_id])

    # -- entry types -------------------------------------------------------------------------
    def on_event(self, raw: RawEntry, index: int) -> None:
        event = self.event_of(raw.body)
        if event is None:
            self.problem(raw, "invalid", f"{raw.entry_type} entry skipped: no event_id")
            return
        self.accept(event, True)

    def on_run(self, raw: RawEntry, index: int) -> None:
        body = raw.body
        event = self.event_of(body)
        if event is None:
            self.problem(raw, "invalid", f"{raw.entry_type} entry skipped: no event_id")
            return
        run = self.start_run(event)
        if raw.entry_type == "invocation_start":
            return
        if raw.entry_type == "invocation_result":
            data = self.finish(run, "succeeded", reply=str(body.get("response") or ""),
                               done=True)
            if isinstance(body.get("duration_ms"), int | float):
                data["duration_ms"] = body["duration_ms"]
            self.unfilled = data
            return
        kind = str(body.get("error_type") or "error")
        error = f"{kind}: {body.get('error') or ''}"
        self.finish(run, "failed", reason="step", error=error, done=False)
        if self.last_touch.get(event["event_id"], -1) <= index:  # no retry follows
            self.dead_letter(event, "retries exhausted", error, self.attempts[event["event_id"]])

    def on_dead(self, raw: RawEntry, index: int) -> None:
        body = raw.body
        event = self.event_of(body)
        if event is None:
            self.problem(raw, "invalid", f"{raw.entry_type} entry skipped: no event_id")
            return
        attempts = body.get("attempts")
        self.dead_letter(event, str(body.get("reason") or "retries exhausted"),
                         str(body.get("error") or ""),
                         attempts if isinstance(attempts, int) and attempts >= 0
                         else self.attempts[event["event_id"]],
                         parse_time(body.get("dead_lettered_at")))

    def on_tool_call(self, raw: RawEntry, index: int) -> None:
        run = self.current
        if run is None:
            self.problem(raw, "orphan", "tool_call skipped: no run was open (no "
                         "invocation_start before it)")
            return
        body = raw.body
        args = body.get("args")
        args = dict(args) if isinstance(args, dict) else ({} if args is None else {"input": args})
        tool = str(body.get("tool") or body.get("name") or "tool")
        effect = "read" if body.get("effect") == "read" or body.get("read_only") is True \
            else "write"
        if run.turn_calls is None or not run.unsettled():  # a new model turn asked for it
            run.step += 1
            run.turn_calls = []
            self.emit(EntryType.MODEL_USAGE, {"step": run.step, "turn": run.turns,
                                              "input_tokens": 0, "output_tokens": 0,
                                              "tool_calls": run.turn_calls, "reply": ""},
                      run_id=run.run_id)
            run.turns += 1
        run.step += 1
        call = _Call(f"call_{run.step}", tool, args, run.step, effect)
        run.turn_calls.append({"name": tool, "args": args, "call_id": call.call_id})
        run.calls.append(call)
        self.emit(EntryType.TOOL_INTENT, {"step": call.step, "tool": tool,
                                          "call_id": call.call_id, "effect": effect,
                                          "args": args,
                                          "idempotency_key": f"{run.run_id}:{call.step}"},
                  run_id=run.run_id)

    def on_tool_result(self, raw: RawEntry, index: int) -> None:
        run = self.current
        body = raw.body
        tool = str(body.get("tool") or body.get("name") or "")
        waiting = run.unsettled() if run is not None else []
        call = next((c for c in waiting if c.tool == tool), waiting[0] if waiting else None)
        if run is None or call is None:
            self.problem(raw, "orphan", "tool_result skipped: no tool_call of an open run "
                         "waits for it")
            return
        call.settled = True
        result = body.get("result")
        self.emit(EntryType.TOOL_RESULT, {"step": call.step, "tool": call.tool,
                                          "call_id": call.call_id, "ok": True,
                                          "result": str("" if result is None else result)[:2000],
                                          "updates": {}}, run_id=run.run_id)

    def on_transition(self, raw: RawEntry, index: int) -> None:
        body = raw.body
        if isinstance(body.get("process_id"), str):
            self.process_id = body["process_id"]
        to_state = str(body.get("to_state") or "")
        self.emit(EntryType.STATE_TRANSITION, {"from_state": str(body.get("from_state") or ""),
                                               "to_state": to_state,
                                               "reason": str(body.get("reason") or "")})
        if "restart" not in str(body.get("reason") or ""):  # a restart keeps its queue
            if to_state == "stopped":
                self.settle_all("process stopped")
            elif to_state == "failed":
                self.settle_all("process failed")

    def on_checkpoint(self, raw: RawEntry | None, state: dict[str, Any]) -> None:
        data, dropped = checkpoint_state(state, self.at)
        self.out.dropped_keys.update(dropped)
        conversation = conversation_of(state)
        if conversation is not None:
            added = added_messages(self.conversation, conversation)
            if self.unfilled is not None:
                self.unfilled["messages"] = added
            self.conversation = conversation
        self.unfilled = None
        self.checkpoints.append(state)
        self.emit(EntryType.CHECKPOINT, data)

    def on_context_update(self, raw: RawEntry, index: int) -> None:
        key = raw.body.get("key")
        if not isinstance(key, str):
            self.problem(raw, "invalid", "context_update skipped: its key is not a string")
            return
        self.emit(EntryType.CONTEXT_UPDATE, {"key": key, "value": raw.body.get("value"),
                                             "source": IMPORT_SOURCE})

    # -- the whole process -----------------------------------------------------------------
    def run(self) -> MappedProcess:
        entries = self.process.entries
        self.at = next((t for t in (parse_time(e.data.get("timestamp")) for e in entries)
                        if t is not None), None) or time.time()
        for index, raw in enumerate(entries):
            body = raw.body
            if raw.entry_type in EVENT_TYPES + DEAD_TYPES + RUN_TYPES:
                inner = body.get("event")
                event_id = (inner if isinstance(inner, dict) else body).get("event_id")
                if isinstance(event_id, str | int):
                    self.last_touch[str(event_id)] = index
        handlers = {"trigger_event": self.on_event, "event_accepted": self.on_event,
                    "event_queued": self.on_event, "invocation_start": self.on_run,
                    "invocation_result": self.on_run, "error": self.on_run,
                    "dead_letter": self.on_dead, "dead_lettered": self.on_dead,
                    "tool_call": self.on_tool_call, "tool_result": self.on_tool_result,
                    "state_transition": self.on_transition,
                    "context_update": self.on_context_update}
        for index, raw in enumerate(entries):
            kind = raw.entry_type
            self.out.read[kind] += 1
            self.at = parse_time(raw.data.get("timestamp")) or self.at
            self.source = f"{raw.file}:{raw.line}"
            if not isinstance(raw.data.get("data", {}), dict):
                self.problem(raw, "invalid", f"{kind} entry skipped: its data is not an object")
            elif kind in handlers:
                handlers[kind](raw, index)
            elif kind == "checkpoint":
                self.on_checkpoint(raw, checkpoint_body(raw.body))
            elif kind in SIMPLE:
                self.emit(SIMPLE[kind], dict(raw.body))
            elif kind == "secret_access":
                self.emit(EntryType.SECRET_ACCESS, {
                    "name": str(raw.body.get("secret_name") or raw.body.get("name") or ""),
                    "action": str(raw.body.get("action") or "access")})
            elif kind in NOT_CARRIED:
                self.out.not_carried[kind] += 1
            else:
                self.out.not_carried[kind] += 1
                self.problem(raw, "unknown_type", f"unknown entry type {kind!r} skipped")
        self.checkpoint_file()
        return self.out

    def checkpoint_file(self) -> None:
        state = self.process.checkpoint_file
        if state is not None:
            state = checkpoint_body(state)
        if state is None:
            return
        name = self.process.checkpoint_file_name
        if self.checkpoints and state == self.checkpoints[-1]:
            return
        if state in self.checkpoints:
            self.out.problems.append(Problem(name, 0, "note", "an older state than the last "
                                             "checkpoint in the JSONL file; the JSONL's is used"))
            return
        self.source = name
        self.out.problems.append(Problem(name, 0, "note", "holds a checkpoint the JSONL file "
                                         "lacks (its line was probably torn): imported as the "
                                         "last checkpoint"))
        self.on_checkpoint(None, state)


def map_process(process: ReferenceProcess) -> MappedProcess:
    """Our entries for one reference process, in order, with what was skipped and why."""
    return _Mapper(process).run()
