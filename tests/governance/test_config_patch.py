"""Live health changes (PATCH .../health): a JSON merge patch checked as a whole, strict JSON
types, the dotted path of an unknown field, and nothing changed when anything is wrong."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_core import AgentRuntime, ProcessConfig, TriggerEvent
from runtime_core.governance.config_patch import ConfigPatchError, apply_patch
from runtime_core.governance.health import HealthConfig
from tests.helpers.polling import wait_for


def test_a_patch_merges_and_null_goes_back_to_the_default() -> None:
    current = HealthConfig(enabled=True, error_window=12,
                           escalation={"event_type": "ops.alert"})  # type: ignore[arg-type]
    changed = apply_patch(current, {"error_window": 20, "escalation": {"timeout": 5.0}})
    assert changed.error_window == 20 and changed.enabled
    assert changed.escalation is not None
    assert (changed.escalation.event_type, changed.escalation.timeout) == ("ops.alert", 5.0)
    assert apply_patch(changed, {"escalation": None, "error_window": None}).escalation is None
    assert apply_patch(changed, {"error_window": None}).error_window == 10


@pytest.mark.parametrize(("patch", "where"), [
    ({"error_windw": 5}, "error_windw"),
    ({"escalation": {"webhok_url": "https://x"}}, "escalation.webhok_url"),
    ({"enabled": True, "nope": {"deep": 1}}, "nope"),
])
def test_an_unknown_field_is_named_by_its_dotted_path(patch: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigPatchError, match=where) as refused:
        apply_patch(HealthConfig(), patch)
    assert refused.value.code == "UNKNOWN_FIELD"


@pytest.mark.parametrize("patch", [
    {"error_window": "5"},  # strict JSON types: a string is not a number
    {"enabled": 1},  # ... and 1 is not true
    {"error_window": 1},  # below its bound
    {"on_anomaly": "explode"},
    {"error_rate_threshold": 2},
])
def test_a_bad_value_is_invalid_config(patch: dict[str, Any]) -> None:
    with pytest.raises(ConfigPatchError) as refused:
        apply_patch(HealthConfig(), patch)
    assert refused.value.code == "INVALID_CONFIG"
    assert next(iter(patch)) in str(refused.value)


FIELDS = st.sampled_from(["enabled", "error_window", "loop_window", "cooldown", "on_anomaly",
                          "stuck_threshold", "bogus", "escalation"])
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 50), st.floats(-1, 400),
                   st.sampled_from(["log", "pause", "stop", "x", ""]),
                   st.dictionaries(st.sampled_from(["event_type", "timeout", "zz"]),
                                   st.one_of(st.text(max_size=5), st.floats(0, 200))))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(FIELDS, VALUES, max_size=4))
def test_any_patch_is_applied_whole_or_not_at_all(patch: dict[str, Any]) -> None:
    runtime = AgentRuntime()
    process = runtime.add_process("p", ProcessConfig(model={"turns": [{"reply": "ok"}]},
                                                     health={"enabled": True}))
    before = process.config.health
    try:
        after = process.update_health(patch)
    except ConfigPatchError:
        assert process.config.health is before  # nothing changed
        return
    assert process.config.health is after
    for key, value in patch.items():
        if value is None:
            assert getattr(after, key) == HealthConfig.model_fields[key].default
        elif not isinstance(value, dict):
            assert getattr(after, key) == value


async def test_a_live_process_picks_up_windows_and_enabled() -> None:
    runtime = AgentRuntime()
    process = runtime.add_process("p", ProcessConfig(
        model={"provider": "scripted", "scripts": {"fail": [{"raise": "no"}]},
               "turns": [{"reply": "ok"}]},
        trigger_delivery={"max_retries": 0}, max_consecutive_failures=100))
    await process.start()
    try:
        assert process.health_anomalies() is None
        with pytest.raises(ValueError, match="no health monitoring"):
            process.clear_health_anomalies()
        process.update_health({"enabled": True, "error_window": 4, "error_rate_threshold": 0.5,
                               "cooldown": 0})
        for n in range(4):
            await process.inject(TriggerEvent("t", "fail", {"n": n}))
        await wait_for(lambda: bool(process.health_anomalies()), what="high_error_rate")
        anomalies = process.health_anomalies()
        assert anomalies is not None and anomalies[0]["type"] == "high_error_rate"
        assert process.clear_health_anomalies() == len(anomalies)
        process.update_health({"enabled": False})
        assert process.health_anomalies() is None and "health" not in process.status()
    finally:
        await process.stop()
