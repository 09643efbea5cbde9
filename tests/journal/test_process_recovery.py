"""Recovery on start through the public API, with one journal shared by two process objects:
the first is abandoned mid-flight (as if killed), the second starts from what was journaled."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime_core import AgentProcess, ProcessConfig, RunState, TriggerEvent
from runtime_core.journal import EntryType, InMemoryJournal, ReadFilter
from tests.helpers.polling import wait_for
from tests.helpers.recovery import Ledger, abandon


def config(*turns: dict[str, Any], **extra: Any) -> ProcessConfig:
    return ProcessConfig(
        model={"provider": "scripted", "turns": list(turns) or [
            {"tool_calls": [{"name": "record", "args": {"item": "$payload.i"}}]},
            {"reply": "done"},
        ]},
        journal={"level": "checkpoint", "backend": "memory"},
        **extra,
    )


def event(i: int) -> TriggerEvent:
    return TriggerEvent("t", "manual", {"i": str(i)}, event_id=f"ev-{i}")


async def test_clean_stop_then_new_object_restores_everything() -> None:
    journal = InMemoryJournal()
    ledger = Ledger()
    first = AgentProcess("p", config(context={"initial_state": {"seed": 1}}), journal=journal,
                         tools=ledger.tools())
    await first.start()
    for i in range(3):
        await first.inject(event(i))
    await wait_for(lambda: first.invocation_count == 3)
    await first.stop()
    second = AgentProcess("p", config(context={"initial_state": {"seed": 1, "count": 99}}),
                          journal=journal, tools=ledger.tools())
    await second.start()
    recovered = second.recovered
    assert recovered is not None
    assert recovered["lifecycle_state"] == "stopped"
    assert recovered["invocation_count"] == 3
    assert recovered["context_keys"] == ["count", "seed"]
    assert recovered["conversation_messages"] == 6
    assert {"entries_replayed", "mission_restored", "budget_restored"} <= set(recovered)
    # recovered keys replace initial_state's; the others stay
    assert second.context.get("count") == 3 and second.context.get("seed") == 1
    assert second.invocation_count == 3
    assert [m["role"] for m in second.conversation.messages()] == ["user", "assistant"] * 3
    assert second.status()["recovered"] == recovered
    await second.stop()


async def test_dead_letters_survive_and_accepted_events_are_requeued_in_order() -> None:
    journal = InMemoryJournal()
    ledger = Ledger()
    first = AgentProcess("p", config(), journal=journal, tools=ledger.tools())
    await first.start()
    await first.suspend()
    for i in range(4):
        assert await first.inject(event(i))
    await first.stop()  # the four queued events become dead letters
    assert len(first.dead_letters) == 4
    second = AgentProcess("p", config(), journal=journal, tools=ledger.tools())
    await second.start()
    assert [d["event"].event_id for d in second.dead_letters] == [f"ev-{i}" for i in range(4)]
    assert {d["reason"] for d in second.dead_letters} == {"process stopped"}
    await second.suspend()
    assert await second.redeliver_dead_letters(["ev-1", "ev-2"]) == 2
    await abandon(second)  # crash with two accepted events queued and two dead letters
    third = AgentProcess("p", config(), journal=journal, tools=ledger.tools())
    await third.start()
    assert third.recovered is not None and third.recovered["requeued_events"] == 2
    assert [d["event"].event_id for d in third.dead_letters] == ["ev-0", "ev-3"]
    await wait_for(lambda: third.invocation_count == 2)
    assert [r.event.event_id for r in third.recent_runs()] == ["ev-1", "ev-2"]
    await third.stop()


async def test_a_run_caught_after_its_tool_result_resumes_without_repeating_it() -> None:
    journal = InMemoryJournal()
    ledger = Ledger()
    turns = (
        {"tool_calls": [{"name": "record", "args": {"item": "a"}}]},
        {"sleep": 30, "reply": "never reached"},
    )
    first = AgentProcess("p", config(*turns), journal=journal, tools=ledger.tools())
    await first.start()
    await first.inject(event(1))
    await wait_for(lambda: len(ledger.writes) == 1)
    await wait_for(lambda: bool(journal_types(journal, EntryType.TOOL_RESULT)))
    await abandon(first)
    resumed_turns = (
        {"tool_calls": [{"name": "record", "args": {"item": "a"}}]},
        {"reply": "finished after the crash"},
    )
    second = AgentProcess("p", config(*resumed_turns), journal=journal, tools=ledger.tools())
    await second.start()
    assert second.recovered is not None and second.recovered["resumed_runs"] == 1
    await wait_for(lambda: second.invocation_count == 1)
    run = second.recent_runs()[-1]
    assert run.reply == "finished after the crash"
    assert len(ledger.writes) == 1  # the completed write was not executed again
    assert second.context.get("count") == 1
    assert run.model_calls == 2 and run.tool_calls == 1
    await second.stop()


def journal_types(journal: InMemoryJournal, entry_type: str) -> list[Any]:
    return [e for e in journal._entries if e.entry_type == entry_type]


async def crash_mid_write(journal: InMemoryJournal, ledger: Ledger) -> AgentProcess:
    ledger.gate = asyncio.Event()  # the write (and the read) hang: the process dies in them
    first = AgentProcess("p", config(), journal=journal, tools=ledger.tools())
    await first.start()
    await first.inject(event(1))
    await wait_for(lambda: bool(journal_types(journal, EntryType.TOOL_INTENT)))
    await abandon(first)
    ledger.gate = None
    second = AgentProcess("p", config(), journal=journal, tools=ledger.tools())
    await second.start()
    return second


async def test_open_write_intent_waits_for_an_operator_and_is_not_dispatched_again() -> None:
    journal = InMemoryJournal()
    ledger = Ledger()
    second = await crash_mid_write(journal, ledger)
    waiting = second.waiting_runs()
    assert len(waiting) == 1
    run = waiting[0]
    assert run.state is RunState.WAITING and run.waiting_reason == "unknown_write_outcome"
    detail = second.waiting_detail(run.run_id)
    assert detail["tool"] == "record" and detail["args"] == {"item": "1"}
    assert detail["idempotency_key"] == f"{run.run_id}:2"
    assert second.status()["waiting_runs"] == 1 and second.status()["queue_size"] == 0
    await asyncio.sleep(0.05)
    assert ledger.writes == []  # never re-dispatched blindly
    await second.stop()


@pytest.mark.parametrize("outcome", ["applied", "not_applied"])
async def test_reconcile_lets_the_run_continue(outcome: str) -> None:
    journal = InMemoryJournal()
    ledger = Ledger()
    seen: list[str] = []

    second = await crash_mid_write(journal, ledger)
    run_id = second.waiting_runs()[0].run_id
    sub = second.notifier.subscribe(kinds=["run.step"])
    await second.reconcile(run_id, outcome, result="recorded 1 (confirmed)",
                           note="checked the ledger", actor="alice")
    await wait_for(lambda: second.invocation_count == 1)
    run = second.recent_runs()[-1]
    assert run.run_id == run_id and run.state is RunState.SUCCEEDED
    assert second.waiting_runs() == []
    entries = await journal.read(ReadFilter(process="p", entry_type=EntryType.RECONCILED))
    assert entries[0].data["outcome"] == outcome and entries[0].data["actor"] == "alice"
    seen = [e.step_kind for e in sub.drain()]  # type: ignore[attr-defined]
    assert seen == ["model"]  # only the final model turn ran; the write was not re-run
    assert ledger.writes == []
    await second.stop()


async def test_reconcile_failed_fails_the_run_and_bad_calls_are_refused() -> None:
    journal = InMemoryJournal()
    second = await crash_mid_write(journal, Ledger())
    run_id = second.waiting_runs()[0].run_id
    with pytest.raises(ValueError, match="outcome must be"):
        await second.reconcile(run_id, "maybe")
    with pytest.raises(KeyError, match="no run 'nope' waiting"):
        await second.reconcile("nope", "applied")
    await second.reconcile(run_id, "failed", note="the remote API returned 500")
    run = second.recent_runs()[-1]
    assert run.state is RunState.FAILED and "returned 500" in run.error
    assert second.dead_letters[-1]["event"].event_id == "ev-1"
    await second.stop()
    third = AgentProcess("p", config(), journal=journal)
    await third.start()
    assert third.waiting_runs() == [] and len(third.dead_letters) == 1
    await third.stop()


async def test_an_open_read_is_recorded_as_interrupted_and_the_run_goes_on() -> None:
    journal = InMemoryJournal()
    ledger = Ledger()
    ledger.gate = asyncio.Event()
    turns = ({"tool_calls": [{"name": "peek", "args": {}}]}, {"reply": "read done"})
    first = AgentProcess("p", config(*turns), journal=journal, tools=ledger.tools())
    await first.start()
    await first.inject(event(1))
    await wait_for(lambda: bool(journal_types(journal, EntryType.TOOL_INTENT)))
    await abandon(first)
    ledger.gate = None
    second = AgentProcess("p", config(*turns), journal=journal, tools=ledger.tools())
    await second.start()
    await wait_for(lambda: second.invocation_count == 1)
    assert second.waiting_runs() == []
    assert len(journal_types(journal, EntryType.TOOL_INTERRUPTED)) == 1
    await second.stop()


async def test_recover_on_start_false_starts_fresh() -> None:
    journal = InMemoryJournal()
    first = AgentProcess("p", config(), journal=journal, tools=Ledger().tools())
    await first.start()
    await first.inject(event(1))
    await wait_for(lambda: first.invocation_count == 1)
    await first.stop()
    fresh_config = config()
    fresh_config.journal.recover_on_start = False
    second = AgentProcess("p", fresh_config, journal=journal, tools=Ledger().tools())
    await second.start()
    assert second.recovered is None and second.invocation_count == 0
    await second.stop()


async def test_full_level_keeps_payloads_and_checkpoint_level_does_not() -> None:
    for level, expect_payload in (("checkpoint", False), ("full", True)):
        journal = InMemoryJournal()
        cfg = config()
        cfg.journal.level = level
        process = AgentProcess("p", cfg, journal=journal, tools=Ledger().tools())
        await process.start()
        await process.inject(event(7))
        await wait_for(lambda p=process: p.invocation_count == 1)  # type: ignore[misc]
        await process.stop()
        accepted = journal_types(journal, EntryType.EVENT_ACCEPTED)[0]
        assert ("payload" in accepted.data) is expect_payload
        # the model turns: their own entries at the audit level, else carried by the
        # intent and the run's end; a read of model_usage gives them all back
        own = journal_types(journal, EntryType.MODEL_USAGE)
        assert len(own) == (2 if expect_payload else 0)
        usage = await journal.read(ReadFilter(process="p", entry_type=EntryType.MODEL_USAGE))
        assert [u.data["turn"] for u in usage] == [0, 1]
        assert ("prompt" in usage[0].data) is expect_payload
        if expect_payload:  # the audit level keeps every turn's reply
            assert all("reply" in u.data for u in usage)
        else:  # a reply only beside tool calls (a final one is the run's), never an empty one
            assert all(u.data.get("tool_calls") and u.data["reply"]
                       for u in usage if "reply" in u.data)


async def test_checkpoints_do_not_copy_the_conversation() -> None:
    journal = InMemoryJournal()
    process = AgentProcess("p", config(), journal=journal, tools=Ledger().tools())
    await process.start()
    for i in range(20):
        await process.inject(event(i))
    await wait_for(lambda: process.invocation_count == 20)
    await process.stop()
    checkpoints = journal_types(journal, EntryType.CHECKPOINT)
    assert len(checkpoints) == 1  # none of the 20 runs reached checkpoint_every; one on stop
    assert all("conversation" not in c.data for c in checkpoints)


async def test_a_checkpoint_follows_every_n_runs_and_recovery_replays_the_tail() -> None:
    journal = InMemoryJournal()
    cfg = config()
    cfg = cfg.model_copy(update={"journal": cfg.journal.model_copy(
        update={"checkpoint_every": 5})})
    process = AgentProcess("p", cfg, journal=journal, tools=Ledger().tools())
    await process.start()
    for i in range(12):
        await process.inject(event(i))
    await wait_for(lambda: process.invocation_count == 12)
    await journal.flush()
    counts = [c.data["invocation_count"]
              for c in journal_types(journal, EntryType.CHECKPOINT)]
    assert counts == [5, 10]
    await abandon(process)  # a crash two runs after the last checkpoint
    again = AgentProcess("p", cfg, journal=journal, tools=Ledger().tools())
    await again.start()
    assert again.invocation_count == 12  # the tail's two run ends, replayed
    assert again.recovered is not None and again.recovered["entries_read"] > 0
    await again.stop()
