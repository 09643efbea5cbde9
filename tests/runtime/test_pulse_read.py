"""ControlPlane.pulse: a process's last hour by the minute, read from its journal (so it is
there after a restart and over an attach): runs, failures, run times, tokens and cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_core import AgentRuntime, ProcessConfig, TriggerEvent
from runtime_core.control import LocalControl, RemoteControl
from runtime_core.control.pulse import PulseBuckets, PulseView, percentile
from tests.helpers.polling import wait_for
from tests.helpers.serving import TOKEN, served


def test_buckets_count_runs_failures_and_run_times_by_the_minute() -> None:
    buckets = PulseBuckets("p", window=300, bucket=60)
    now = 6_030.0  # in minute 100
    buckets.run(now - 130, "succeeded", 100.0)
    buckets.run(now - 125, "failed", 300.0)
    buckets.run(now - 5, "succeeded", 50.0)
    buckets.usage(now - 5, 42)
    buckets.run(now - 400, "failed")  # before the window: not shown
    view = buckets.view(now)
    assert view.start == 5760.0 and len(view.runs) == 5
    assert view.runs == [0, 0, 2, 0, 1]
    assert view.failures == [0, 0, 1, 0, 0]
    assert view.p95_ms[2] == 300.0 and view.p50_ms[2] == 100.0
    assert view.tokens[-1] == 42 and not view.cost_recorded
    again = PulseBuckets.from_view(view, window=300)
    assert again.view(now).runs == view.runs


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 0.95) == 0.0
    assert percentile([5.0, 1.0, 3.0], 0.5) == 3.0
    assert percentile([float(n) for n in range(1, 101)], 0.95) == 95.0


def _runtime(journal: Path | None) -> AgentRuntime:
    runtime = AgentRuntime()
    backend = {"backend": "sqlite", "path": str(journal)} if journal else {"backend": "memory"}
    runtime.add_process("worker", ProcessConfig(
        model={"provider": "scripted", "scripts": {"fail": [{"raise": "boom"}]},
               "turns": [{"reply": "done and dusted"}]},
        trigger_delivery={"max_retries": 0}, max_consecutive_failures=100,
        journal={"level": "checkpoint", **backend}))
    return runtime


async def _five_runs(runtime: AgentRuntime) -> None:
    await runtime.start_all()
    process = runtime.get_process("worker")
    for n in range(3):
        await process.inject(TriggerEvent("t", "manual", {"n": n}))
    for n in range(2):
        await process.inject(TriggerEvent("t", "fail", {"n": n}))
    await wait_for(lambda: process.invocation_count == 3 and len(process.dead_letters) == 2,
                   what="three runs done, two dead letters")
    await wait_for(lambda: not process.active_runs(), what="runs done")


def _totals(view: PulseView) -> tuple[int, int, int]:
    return sum(view.runs), sum(view.failures), sum(view.tokens)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "memory"])
async def test_pulse_reads_runs_failures_and_tokens_from_the_journal(
        tmp_path: Path, backend: str) -> None:
    runtime = _runtime(tmp_path / "j.db" if backend == "sqlite" else None)
    try:
        await _five_runs(runtime)
        [view] = await LocalControl(runtime, name="t").pulse()
        runs, failures, tokens = _totals(view)
        assert (view.process, runs, failures) == ("worker", 5, 2)
        assert tokens >= 3  # the scripted model's usage, journaled with each run
        assert len(view.runs) == 60 and not view.cost_recorded
    finally:
        await runtime.shutdown()


@pytest.mark.slow
async def test_pulse_is_there_after_a_restart_and_over_an_attach(tmp_path: Path) -> None:
    journal = tmp_path / "j.db"
    first = _runtime(journal)
    try:
        await _five_runs(first)
        [before] = await LocalControl(first, name="t").pulse("worker")
    finally:
        await first.shutdown()
    second = _runtime(journal)
    try:
        await second.start_all()
        [after] = await LocalControl(second, name="t").pulse("worker")
        assert _totals(after) == _totals(before)
        async with served(second) as url:
            remote = RemoteControl(url, token=TOKEN)
            try:
                [attached] = await remote.pulse("worker", window=3600, bucket=60)
            finally:
                await remote.close()
        assert _totals(attached) == _totals(before)
        assert attached.runs[-5:] == after.runs[-5:]
    finally:
        await second.shutdown()
