"""Notes for a manifest written for the reference runtime (promptise): what it says is accepted,
and ``promptui validate`` says how promptui spells or reads it. A note is never an error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime_core.config import ProcessConfig
from runtime_core.governance.config import BUDGET_ALIASES
from runtime_core.memory.config import MEMORY_ALIASES
from runtime_core.triggers.config import TRIGGER_ALIASES, WATCH_EVENT_ALIASES
from runtime_core.triggers.filters.expression import FilterError, compile_filter

#: note(where, message, at_key)
Note = Callable[[tuple[Any, ...], str, bool], None]
#: Sections the reference runtime's manifests set under ``config:``, promptui at the top level:
#: read from either place (not both).
REFERENCE_CONFIG_SECTIONS = ("inbox",)
_STATE_TOOL = ("'state_tool' (the reference runtime's update_state tool) is not built in: "
               "remove it, and give the agent a Python tool that writes the state: a function "
               "with a ToolContext parameter calling ctx.set(key, value), listed under tools: "
               "(see the porting page)")


def refusals(data: dict[str, Any]) -> dict[tuple[Any, ...], str]:
    """The reference runtime's settings promptui refuses, each with what to write instead (the
    manifest's place -> the message); they replace the generic 'unknown key' errors."""
    found: dict[tuple[Any, ...], str] = {}
    config = data.get("config")
    for where, section in ((("context",), data.get("context")),
                           (("config", "context"), config.get("context")
                            if isinstance(config, dict) else None)):
        if isinstance(section, dict) and "state_tool" in section:
            found[(*where, "state_tool")] = _STATE_TOOL
    return found


def porting_notes(data: dict[str, Any], config: ProcessConfig, note: Note) -> None:
    """Each reference spelling in ``data`` (the manifest, as read) that ``config`` (what it
    loaded to) holds under promptui's name, and each reading worth knowing."""
    triggers = data.get("triggers")
    for index, trigger in enumerate(triggers if isinstance(triggers, list) else []):
        if isinstance(trigger, dict):
            _trigger_notes(index, trigger, note)
    journal = data.get("journal")
    if isinstance(journal, dict) and config.journal.backend == "sqlite":
        _journal_notes(journal, config.journal.path, note)
    _section_notes(data, note)
    memory = data.get("memory")
    if isinstance(memory, dict):
        for alias, canonical in MEMORY_ALIASES.items():
            if alias in memory:
                note(("memory", alias), f"{alias!r} is the reference runtime's spelling of "
                                        f"{canonical!r} (both are accepted)", True)
        if "auto_store" in memory:
            note(("memory", "auto_store"), "auto_store: false is how promptui's memory works "
                                           "(the agent stores with its remember tool)", True)


def _trigger_notes(index: int, trigger: dict[str, Any], note: Note) -> None:
    for alias, canonical in TRIGGER_ALIASES.items():
        if alias in trigger:
            note(("triggers", index, alias),
                 f"{alias!r} is the reference runtime's spelling of {canonical!r}, the name "
                 "promptui's configs and docs use (both are accepted)", True)
    events = trigger.get("watch_events")
    if isinstance(events, list):
        for old in (e for e in WATCH_EVENT_ALIASES if e in events):
            ours = " and ".join(repr(c) for c in WATCH_EVENT_ALIASES[old])
            note(("triggers", index, "watch_events"),
                 f"watch_events {old!r} is the reference runtime's name; promptui reads it as "
                 f"{ours}", False)
    expression = trigger.get("filter_expression")
    if isinstance(expression, str) and expression.strip():
        try:
            names = compile_filter(expression).payload_names
        except FilterError:
            return  # reported as an error
        if names:
            quoted = [repr(n) for n in names]
            listed = quoted[0] if len(quoted) == 1 else \
                f"{', '.join(quoted[:-1])} and {quoted[-1]}"
            example = f"payload.{names[0]}"
            note(("triggers", index, "filter_expression"),
                 f"reads {listed} from the payload (a bare name is a payload key: {names[0]} "
                 f"means {example}); if that is a misspelt name, correct it", False)


def _journal_notes(journal: dict[str, Any], path: str, note: Note) -> None:
    if journal.get("backend") == "file":
        note(("journal", "backend"),
             f"backend 'file' is the reference runtime's journal folder; promptui keeps a "
             f"durable SQLite journal instead, at {path}", False)
        return
    written = journal.get("path")
    if isinstance(written, str) and written != path:
        note(("journal", "path"), f"{written!r} is a folder: the journal is {path}", False)


def _section_notes(data: dict[str, Any], note: Note) -> None:
    config = data.get("config")
    for key in REFERENCE_CONFIG_SECTIONS:
        if isinstance(config, dict) and key in config and key not in data:
            note(("config", key), f"config.{key} is the reference runtime's place; promptui "
                                  f"reads it as the top-level {key}: section", True)
    budget = data.get("budget")
    if isinstance(budget, dict):
        for old, new in BUDGET_ALIASES.items():
            if old in budget:
                note(("budget", old), f"{old!r} is the reference runtime's spelling of {new!r} "
                                      "(both are accepted)", True)
