"""Rebuild state from the journal: the process's context after its last checkpoint, and the
durable steps of a run that a crash interrupted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runtime_core.agent.attachments import ATTACHMENTS_KEY
from runtime_core.agent.model import ToolCall
from runtime_core.context import Message
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.left_out import (
    identity_of,
    intent_key,
    result_artifacts,
    with_starts,
    with_turns,
)
from runtime_core.journal.provider import JournalProvider, ReadFilter
from runtime_core.journal.rewind import RewindEngine, fold_context

#: Facts a tool intent may carry about where the tool lives (see AgentTool.journal_info).
ORIGIN_KEYS = ("mcp_server", "mcp_tool", "idempotent")
INTERRUPTED_READ = (
    "interrupted: this read did not finish before the process stopped; "
    "call the tool again if you still need it"
)


def reconciled_observation(decision: dict[str, Any]) -> str:
    """What the model sees for a write an operator reconciled."""
    outcome = decision.get("outcome")
    if outcome == "applied":
        result = decision.get("result")
        return "" if result is None else str(result)
    if outcome == "not_applied":
        note = decision.get("note")
        return ("not applied: an operator confirmed this call did not take effect"
                + (f" ({note})" if note else ""))
    return f"failed: {decision.get('note') or 'the write failed'}"


async def full_identity(journal: JournalProvider, process: str, identity: dict[str, Any],
                        before_seq: int | None) -> dict[str, Any]:
    """A run's identity with its profile (the ``profile`` entry its ``config_digest`` names,
    the last one before ``before_seq``): found by the entry-type index, so flat in the
    journal's length. An identity that carries its profile (older journals) is kept as it is."""
    digest = identity.get("config_digest")
    if "profile" in identity or not digest:
        return dict(identity)
    found = await journal.read(ReadFilter(process=process, entry_type=EntryType.PROFILE,
                                          until_seq=before_seq, newest_first=True, limit=20))
    profile = next((e.data for e in found if e.data.get("config_digest") == digest), {})
    return {**profile, **identity}


class ReplayEngine:
    """``recover(process)`` reads the last checkpoint and only the entries after it.

    Its ``entries_replayed`` and ``last_entry_type`` are the spec's, as if a checkpoint had
    followed every run (we write one every ``checkpoint_every`` runs): counted from the last
    run's end when one follows the last checkpoint. ``entries_read`` is what it read."""

    def __init__(self, journal: JournalProvider) -> None:
        self.journal = journal

    async def recover(self, process: str) -> dict[str, Any]:
        checkpoint = await self.journal.last_checkpoint(process)
        data = checkpoint.data if checkpoint is not None else {}
        context_state: dict[str, Any] = dict(data.get("context_state") or {})
        lifecycle = str(data.get("lifecycle_state") or ("running" if checkpoint else "created"))
        invocations = int(data.get("invocation_count") or 0)
        since = checkpoint.seq if checkpoint is not None else 0
        entries = await self.journal.read(ReadFilter(process=process, since_seq=since))
        last_type = checkpoint.entry_type if checkpoint is not None else None
        # The spec checkpoints after every run; we checkpoint every N runs (journal config).
        # What recovery reports is counted from where the spec's last checkpoint would be:
        # the last run's end, if one follows our last checkpoint (``tail``: entries after it).
        tail: int | None = None
        for entry in entries:
            last_type = entry.entry_type
            d = entry.data
            fold_context(context_state, entry)  # updates, tool results, a rewind's state
            if tail is not None:
                tail += 1
            if entry.entry_type == EntryType.STATE_TRANSITION:
                lifecycle = str(d.get("to_state", lifecycle))
            elif entry.entry_type == EntryType.RUN_FINISHED:
                tail = 0
                if d.get("state") == "succeeded":
                    invocations += 1
        if tail == 0:  # the spec's checkpoint would be the last entry
            last_type = EntryType.CHECKPOINT
        return {
            "context_state": context_state,
            "lifecycle_state": lifecycle,
            "last_entry_type": last_type,
            "entries_replayed": len(entries) if tail is None else tail,
            "entries_read": len(entries),  # what this recovery read after our checkpoint
            "run_ended_after_checkpoint": tail is not None,
            "invocation_count": invocations,
            "checkpoint": data if checkpoint is not None else None,
            "found": checkpoint is not None or bool(entries),
        }

    async def conversation(self, process: str, max_messages: int) -> list[Message]:
        """The last ``max_messages`` conversation messages (0 = all): the last rewind or fork
        base, then what the runs after it added."""
        return await RewindEngine(self.journal).conversation_before(process, None, max_messages)


@dataclass(slots=True)
class UnknownWrite:
    step: int
    call: ToolCall
    args: dict[str, Any]
    idempotency_key: str
    origin: dict[str, Any] = field(default_factory=dict)  # e.g. its MCP server, idempotent
    cause: str = ""  # why its answer never came (a lost connection, a timeout); "" after a crash


@dataclass(slots=True)
class RunRebuild:
    """A run's durable steps. ``unknown`` is set when a write started and its outcome is not
    known; ``failed_by_operator`` when a reconciliation said the write failed."""

    history: list[Message] = field(default_factory=list)
    step: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    output_chars: int = 0
    remaining: list[ToolCall] = field(default_factory=list)
    unknown: UnknownWrite | None = None
    interrupted: list[tuple[int, ToolCall]] = field(default_factory=list)
    failed_by_operator: str | None = None
    identity: dict[str, Any] | None = None  # frozen at the run's start
    started_seq: int = 0  # the seq of its run_started entry
    artifacts: list[dict[str, Any]] = field(default_factory=list)  # completion evidence
    final_reply: str | None = None  # a final reply that has not yet been accepted
    waiting_evidence: bool = False  # parked until an operator answers
    missing: str = ""  # what evidence the evaluator missed
    trace_id: str = ""  # the OpenTelemetry trace and span of its start, when it was traced
    span_id: str = ""


