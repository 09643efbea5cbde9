"""A model's price (``model.price``, per million tokens): every model call's cost is journaled
with its usage, and Pulse adds it up; without a price no cost is claimed."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from runtime_core import AgentRuntime, ProcessConfig, TriggerEvent
from runtime_core.control import LocalControl
from tests.helpers.polling import wait_for

PRICE = {"input_per_million": 1.0, "output_per_million": 2_000_000.0}  # 2 per output token


async def _one_run(tmp_path: Path, price: dict[str, float] | None) -> LocalControl:
    runtime = AgentRuntime()
    model = {"provider": "scripted", "turns": [{"reply": "x" * 40}],
             **({"price": price} if price else {})}
    runtime.add_process("worker", ProcessConfig(
        model=model, journal={"backend": "sqlite", "path": str(tmp_path / "j.db")}))
    await runtime.start_all()
    process = runtime.get_process("worker")
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: process.invocation_count == 1 and not process.active_runs(),
                   what="the run done")
    return LocalControl(runtime, name="t")


async def test_a_priced_model_journals_each_calls_cost_and_pulse_adds_it_up(
        tmp_path: Path) -> None:
    control = await _one_run(tmp_path, PRICE)
    try:
        for _ in range(100):  # the run's end commits a moment after the run is done
            [view] = await control.pulse("worker")
            if sum(view.runs):
                break
            await asyncio.sleep(0.05)
    finally:
        await control.shutdown(0)  # every entry committed
    # a run without a tool call folds its model usage into its end entry
    with sqlite3.connect(tmp_path / "j.db") as db:  # the entry as any tool reads it
        [(data,)] = db.execute("SELECT data FROM entries WHERE entry_type = 'run_finished'"
                               ).fetchall()
    [usage] = json.loads(data)["started"]["usage"]
    tokens = usage["output_tokens"]
    assert tokens > 0 and usage["cost"] == pytest.approx(2.0 * tokens)
    assert view.cost_recorded and sum(view.cost) == pytest.approx(2.0 * tokens)


async def test_without_a_price_no_cost_is_claimed(tmp_path: Path) -> None:
    control = await _one_run(tmp_path, None)
    try:
        [view] = await control.pulse("worker")
        assert not view.cost_recorded and sum(view.cost) == 0
    finally:
        await control.shutdown(0)


def test_a_price_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="input_per_million"):
        ProcessConfig(model={"provider": "scripted", "turns": [{"reply": "x"}],
                             "price": {"input_per_million": -1}})
