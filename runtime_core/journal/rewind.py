"""Rewind: the state a process had just before a journal entry, and the plan that shows what
going back there changes. History is never edited: applying appends a ``rewind`` entry with
the restored state (and the process a checkpoint), so the skipped entries stay readable and a
rewind can itself be undone by rewinding to an entry after it."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.left_out import identity_of
from runtime_core.journal.provider import JournalProvider, ReadFilter
from runtime_core.journal.rewind_plan import (
    ContextChange,
    OutsideEffect,
    RewindMode,
    RewindPlan,
)

Message = dict[str, Any]
Place = tuple[int, int]  # (seq of the entry that brought a message, its index there)
Placed = tuple[Place, Message]
CONVERSATION_TYPES = frozenset({EntryType.RUN_FINISHED})
STATE_TYPES = frozenset({EntryType.CONTEXT_UPDATE, EntryType.TOOL_RESULT, EntryType.CHECKPOINT,
                         EntryType.RECONCILED, EntryType.REWIND})
BASE_TYPES = (EntryType.REWIND, EntryType.FORKED)  # entries that carry a whole conversation
MAX_EFFECTS = 200
MAX_PREVIEW = 20
RESULT_SLACK = 5_000  # entries after the last listed write intent to look for its result


async def finished_messages(journal: JournalProvider, entry: JournalEntry) -> list[Message]:
    """The conversation messages a ``run_finished`` entry added (``end_messages``), its
    ``run_started`` looked up by the run index when the end leaves its messages out."""
    if not needs_start(entry):
        return end_messages(entry, None)
    started = await journal.read(ReadFilter(process=entry.process, run_id=entry.run_id,
                                            entry_type=EntryType.RUN_STARTED,
                                            until_seq=entry.seq, limit=1))
    return end_messages(entry, started[0] if started else None)


def needs_start(entry: JournalEntry) -> bool:
    """Whether ``end_messages`` needs the run's ``run_started`` to rebuild what ``entry`` (a
    ``run_finished``) added: its messages were left out."""
    return "messages" not in entry.data and bool(entry.run_id)


def end_messages(entry: JournalEntry, started: JournalEntry | None) -> list[Message]:
    """The conversation messages a ``run_finished`` entry added, given its run's first
    ``run_started`` (None: not found, or not needed). Schema 5 on, an end whose messages are
    just the run's goal and its reply leaves them out: they are rebuilt from the goal its
    ``run_started`` keeps and its ``reply``. An end that carries them (older journals, a folded
    start, a longer exchange) is read as it is. The one rule: every reader calls this."""
    kept = entry.data.get("messages")
    if not needs_start(entry):
        return list(kept) if isinstance(kept, list) else []
    identity = identity_of(started.data, started.timestamp, started.run_id) if started else None
    goal = identity.get("goal") if identity is not None else None
    reply = {"role": "assistant", "content": str(entry.data.get("reply") or "")}
    return [{"role": "user", "content": goal}, reply] if isinstance(goal, str) else [reply]


@runtime_checkable
class ReadsRuns(Protocol):
    """A journal that reads many runs' entries in one query (the SQL ones)."""

    async def runs_entries(self, process: str, run_ids: Sequence[str],
                           entry_type: str | None = None) -> list[JournalEntry]:
        """The entries (of ``entry_type``) of the runs ``run_ids``, in seq order."""
        ...


async def ends_messages(journal: JournalProvider, ends: Sequence[JournalEntry]
                        ) -> list[list[Message]]:
    """``end_messages`` of each ``run_finished`` in ``ends``: the starts they need read at
    once (one query on a SQL journal, a round of reads elsewhere), not one read per run."""
    wanted = [e for e in ends if needs_start(e)]
    starts: dict[str, list[JournalEntry]] = {}
    if wanted and isinstance(journal, ReadsRuns):
        for started in await journal.runs_entries(wanted[0].process,
                                                  [str(e.run_id) for e in wanted],
                                                  EntryType.RUN_STARTED):
            starts.setdefault(str(started.run_id), []).append(started)
    elif wanted:
        return list(await asyncio.gather(*(finished_messages(journal, e) for e in ends)))
    out = []
    for end in ends:
        first = next((s for s in starts.get(str(end.run_id), ()) if s.seq < end.seq), None)
        out.append(end_messages(end, first))
    return out


class UnknownEntry(ValueError):
    """The entry id names nothing in this process's journal."""


