"""A dead letter keeps the history of its event (issue 36): every failed attempt and every
dead-lettering, with its error and time, newest first, journaled, across restarts and
redeliveries. Redelivered letters that die again say the run's real error, never an empty
one (the flaky-deployer of the README's first five minutes)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from runtime_core import AgentRuntime, ProcessConfig
from runtime_core.control.local import LocalControl
from runtime_core.control.offline import dead_letters as stored_dead_letters
from tests.helpers.polling import wait_for

REFUSED = "deploy target refused the connection"


def runtime_on(journal: Path) -> AgentRuntime:
    """Like the demo's flaky-deployer: every run fails, one retry, two failures in a row fail
    the process."""
    runtime = AgentRuntime()
    runtime.add_process("deployer", ProcessConfig(
        model={"turns": [{"raise": REFUSED}]},
        trigger_delivery={"max_retries": 1, "retry_backoff": 0.01},
        max_consecutive_failures=2, restart_policy="never",
        journal={"level": "checkpoint", "backend": "sqlite", "path": str(journal)}))
    return runtime


async def started(journal: Path) -> tuple[AgentRuntime, LocalControl]:
    runtime = runtime_on(journal)
    control = LocalControl(runtime)
    await control.start_all()
    return runtime, control


async def letters_settled(control: LocalControl, count: int) -> None:
    async def done() -> bool:
        status = await control.process_status("deployer")
        return bool(status["dead_letter_total"] == count and status["queue_size"] == 0
                    and status["pending_retries"] == 0 and status["active_runs"] == 0)
    await wait_for(done, what=f"{count} dead letters, nothing left to run")


async def test_redelivered_letters_keep_their_history_and_their_real_error(
        tmp_path: Path) -> None:
    journal = tmp_path / "j.db"
    runtime, control = await started(journal)
    for n in range(4):
        await control.inject("deployer", {"build": n})
    await letters_settled(control, 4)
    first = await control.dead_letters("deployer")
    assert all(REFUSED in letter.error for letter in first), [letter.error for letter in first]
    await runtime.shutdown()

    runtime, control = await started(journal)  # a restart, then step 2's R: redeliver all
    if runtime.get_process("deployer").state.value == "failed":
        await control.restart("deployer")
    assert await control.redeliver("deployer") == 4
    await letters_settled(control, 4)
    again = {letter.event_id: letter for letter in await control.dead_letters("deployer")}
    for letter in first:
        now = again[letter.event_id]
        assert REFUSED in now.error, now  # never "process failed" with an empty error
        # Newest first, the letter's own dead-lettering on top; the first round is kept.
        assert now.history[0].outcome == now.reason
        assert len(now.history) > len(letter.history)
        assert [(h.outcome, h.at) for h in now.history[-len(letter.history):]] == \
            [(h.outcome, h.at) for h in letter.history]
        times = [datetime.fromisoformat(h.at) for h in now.history]
        assert times == sorted(times, reverse=True)
    # A letter that ran: each attempt's error is there.
    ran = next(x for x in again.values() if x.reason == "retries exhausted")
    assert [h.outcome for h in ran.history[:2]] == ["retries exhausted", "failed, retried"]
    assert all(REFUSED in h.error for h in ran.history[:2])
    whole = await control.dead_letter("deployer", ran.event_id)
    assert whole["history"][0]["error"] == ran.history[0].error
    await runtime.shutdown()

    # What the journal keeps, read with no runtime (promptui dead-letters NAME, offline).
    kept = {letter.event_id: letter for letter in stored_dead_letters(journal, "deployer")}
    assert kept[ran.event_id].history == ran.history
