"""A budget cap never disappears (issue 35): the reference's per-run limits
``max_irreversible_per_run`` and ``max_cost_per_run`` are real caps, ``max_llm_turns_per_run``
is its spelling of ``max_model_calls_per_run``, and a limit the config does not know is an
error even from Python (where another unknown key is only a FutureWarning)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from pydantic import ValidationError

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.governance.config import BudgetConfig
from tests.helpers.polling import wait_for

CALLS: list[str] = []


def act(name: str) -> str:
    CALLS.append(name)
    return f"did {name}"


def make(budget: dict[str, Any]) -> AgentProcess:
    CALLS.clear()
    model = {"provider": "scripted", "turns": [
        {"tool_calls": [{"name": "act", "args": {"name": n}} for n in ("a", "b", "c")]},
        {"reply": "done"}]}
    config = ProcessConfig(model=model, budget={"enabled": True, **budget})
    return AgentProcess("spender", config, tools=[act])


async def run_once(process: AgentProcess) -> Any:
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: len(process.recent_runs()) == 1)
    result = process.recent_runs()[-1]
    await process.stop()
    return result


async def test_max_irreversible_per_run_stops_the_call_past_it() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no FutureWarning: the field is known
        process = make({"max_irreversible_per_run": 2,
                        "tool_costs": {"act": {"irreversible": True}}})
    result = await run_once(process)
    assert CALLS == ["a", "b"]
    refused = [s for s in result.steps if s.kind == "refused"]
    assert len(refused) == 1 and "max_irreversible_per_run reached (limit 2)" in refused[0].result


async def test_max_cost_per_run_counts_the_weights_of_one_run() -> None:
    process = make({"max_cost_per_run": 7, "tool_costs": {"act": {"cost_weight": 3}}})
    await run_once(process)
    assert CALLS == ["a", "b"]  # 3 + 3 fits, a third would make 9 > 7


def test_the_reference_spelling_of_the_model_call_limit() -> None:
    assert BudgetConfig(max_llm_turns_per_run=4).max_model_calls_per_run == 4
    with pytest.raises(ValidationError, match="not both"):
        BudgetConfig(max_llm_turns_per_run=4, max_model_calls_per_run=5)


def test_an_unknown_limit_is_an_error_even_from_python() -> None:
    with pytest.raises(ValidationError, match=r"unknown budget limit\(s\) max_irreversible_per"
                                              r"_week: a limit is never dropped"):
        BudgetConfig(max_irreversible_per_week=1)
    with pytest.warns(FutureWarning, match="colour"):  # not a limit: warned, as the spec says
        BudgetConfig(colour="red")