def apply_evidence(out: RunRebuild, data: dict[str, Any]) -> None:
    """An operator's answer to a run waiting for evidence (the same live and in replay)."""
    out.waiting_evidence = False
    action = data.get("action")
    if action == "supplied" and isinstance(data.get("artifact"), dict):
        out.artifacts.append(dict(data["artifact"]))
    elif action == "returned":  # the reply and the note join the history; the model goes on
        out.history.append({"role": "assistant", "content": out.final_reply or ""})
        out.history.append({"role": "user", "content": f"[Operator] {data.get('note', '')}"})
        out.final_reply = None
    elif action == "failed":
        out.failed_by_operator = str(data.get("note") or "failed by an operator")


def rebuild_run(entries: list[JournalEntry]) -> RunRebuild:
    """Fold a run's entries (in seq order) into where it can continue."""
    out = RunRebuild()
    turn_calls: list[ToolCall] = []
    settled: dict[str, Message] = {}  # call_id -> tool message
    intents: dict[str, dict[str, Any]] = {}  # call_id -> intent data
    causes: dict[str, str] = {}  # call_id -> why a live run parked on it (run_waiting)
    run_id = next((e.run_id for e in entries if e.run_id), None)

    def close_turn() -> None:
        """Append the finished turn's tool messages in call order."""
        for call in turn_calls:
            if call.call_id in settled:
                out.history.append(settled[call.call_id])

    # the start and the model turns a tool intent carries, before it, in that order
    for entry in with_turns(with_starts(entries)):
        d = entry.data
        kind = entry.entry_type
        if kind == EntryType.MODEL_USAGE and d.get("sampling"):  # a server's, inside a call:
            out.model_calls += 1  # counted against the budget, never part of the history
            out.output_chars += len(d.get("reply") or "")
            continue
        if kind == EntryType.RUN_STARTED:
            out.trace_id, out.span_id = str(d.get("trace_id", "")), str(d.get("span_id", ""))
        if kind == EntryType.RUN_STARTED and isinstance(d.get("identity"), dict):
            out.identity = identity_of(d, entry.timestamp, entry.run_id)
            out.started_seq = entry.seq
        elif kind == EntryType.RUN_WAITING and d.get("reason") == "missing_completion_evidence":
            out.final_reply = str(d.get("reply", ""))
            out.missing = str(d.get("missing", ""))
            out.waiting_evidence = True
        elif kind == EntryType.RUN_WAITING and d.get("call_id") and d.get("cause"):
            causes[str(d["call_id"])] = str(d["cause"])
        elif kind == EntryType.EVIDENCE:
            apply_evidence(out, d)
        if kind == EntryType.MODEL_USAGE:
            close_turn()
            out.model_calls += 1
            out.step = max(out.step, int(d.get("step", 0)))
            calls = [ToolCall(c["name"], dict(c.get("args") or {}), c.get("call_id", ""))
                     for c in d.get("tool_calls") or []]
            reply = d.get("reply") or ""
            out.output_chars += len(reply) + sum(len(c.name) + len(str(c.args)) for c in calls)
            turn_calls = calls
            settled, intents = {}, {}
            if calls:
                out.history.append({
                    "role": "assistant", "content": reply,
                    "tool_calls": [{"id": c.call_id, "name": c.name, "args": c.args}
                                   for c in calls],
                })
        elif kind == EntryType.TOOL_INTENT:
            out.step = max(out.step, int(d.get("step", 0)))
            out.tool_calls += 1
            intents[d["call_id"]] = d
        elif kind in (EntryType.TOOL_RESULT, EntryType.TOOL_REFUSED,
                      EntryType.TOOL_INTERRUPTED):
            out.step = max(out.step, int(d.get("step", 0)))
            content = d.get("result", "") if kind != EntryType.TOOL_INTERRUPTED else (
                INTERRUPTED_READ)
            settled[d["call_id"]] = {"role": "tool", "tool_call_id": d["call_id"],
                                     "name": d.get("tool", ""), "content": content}
            kept = [a for a in d.get("attachments") or () if isinstance(a, dict) and "data" in a]
            if kept:  # small binary content is journaled whole: the model sees it again
                settled[d["call_id"]][ATTACHMENTS_KEY] = kept
            out.artifacts.extend(result_artifacts(d, intents.get(d["call_id"]), entry.run_id))
        elif kind == EntryType.RECONCILED:
            if d.get("outcome") == "failed":
                out.failed_by_operator = d.get("note") or "the write failed"
            settled[d["call_id"]] = {"role": "tool", "tool_call_id": d["call_id"],
                                     "name": d.get("tool", ""),
                                     "content": reconciled_observation(d)}
    # The last turn: settled calls go to history; the first unsettled call decides the rest.
    for index, call in enumerate(turn_calls):
        if call.call_id in settled:
            out.history.append(settled[call.call_id])
            continue
        intent = intents.get(call.call_id)
        if intent is None:
            out.remaining = turn_calls[index:]
            break
        step = int(intent.get("step", 0))
        if intent.get("effect") == "read":
            out.interrupted.append((step, call))
            out.history.append({"role": "tool", "tool_call_id": call.call_id,
                                "name": call.name, "content": INTERRUPTED_READ})
            continue
        origin = {key: intent[key] for key in ORIGIN_KEYS if key in intent}
        out.unknown = UnknownWrite(step, call, dict(intent.get("args") or {}),
                                   intent_key(intent, run_id), origin,
                                   causes.get(call.call_id, ""))
        out.remaining = turn_calls[index + 1:]
        break
    return out