def parse_entry_id(process: str, entry_id: str | int) -> int:
    """``"<process>:<seq>"`` (as shown everywhere) or a bare sequence number."""
    text = str(entry_id).strip()
    name, sep, seq = text.rpartition(":")
    if sep and name and name != process:
        raise UnknownEntry(f"entry {text!r} belongs to process {name!r}, not {process!r}")
    try:
        number = int(seq if sep else text)
    except ValueError:
        raise UnknownEntry(f"{text!r} is not an entry id; use '{process}:<seq>' as listed by "
                           f"'promptui rewind {process}'") from None
    if number < 1:
        raise UnknownEntry(f"entry sequence numbers start at 1, not {number}")
    return number


def fold_context(state: dict[str, Any], entry: JournalEntry) -> None:
    """Apply one entry to a context state (the same rules recovery uses)."""
    d = entry.data
    if entry.entry_type == EntryType.CONTEXT_UPDATE:
        state[d["key"]] = d.get("value")
    elif entry.entry_type == EntryType.TOOL_RESULT and d.get("ok", True):
        state.update(d.get("updates") or {})
    elif entry.entry_type in BASE_TYPES and isinstance(d.get("context_state"), dict):
        state.clear()
        state.update(d["context_state"])


class RewindEngine:
    """Rewind over a journal: the state a process had just before an entry, and the plan that
    shows what going back there changes (context keys before and after, conversation
    messages dropped, writes already made that cannot be undone). It never edits history:
    applying a rewind appends a ``rewind`` entry with the restored state. A process's own
    ``rewind_plan()`` and ``rewind()`` use it."""

    def __init__(self, journal: JournalProvider) -> None:
        self.journal = journal

    async def entry(self, process: str, entry_id: str | int) -> JournalEntry:
        seq = parse_entry_id(process, entry_id)
        found = await self.journal.read(ReadFilter(process=process, since_seq=seq - 1, limit=1))
        if not found or found[0].seq != seq:
            head = await self.head(process)
            raise UnknownEntry(f"no journal entry {process}:{seq} (this process has entries "
                               f"{process}:1 to {process}:{head})" if head else
                               f"process {process!r} has no journal entries")
        return found[0]

    async def head(self, process: str) -> int:
        last = await self.journal.read(ReadFilter(process=process, newest_first=True, limit=1))
        return last[0].seq if last else 0

    async def context_before(self, process: str, seq: int,
                             initial: dict[str, Any] | None = None) -> dict[str, Any]:
        """The context state just before entry ``seq``: the last checkpoint before it (or the
        configured ``initial`` state), then the entries between."""
        checkpoints = await self.journal.read(ReadFilter(
            process=process, entry_type=EntryType.CHECKPOINT, until_seq=seq, newest_first=True,
            limit=1))
        state: dict[str, Any] = dict(initial or {})
        since = 0
        if checkpoints:
            state = dict(checkpoints[0].data.get("context_state") or {})
            since = checkpoints[0].seq
        for entry in await self.journal.read(ReadFilter(process=process, since_seq=since,
                                                        until_seq=seq)):
            fold_context(state, entry)
        return state

    async def conversation_before(self, process: str, seq: int | None,
                                  max_messages: int = 0) -> list[Message]:
        """The conversation just before entry ``seq`` (None: now): the last rewind or fork
        base, then the messages of the runs finished after it."""
        return [message for _, message in await self.placed_conversation(
            process, seq, max_messages)]

    async def conversation_base(self, process: str, seq: int | None
                                ) -> tuple[int, list[Message]]:
        """The last rewind or fork before entry ``seq`` (None: now) that set a whole
        conversation: its seq (0: none) and that conversation."""
        return _base_of(await asyncio.gather(*(self.journal.read(ReadFilter(
            process=process, entry_type=kind, until_seq=seq, newest_first=True, limit=1))
            for kind in BASE_TYPES)))

    async def placed_conversation(self, process: str, seq: int | None,
                                  max_messages: int = 0) -> list[Placed]:
        """``conversation_before``, each message with its place in the journal: the entry that
        brought it (a run's end, or the rewind or fork that set a whole conversation) and its
        index there. Two lists read from one journal name the same message the same way."""
        runs = (max_messages + 1) // 2 if max_messages else 1000  # "all": 1,000 runs back
        # The base and the newest run ends read at once (a start waits for each read): the
        # newest ``runs`` ends, of those after the base, are the newest ``runs`` after it.
        *bases, newest = await asyncio.gather(*(self.journal.read(ReadFilter(
            process=process, entry_type=kind, until_seq=seq, newest_first=True, limit=1))
            for kind in BASE_TYPES), self.journal.read(ReadFilter(
                process=process, entry_type=EntryType.RUN_FINISHED, until_seq=seq,
                newest_first=True, limit=runs)))
        since, base = _base_of(bases)
        finished = [entry for entry in newest if entry.seq > since]
        messages: list[Placed] = [((since, i), m) for i, m in enumerate(base)]
        # Their starts read at once (one query, not one per run: on every start's path).
        ends = finished[::-1]
        for entry, said in zip(ends, await ends_messages(self.journal, ends), strict=True):
            messages.extend(((entry.seq, i), m) for i, m in enumerate(said))
        return messages[-max_messages:] if max_messages else messages

    async def dropped_before(self, process: str, seq: int, current: list[Message],
                             restored: list[Placed], max_messages: int = 0) -> list[Message]:
        """The messages of ``current`` that a rewind to ``restored`` (the conversation just
        before entry ``seq``) takes away. Told apart by their place in the journal, not by
        their text or by counting: a conversation at its cap slides (both lists have lost
        their oldest messages, so they share no beginning) and a looping agent repeats the
        same words. Compared by text when places cannot tell: ``current`` is not what the
        journal holds, or a rewind or fork after the target set it anew."""
        base_seq, _ = await self.conversation_base(process, None)
        now = await self.placed_conversation(process, None, max_messages)
        if base_seq >= seq or [m for _, m in now] != current:
            return dropped_messages(current, [m for _, m in restored])
        kept = {place for place, _ in restored}
        return [message for place, message in now if place not in kept]

    async def outside_effects(self, process: str, seq: int) -> list[OutsideEffect]:
        """Write tool calls at or after ``seq``: done in the world, not undone by a rewind."""
        # The journal stores compact JSON, so the filter narrows to write intents in SQL; the
        # check below keeps an argument that merely contains that text out.
        intents = await self.journal.read(ReadFilter(
            process=process, entry_type=EntryType.TOOL_INTENT, since_seq=seq - 1,
            contains='"effect":"write"', limit=MAX_EFFECTS * 2))
        writes = [e for e in intents if e.data.get("effect") == "write"][:MAX_EFFECTS]
        if not writes:
            return []
        # A result follows its intent within the run; read only the stretch that can hold them.
        results = await self.journal.read(ReadFilter(
            process=process, entry_type=EntryType.TOOL_RESULT, since_seq=writes[0].seq,
            until_seq=writes[-1].seq + RESULT_SLACK))
        wanted = {(e.run_id, e.data.get("step")) for e in writes}
        by_call = {(r.run_id, r.data.get("step")): r for r in results
                   if (r.run_id, r.data.get("step")) in wanted}
        effects = []
        for intent in writes:
            result = by_call.get((intent.run_id, intent.data.get("step")))
            effects.append(OutsideEffect(
                intent.entry_id, intent.run_id or "", str(intent.data.get("tool", "")),
                dict(intent.data.get("args") or {}),
                str(result.data.get("result", "")) if result is not None else "",
                intent.timestamp))
        return effects

    async def plan(self, process: str, entry_id: str | int, mode: RewindMode | str, *,
                   current_context: dict[str, Any], current_conversation: list[Message],
                   max_messages: int = 0, initial: dict[str, Any] | None = None,
                   ) -> tuple[RewindPlan, dict[str, Any], list[Message]]:
        """The plan, and the context and conversation the rewind would restore."""
        mode = RewindMode(mode)
        target = await self.entry(process, entry_id)
        seq = target.seq
        head = await self.head(process)
        counts = await self.journal.count_types(process, since_seq=seq - 1)
        conversation_n = sum(n for t, n in counts.items() if t in CONVERSATION_TYPES)
        state_n = sum(n for t, n in counts.items() if t in STATE_TYPES)
        affected = sum(counts.values())
        context = await self.context_before(process, seq, initial)
        placed = await self.placed_conversation(process, seq, max_messages)
        conversation = [message for _, message in placed]
        changes: list[ContextChange] = []
        dropped: list[Message] = []
        if mode in (RewindMode.BOTH, RewindMode.CODE_ONLY, RewindMode.CANCEL):
            changes = context_diff(current_context, context)
        if mode in (RewindMode.BOTH, RewindMode.CONVERSATION_ONLY, RewindMode.CANCEL):
            dropped = await self.dropped_before(process, seq, current_conversation, placed,
                                                max_messages)
        effects = await self.outside_effects(process, seq)
        verb = {RewindMode.SUMMARIZE: "summarize without removing",
                RewindMode.CANCEL: "preview only"}.get(mode, f"rewind ({mode.value})")
        plan = RewindPlan(
            process=process, target_entry_id=target.entry_id, target_seq=seq,
            target_type=target.entry_type, target_timestamp=target.timestamp, mode=mode,
            entries_total=head, entries_affected=affected,
            conversation_affected=conversation_n, state_affected=state_n,
            other_affected=affected - conversation_n - state_n,
            context_changes=tuple(changes), messages_dropped=len(dropped),
            dropped_preview=tuple(first_line(m) for m in dropped[:MAX_PREVIEW]),
            outside_effects=tuple(effects),
            summary=(f"{verb}: {affected} entr{'y' if affected == 1 else 'ies'} from "
                     f"{target.entry_id} on ({conversation_n} conversation, {state_n} state), "
                     f"{len(changes)} context key(s) change, {len(dropped)} message(s) dropped, "
                     f"{len(effects)} outside write(s) stay done"))
        return plan, context, conversation

    async def interval_summary(self, process: str, seq: int) -> str:
        counts = await self.journal.count_types(process, since_seq=seq - 1)
        if not counts:
            return "[rewind summary] (empty interval)"
        parts = ", ".join(f"{n} {t}" for t, n in Counter(counts).most_common())
        return (f"[rewind summary] Skipped interval from {process}:{seq} containing {parts}. "
                "State and conversation were preserved as-is.")


