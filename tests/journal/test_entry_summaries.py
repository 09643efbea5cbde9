"""One line per journal entry in the timeline and `promptui journal`: a model turn says what it
did even when its entry leaves the reply out (the run's end keeps it)."""

from __future__ import annotations

from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.summary import summarize


def usage(data: dict[str, object]) -> JournalEntry:
    return JournalEntry(process="p", entry_type=EntryType.MODEL_USAGE, data=data, run_id="r")


def test_a_final_turn_whose_reply_is_kept_by_the_run_end_says_it_replied() -> None:
    assert summarize(usage({"step": 3, "turn": 1, "output_tokens": 2})) == \
        "model turn 1: replies (2 tokens)"


def test_a_turn_asking_for_tools_or_keeping_its_reply_says_so() -> None:
    calls = [{"name": "book", "args": {}, "call_id": "c"}]
    assert summarize(usage({"turn": 0, "tool_calls": calls})) == "model turn 0: asks for 1 tool(s)"
    assert summarize(usage({"turn": 2, "reply": "done"})) == "model turn 2: done"
