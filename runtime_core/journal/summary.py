"""One readable line per journal entry, for timelines and listings."""

from __future__ import annotations

import json
from typing import Any

from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.left_out import STARTED, turns_of


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str,
                                                            ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summarize(entry: JournalEntry) -> str:
    d = entry.data
    t = entry.entry_type
    if t == EntryType.STATE_TRANSITION:
        return f"{d.get('from_state')} → {d.get('to_state')} {_short(d.get('reason', ''), 40)}"
    if t == EntryType.EVENT_ACCEPTED:
        return f"event {str(d.get('event_id', ''))[:8]} accepted ({d.get('trigger_type')})"
    if t == EntryType.RUN_STARTED:
        ident = d.get("identity") or {}
        profile = f" ({ident.get('profile')}@{ident.get('version')})" \
            if ident.get("profile") else ""
        return f"run started for event {str(d.get('event_id', ''))[:8]}{profile}"
    if t == EntryType.PROFILE:
        return f"profile {d.get('profile')}@{d.get('version')} " \
               f"(configuration {str(d.get('config_digest', ''))[:12]})"
    if t == EntryType.MODEL_USAGE and isinstance(d.get("sampling"), dict):
        server = d["sampling"].get("server", "")
        return f"model turn {d.get('turn', '')} (sampling for {server}): " \
               f"{_short(d.get('reply', ''), 40)}"
    if t == EntryType.ELICITATION_ASKED:
        return f"{d.get('server')} asks the operator: {_short(d.get('message', ''), 50)}"
    if t == EntryType.ELICITATION_ANSWERED:
        return f"answer to {d.get('server')}: {d.get('action')} by {d.get('actor', 'operator')}"
    if t == EntryType.MODEL_USAGE:
        calls = d.get("tool_calls") or []
        # A final turn's reply is kept by its run_finished: say so rather than show nothing.
        what = f"asks for {len(calls)} tool(s)" if calls else \
            _short(d.get("reply", ""), 50) or f"replies ({d.get('output_tokens', 0)} tokens)"
        return f"model turn {d.get('turn', '')}: {what}"
    if t == EntryType.TOOL_INTENT:
        turns = turns_of(t, d)  # the model turns it carries (schema 7 on)
        after = f" (model turn {turns[-1].get('turn', '')})" if turns else ""
        start = "run started · " if isinstance(d.get(STARTED), dict) else ""  # it carries
        return f"{start}{d.get('effect')} {d.get('tool')}({_short(d.get('args', {}), 50)}){after}"
    if t == EntryType.TOOL_RESULT:
        mark = "✓" if d.get("ok", True) else "✗"
        return f"{mark} {d.get('tool')} → {_short(d.get('result', ''), 50)}"
    if t == EntryType.CONTEXT_UPDATE:
        return f"{d.get('key')} = {_short(d.get('value'), 50)}"
    if t == EntryType.RUN_WAITING:
        why = d.get("missing") or d.get("tool") or ""
        return f"run waits: {d.get('reason')} {_short(why, 50)}".rstrip()
    if t == EntryType.EVIDENCE:
        return (f"evidence: {d.get('action')} by {d.get('actor', 'operator')} "
                f"{_short(d.get('note', ''), 40)}").rstrip()
    if t == EntryType.CONFIG_CHANGED:
        return f"resumed under another configuration: {d.get('started_under')} → " \
               f"{d.get('resumed_under')}"
    if t == EntryType.RUN_FINISHED:
        tail = d.get("reply") if d.get("state") == "succeeded" else d.get("error")
        turns = turns_of(t, d)  # carried, or folded in with the run's start
        model = f" ({len(turns)} model turn(s))" if turns else ""
        event = str(d.get("event_id", ""))[:8]
        return f"run {d.get('state')} for event {event}{model}: {_short(tail or '', 50)}"
    if t == EntryType.DEAD_LETTERED:
        return f"dead letter {str(d.get('event_id', ''))[:8]}: {d.get('reason')}"
    if t == EntryType.CHECKPOINT:
        return f"checkpoint ({len(d.get('context_state') or {})} context keys)"
    if t == "rewind":
        return (f"rewind ({d.get('mode')}) to {d.get('target_entry_id')} by "
                f"{d.get('actor', 'operator')}")
    if t == "forked":
        return f"forked from {d.get('from_process')} at {d.get('from_entry_id')}"
    if t == EntryType.IMPORTED:
        return (f"imported from {d.get('source')} (process {d.get('from_process')}, "
                f"{d.get('entries')} entries)")
    if t == EntryType.RECONCILED:
        note = f": {_short(d.get('note', ''), 60)}" if d.get("note") else ""
        return f"{d.get('tool')} reconciled {d.get('outcome')} by {d.get('actor')}{note}"
    if t == EntryType.SHUTDOWN:
        return (f"service shutdown: {d.get('pending', 0)} event(s) left for the next start")
    if t == EntryType.INCIDENT:
        return _incident(d)
    return _short(d, 70)


def _incident(d: dict[str, Any]) -> str:
    raw = d.get("incident")
    incident: dict[str, Any] = raw if isinstance(raw, dict) else {}
    what = (f"incident {str(incident.get('incident_id', ''))[:8]} {d.get('action')}: "
            f"{incident.get('state')} gen {incident.get('generation')} "
            f"v{incident.get('version')}")
    action = d.get("action")
    if action == "occurrence":
        what += f", {incident.get('occurrences')} occurrences"
    elif action == "run_linked":
        what += f", run {str(d.get('run_id', ''))[:8]}"
    elif action in ("resolved", "reopened") and d.get("actor"):
        what += f" by {d.get('actor')}"
    elif action == "ignored":
        return f"incident event ignored: {_short(d.get('reason', ''), 50)}"
    return f"{what} ({_short(incident.get('fingerprint_value'), 30)})"