def context_diff(now: dict[str, Any], after: dict[str, Any]) -> list[ContextChange]:
    changes = []
    for key in sorted(set(now) | set(after)):
        if key not in after:
            changes.append(ContextChange(key, "removed", now[key], None))
        elif key not in now:
            changes.append(ContextChange(key, "added", None, after[key]))
        elif now[key] != after[key]:
            changes.append(ContextChange(key, "changed", now[key], after[key]))
    return changes


def dropped_messages(now: list[Message], after: list[Message]) -> list[Message]:
    """What the conversation loses: everything past the common beginning."""
    common = 0
    for a, b in zip(now, after, strict=False):
        if a != b:
            break
        common += 1
    return now[common:]


def first_line(message: Message) -> str:
    content = str(message.get("content") or "")
    line = content.strip().splitlines()[0] if content.strip() else ""
    return f"{message.get('role', '?')}: {line[:100]}"


async def restored_state(engine: RewindEngine, plan: RewindPlan,
                         current_context: dict[str, Any], current_conversation: list[Message],
                         context: dict[str, Any], conversation: list[Message],
                         ) -> tuple[dict[str, Any], list[Message]]:
    """The context and conversation once ``plan.mode`` is applied."""
    mode = plan.mode
    new_context = context if mode in (RewindMode.BOTH, RewindMode.CODE_ONLY) \
        else current_context
    new_conversation = conversation if mode in (RewindMode.BOTH, RewindMode.CONVERSATION_ONLY) \
        else current_conversation
    if mode is RewindMode.SUMMARIZE:
        note = await engine.interval_summary(plan.process, plan.target_seq)
        new_conversation = [*current_conversation, {"role": "system", "content": note}]
    return new_context, new_conversation


def rewind_entry_data(plan: RewindPlan, actor: str, context: dict[str, Any],
                      conversation: list[Message]) -> dict[str, Any]:
    """What a ``rewind`` entry records: the plan's counts and the state it restored."""
    return {"target_entry_id": plan.target_entry_id, "target_seq": plan.target_seq,
            "mode": plan.mode.value, "actor": actor, "entries_affected": plan.entries_affected,
            "conversation_affected": plan.conversation_affected,
            "state_affected": plan.state_affected, "outside_effects": len(plan.outside_effects),
            "context_state": context, "conversation": conversation}


def _base_of(found: Sequence[list[JournalEntry]]) -> tuple[int, list[Message]]:
    """The newest of the last entry of each BASE_TYPES kind that set a whole conversation:
    its seq (0: none) and that conversation."""
    base: list[Message] = []
    since = 0
    for entries in found:
        if entries and entries[0].seq > since and isinstance(
                entries[0].data.get("conversation"), list):
            base, since = list(entries[0].data["conversation"]), entries[0].seq
    return since, base
