"""Behavioral health monitor, statement by statement against docs behavioral-health.md."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from runtime_core.governance.health import (
    Anomaly,
    AnomalyType,
    EscalationTarget,
    HealthConfig,
    HealthMonitor,
    args_hash,
)


class TinyClock:
    """Injected time: moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 5_000.0
        self.wall = 1_800_000_000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.wall + self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def monitor(clock: TinyClock | None = None, **fields: Any) -> HealthMonitor:
    return HealthMonitor(HealthConfig(enabled=True, **fields), "p1", clock or TinyClock())


async def calls(m: HealthMonitor, seq: str, args: Any = None) -> list[Anomaly | None]:
    return [await m.record_tool_call(name, args) for name in seq]


# -- configuration --------------------------------------------------------------------------


def test_defaults_match_the_table() -> None:
    c = HealthConfig()
    assert (c.enabled, c.stuck_threshold, c.loop_window, c.loop_min_repeats) == (False, 3, 20, 2)
    assert (c.empty_threshold, c.empty_max_chars, c.error_window) == (3, 10, 10)
    assert (c.error_rate_threshold, c.on_anomaly, c.cooldown, c.escalation) == (
        0.5, "log", 300.0, None,
    )


@pytest.mark.parametrize(
    ("name", "bad", "ok"),
    [
        ("stuck_threshold", 1, 2),
        ("loop_window", 3, 4),
        ("loop_min_repeats", 1, 2),
        ("empty_threshold", 1, 2),
        ("empty_max_chars", -1, 0),
        ("error_window", 1, 2),
        ("error_window", 10_001, 10_000),  # windows live in memory: bounded
        ("loop_window", 10**9, 10_000),
        ("error_rate_threshold", 0.0, 1.0),
        ("error_rate_threshold", 1.01, 0.01),
        ("cooldown", -0.1, 0.0),
        ("on_anomaly", "explode", "stop"),
    ],
)
def test_bounds(name: str, bad: Any, ok: Any) -> None:
    assert getattr(HealthConfig(**{name: ok}), name) == ok
    with pytest.raises(ValidationError):
        HealthConfig(**{name: bad})
    c = HealthConfig()
    with pytest.raises(ValidationError):  # assignment is validated too
        setattr(c, name, bad)


def test_all_actions_and_escalation_target() -> None:
    for action in ("log", "pause", "escalate", "stop"):
        assert HealthConfig(on_anomaly=action).on_anomaly == action
    c = HealthConfig(escalation=EscalationTarget(webhook_url="https://hooks.example.com/x"))
    assert c.escalation is not None and c.escalation.webhook_url == "https://hooks.example.com/x"
    c = HealthConfig.from_manifest({"escalation": {"event_type": "ops.alert"}})
    assert c.escalation is not None and c.escalation.event_type == "ops.alert"
    with pytest.raises(ValidationError):
        EscalationTarget(webhook_url="ftp://x")


def test_unknown_key_in_python_warns_and_is_ignored() -> None:
    with pytest.warns(FutureWarning, match=r"stuck_treshold.*valid keys are: enabled"):
        c = HealthConfig(enabled=True, stuck_treshold=5)  # type: ignore[call-arg]
    assert c.stuck_threshold == 3 and "stuck_treshold" not in c.model_dump()
    with pytest.warns(FutureWarning):
        HealthConfig.model_validate({"nope": 1})


def test_unknown_key_in_manifest_is_rejected_naming_key_and_valid_keys() -> None:
    data = {"enabled": True, "stuck_treshold": 5}
    validators: list[Callable[[], HealthConfig]] = [
        lambda: HealthConfig.from_manifest(data),
        lambda: HealthConfig.model_validate(data, context={"strict_keys": True}),
    ]
    for call in validators:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # rejected, not merely warned
            with pytest.raises(ValueError, match=r"stuck_treshold.*valid keys are:.*cooldown"):
                call()
    with pytest.raises(ValueError, match="webhok_url"):
        HealthConfig.from_manifest({"escalation": {"webhok_url": "https://x"}})
    assert HealthConfig.from_manifest({"enabled": True, "cooldown": 1}).cooldown == 1


# -- args hash ------------------------------------------------------------------------------


def test_args_hash_is_stable_and_order_independent() -> None:
    assert args_hash({"a": 1, "b": [1, 2]}) == args_hash({"b": [1, 2], "a": 1})
    assert args_hash({"a": 1}) != args_hash({"a": 2})
    assert len(args_hash({"a": 1})) == 12
    assert args_hash(None) == args_hash({})
    args_hash({1: "x", "y": 2})  # unsortable keys fall back, no exception
    args_hash({"when": object()})


# -- stuck ----------------------------------------------------------------------------------


async def test_stuck_fires_at_threshold_not_before() -> None:
    m = monitor(stuck_threshold=3)
    found = await calls(m, "sss", {"q": "x"})
    assert found[:2] == [None, None]
    a = found[2]
    assert a is not None and a.anomaly_type is AnomalyType.STUCK
    assert a.details == {"tool_name": "s", "consecutive_count": 3}
    assert a.description == (
        "Agent stuck: tool 's' called 3 times consecutively with identical arguments"
    )


@pytest.mark.parametrize("threshold", [2, 3, 5])
async def test_stuck_threshold_boundary(threshold: int) -> None:
    m = monitor(stuck_threshold=threshold)
    found = await calls(m, "s" * threshold)
    assert all(f is None for f in found[:-1]) and found[-1] is not None


async def test_different_args_or_interruption_is_not_stuck() -> None:
    m = monitor(stuck_threshold=3)
    for q in range(5):
        assert await m.record_tool_call("s", {"q": q}) is None
    m.begin_invocation()
    assert await calls(m, "ss") == [None, None]
    assert await m.record_tool_call("t") is None
    assert await calls(m, "ss") == [None, None]


async def test_stuck_is_per_run_cron_tick_agent_is_fine() -> None:
    m = monitor(stuck_threshold=3)
    for _ in range(10):  # same queue check once per run
        m.begin_invocation()
        assert await m.record_tool_call("check_queue", {"q": "jobs"}) is None
    m.begin_invocation()
    assert await calls(m, "ss") == [None, None]
    m.begin_invocation()
    assert await m.record_tool_call("s") is None  # history fresh: not the 3rd in a row


# -- loop -----------------------------------------------------------------------------------


async def test_loop_search_read_analyze() -> None:
    m = monitor()
    seq = ["search", "read", "analyze"] * 2
    found = [await m.record_tool_call(n, {"q": 1}) for n in seq]
    assert found[:5] == [None] * 5
    a = found[5]
    assert a is not None and a.anomaly_type is AnomalyType.LOOP
    assert a.details == {
        "pattern": ["search", "read", "analyze"], "repeat_count": 2, "pattern_length": 3,
    }


async def test_loop_min_repeats() -> None:
    m = monitor(loop_min_repeats=3)
    found = await calls(m, "ababab")
    assert found[:5] == [None] * 5
    assert found[5] is not None and found[5].details["repeat_count"] == 3


async def test_loop_must_fit_in_window() -> None:
    # Pattern of 3 repeated twice needs 6 calls: not found with loop_window=5, found with 6.
    m5 = monitor(loop_window=5)
    assert await calls(m5, "abcabc") == [None] * 6
    m6 = monitor(loop_window=6)
    assert (await calls(m6, "abcabc"))[-1] is not None


async def test_loop_window_minimum_is_four() -> None:
    with pytest.raises(ValidationError):
        HealthConfig(loop_window=3)
    m = monitor(loop_window=4)
    found = await calls(m, "abab")
    assert found[-1] is not None and found[-1].details["pattern_length"] == 2


async def test_loop_needs_same_args_and_is_not_stuck() -> None:
    m = monitor()
    for i in range(6):
        assert await m.record_tool_call("ab"[i % 2], {"page": i}) is None  # progress, no loop
    m2 = monitor(stuck_threshold=10)
    assert await calls(m2, "aaaa") == [None] * 4  # a constant block is stuck's business


async def test_loop_history_is_per_run() -> None:
    m = monitor()
    await calls(m, "ab")
    m.begin_invocation()
    assert await calls(m, "ab") == [None, None]
    assert m.tool_history == [("a", args_hash(None)), ("b", args_hash(None))]


# -- empty responses ------------------------------------------------------------------------


async def test_empty_boundary_ten_vs_eleven_chars() -> None:
    m = monitor()
    assert await m.record_response("0123456789") is None
    assert await m.record_response("  0123456789\n") is None  # stripped: 10 chars
    a = await m.record_response("ok")
    assert a is not None and a.anomaly_type is AnomalyType.EMPTY_RESPONSE
    assert a.details == {"consecutive_count": 3, "max_chars": 10, "lengths": [10, 10, 2]}
    m2 = monitor()
    for _ in range(5):
        assert await m2.record_response("01234567890") is None  # 11 chars


async def test_empty_max_chars_zero_counts_only_blank() -> None:
    m = monitor(empty_max_chars=0, cooldown=0)
    for _ in range(4):
        assert await m.record_response("k") is None
    assert await m.record_response("") is None
    assert await m.record_response(" \n") is None
    assert await m.record_response("\t") is not None


async def test_empty_needs_consecutive_and_carries_over_runs() -> None:
    m = monitor(empty_threshold=3)
    await m.record_response("")
    await m.record_response("")
    assert await m.record_response("a real answer here") is None
    await m.record_response("")
    m.begin_invocation()  # reply lengths carry over between runs
    await m.record_response("")
    m.begin_invocation()
    assert await m.record_response("") is not None


async def test_tool_results_are_not_replies() -> None:
    m = monitor()
    for _ in range(5):  # a tool returning [] is a tool call, not a reply
        await m.record_tool_call("poll_queue", {"n": _})
    assert m.anomalies == []


# -- error rate -----------------------------------------------------------------------------


async def test_error_rate_silent_until_window_full() -> None:
    m = monitor(error_window=10)
    for _ in range(9):
        assert await m.record_error() is None  # 100 % but only 9 of 10
    a = await m.record_error()
    assert a is not None and a.anomaly_type is AnomalyType.HIGH_ERROR_RATE
    assert a.details == {"error_rate": 1.0, "error_count": 10, "window_size": 10, "threshold": 0.5}


@pytest.mark.parametrize(("failures", "fires"), [(4, False), (5, True), (6, True)])
async def test_error_rate_at_threshold(failures: int, fires: bool) -> None:
    m = monitor(error_window=10, error_rate_threshold=0.5)
    for _ in range(10 - failures):
        await m.record_success()
    found = [await m.record_error() for _ in range(failures)]
    assert (found[-1] is not None) is fires


async def test_error_rate_threshold_point_three() -> None:
    m = monitor(error_window=10, error_rate_threshold=0.3)
    for _ in range(8):
        await m.record_success()
    assert await m.record_error() is None
    for _ in range(7):
        await m.record_success()
    await m.record_error()
    a = await m.record_error()  # 3 of the last 10
    assert a is not None and a.details["error_rate"] == 0.3


async def test_outcomes_carry_over_runs_and_window_slides() -> None:
    m = monitor(error_window=4)
    for _ in range(3):
        m.begin_invocation()
        await m.record_error()
    m.begin_invocation()
    assert await m.record_error() is not None


# -- recovery -------------------------------------------------------------------------------


async def test_record_success_signals_recovery_once() -> None:
    m = monitor()
    assert await m.record_success() is False  # nothing to recover from
    await calls(m, "sss")
    assert await m.record_success() is True  # same run that got stuck, finishing cleanly
    assert await m.record_success() is False
    clock = TinyClock()
    m2 = monitor(clock, error_window=2)
    await m2.record_error()
    await m2.record_error()
    assert await m2.record_success() is True
    assert await m2.record_success() is False


async def test_suppressed_repeat_does_not_start_new_incident() -> None:
    m = monitor()
    await calls(m, "sss")
    assert await m.record_success() is True
    m.begin_invocation()
    assert (await calls(m, "sss"))[-1] is None  # within cooldown
    assert await m.record_success() is False


# -- cooldown -------------------------------------------------------------------------------


async def test_cooldown_suppresses_same_stuck_until_elapsed() -> None:
    clock = TinyClock()
    m = monitor(clock, cooldown=300)
    assert (await calls(m, "sss"))[-1] is not None
    assert await calls(m, "ss") == [None, None]  # 4th, 5th: same anomaly
    m.begin_invocation()
    clock.advance(299.9)
    assert (await calls(m, "sss"))[-1] is None  # carries over runs
    clock.advance(0.1)
    assert await m.record_tool_call("s") is not None  # exactly cooldown later: reported
    assert len(m.anomalies) == 2


async def test_different_stuck_call_is_new_anomaly_within_cooldown() -> None:
    m = monitor(cooldown=300)
    assert (await calls(m, "sss", {"q": 1}))[-1] is not None
    assert (await calls(m, "sss", {"q": 2}))[-1] is not None  # same tool, other args
    assert (await calls(m, "ttt", {"q": 1}))[-1] is not None  # same run, other tool
    assert len(m.anomalies) == 3


async def test_loop_identity_ignores_rotation() -> None:
    m = monitor(cooldown=300)
    assert (await calls(m, "abab"))[-1] is not None
    m.begin_invocation()
    assert await calls(m, "baba") == [None] * 4  # B,A is the loop A,B
    m.begin_invocation()
    assert (await calls(m, "acac"))[-1] is not None  # different loop: at once
    m.begin_invocation()
    assert (await calls(m, "abcabc"))[-1] is not None
    m.begin_invocation()
    assert await calls(m, "cabcab") == [None] * 6
    assert [a.anomaly_type for a in m.anomalies] == [AnomalyType.LOOP] * 3


async def test_loop_continuing_reported_every_call_with_cooldown_zero() -> None:
    m = monitor(cooldown=0)
    found = await calls(m, "ababab")
    assert [f is not None for f in found] == [False, False, False, True, True, True]
    assert [f.details["repeat_count"] for f in found[3:] if f] == [2, 2, 3]


async def test_guard_with_cooldown_zero_blocks_every_repeat() -> None:
    m = monitor(cooldown=0, stuck_threshold=3)
    found = await calls(m, "sssss")
    assert [f is not None for f in found] == [False, False, True, True, True]
    assert [f.details["consecutive_count"] for f in found if f] == [3, 4, 5]
    m2 = monitor(stuck_threshold=3)  # default cooldown: only the first time
    assert [f is not None for f in await calls(m2, "sssss")] == [0, 0, 1, 0, 0]


async def test_empty_and_error_rate_are_one_signal_each() -> None:
    clock = TinyClock()
    m = monitor(clock, empty_threshold=2, error_window=2)
    assert [await m.record_response("") for _ in range(2)][-1] is not None
    await m.record_response("long enough reply")
    assert [await m.record_response("") for _ in range(2)] == [None, None]
    await m.record_error()
    assert await m.record_error() is not None
    assert await m.record_error() is None
    clock.advance(300)
    assert await m.record_error() is not None
    assert await m.record_response("") is not None


async def test_clear_anomalies_resets_history_counts_and_cooldowns() -> None:
    m = monitor()
    await calls(m, "sss")
    await calls(m, "s")
    assert m.clear_anomalies() == 1
    assert m.anomalies == [] and m.take_new_anomalies() == []
    status = m.health_status()
    assert status["is_healthy"] and status["anomaly_count"] == 0
    assert status["latest_anomaly"] is None
    assert await m.record_tool_call("s") is not None  # ongoing problem reported at once
    assert m.clear_anomalies() == 1
    assert m.clear_anomalies() == 0


# -- history, status, new anomalies ---------------------------------------------------------


async def test_take_new_anomalies_returns_each_once() -> None:
    m = monitor()
    await calls(m, "sss")
    await calls(m, "tt")
    await calls(m, "t")
    new = m.take_new_anomalies()
    assert [a.details["tool_name"] for a in new] == ["s", "t"]
    assert m.take_new_anomalies() == []
    assert len(m.anomalies) == 2


async def test_health_status_shape_and_is_healthy_window() -> None:
    clock = TinyClock()
    m = monitor(clock, cooldown=60)
    assert m.health_status() == {
        "is_healthy": True,
        "anomaly_count": 0,
        "anomalies_by_type": {"stuck": 0, "loop": 0, "empty_response": 0, "high_error_rate": 0},
        "latest_anomaly": None,
    }
    await calls(m, "sss", {"q": "x"})
    status = m.health_status()
    assert status["is_healthy"] is False
    assert status["anomaly_count"] == 1
    assert status["anomalies_by_type"]["stuck"] == 1
    latest = status["latest_anomaly"]
    assert latest["type"] == "stuck" and latest["description"].startswith("Agent stuck")
    assert latest["timestamp"].endswith("+00:00")
    clock.advance(59.9)
    assert m.health_status()["is_healthy"] is False
    clock.advance(0.1)
    assert m.health_status()["is_healthy"] is True
    json.dumps(m.health_status())


async def test_cooldown_zero_is_healthy_right_away() -> None:
    m = monitor(cooldown=0)
    await calls(m, "sss")
    assert m.health_status()["is_healthy"] is True
    assert m.latest_anomaly is not None


async def test_max_anomalies_bound_and_count_counts_all() -> None:
    assert HealthMonitor.MAX_ANOMALIES == 1000
    m = monitor(cooldown=0, stuck_threshold=2)
    await m.record_tool_call("s", {"n": 0})
    for _ in range(1005):
        await m.record_tool_call("s", {"n": 0})
    history = m.anomalies
    assert len(history) == 1000
    assert history[0].details["consecutive_count"] == 7  # the oldest 5 were dropped
    assert history[-1].details["consecutive_count"] == 1006
    assert m.health_status()["anomaly_count"] == 1005
    assert m.health_status()["anomalies_by_type"]["stuck"] == 1005
    assert len(m.take_new_anomalies()) == 1000


async def test_distinct_cooldown_identities_stay_bounded() -> None:
    m = monitor(stuck_threshold=2)
    for n in range(2500):
        await calls(m, "ss", {"n": n})
    assert len(m._last_reported) <= HealthMonitor.MAX_ANOMALIES


# -- live config changes --------------------------------------------------------------------


async def test_apply_config_growing_error_window_keeps_outcomes() -> None:
    m = monitor(error_window=10)
    for _ in range(9):
        await m.record_error()
    m.apply_config(HealthConfig(enabled=True, error_window=20))
    assert await m.record_error() is None  # 10 kept, window of 20 not full yet
    for _ in range(9):
        assert await m.record_error() is None
    assert await m.record_error() is not None  # 20 recorded


async def test_apply_config_shrinking_keeps_most_recent() -> None:
    m = monitor(error_window=10, cooldown=0)
    for _ in range(5):
        await m.record_error()
    for _ in range(4):
        await m.record_success()
    m.apply_config(HealthConfig(enabled=True, error_window=4, cooldown=0))
    # most recent 4 are successes; one more error gives 1 of 4 = 25 %
    assert await m.record_error() is None
    assert await m.record_error() is not None  # 2 of 4


async def test_apply_config_keeps_history_and_cooldowns() -> None:
    m = monitor()
    await calls(m, "sss")
    m.apply_config(HealthConfig(enabled=True, stuck_threshold=4))
    assert len(m.anomalies) == 1
    assert await m.record_tool_call("s") is None  # 4 in a row, but same anomaly in cooldown
    assert m.config.stuck_threshold == 4


async def test_apply_config_resizes_loop_window_keeping_calls() -> None:
    m = monitor(loop_window=5)
    assert await calls(m, "abcab") == [None] * 5  # abc x2 does not fit in 5
    m.apply_config(HealthConfig(enabled=True, loop_window=10))
    assert await m.record_tool_call("c") is not None  # earlier calls were kept


async def test_empty_max_chars_change_applies_to_next_check() -> None:
    m = monitor(empty_max_chars=10)
    await m.record_response("x" * 12)
    await m.record_response("x" * 12)
    m.apply_config(HealthConfig(enabled=True, empty_max_chars=20))
    assert await m.record_response("x" * 12) is not None


async def test_changes_made_directly_on_config_object_are_picked_up() -> None:
    m = monitor(error_window=10)
    for _ in range(4):
        await m.record_error()
    m.config.error_window = 5
    assert await m.record_error() is not None
    m.config.stuck_threshold = 2
    assert (await calls(m, "zz"))[-1] is not None


# -- persistence ----------------------------------------------------------------------------


async def test_to_dict_from_dict_round_trip_preserves_detection_state() -> None:
    clock = TinyClock()
    cfg = HealthConfig(enabled=True, cooldown=100, error_window=4, stuck_threshold=4)
    m = HealthMonitor(cfg, "proc-9", clock)
    await calls(m, "ssss")  # stuck, reported; recovery pending
    await calls(m, "abab")  # loop, reported
    await m.record_tool_call("a")
    await m.record_response("")
    await m.record_response("")
    for _ in range(3):
        await m.record_error()
    clock.advance(40)
    state = json.loads(json.dumps(m.to_dict()))  # JSON-safe

    clock2 = TinyClock()
    clock2.now = 10.0  # new process: different monotonic origin, same wall time
    clock2.wall = clock.time() - 10.0
    r = HealthMonitor.from_dict(state, cfg, clock=clock2)
    assert r.process_id == "proc-9"
    assert r.tool_history == m.tool_history
    assert [a.to_dict() for a in r.anomalies] == [a.to_dict() for a in m.anomalies]
    assert r.health_status() == m.health_status()
    assert [a.to_dict() for a in r.take_new_anomalies()] == [
        a.to_dict() for a in m.take_new_anomalies()
    ]
    # Loop cooldown survived (60 s left), loop continuation state too.
    assert await r.record_tool_call("b") is None
    assert await r.record_response("") is not None  # third empty reply
    assert await r.record_error() is not None  # fourth error fills the window
    assert await r.record_success() is True
    clock2.advance(60)
    r.begin_invocation()
    assert (await calls(r, "abab"))[-1] is not None  # cooldown expired after restore


async def test_from_dict_mid_loop_continues_detection() -> None:
    cfg = HealthConfig(enabled=True, cooldown=0, stuck_threshold=5)
    m = HealthMonitor(cfg, "p", TinyClock())
    await calls(m, "abcab")
    await calls(m, "ss")
    r = HealthMonitor.from_dict(m.to_dict(), cfg, clock=TinyClock())
    found_m = await calls(m, "sss")
    found_r = await calls(r, "sss")
    assert [f and f.details for f in found_m] == [f and f.details for f in found_r]
    assert found_r[-1] is not None and found_r[-1].details["consecutive_count"] == 5


def test_from_dict_rejects_unknown_version() -> None:
    with pytest.raises(ValueError, match="version"):
        HealthMonitor.from_dict({"version": 99}, HealthConfig())


# -- property tests against brute force -----------------------------------------------------


def brute_stuck(run: list[tuple[str, int]], threshold: int) -> dict[str, Any] | None:
    if len(run) < threshold or len(set(run[-threshold:])) != 1:
        return None
    count = 0
    for call in reversed(run):
        if call != run[-1]:
            break
        count += 1
    return {"tool_name": run[-1][0], "consecutive_count": count}


def brute_loop(run: list[tuple[str, int]], window: int, repeats: int) -> dict[str, Any] | None:
    w = run[-window:]
    for p in range(2, len(w) // repeats + 1):
        block = w[-p:]
        if len(set(block)) == 1 or w[-p * repeats:] != block * repeats:
            continue
        k = repeats
        while (k + 1) * p <= len(w) and w[-(k + 1) * p:] == block * (k + 1):
            k += 1
        periodic = p * k
        while periodic < len(w) and w[-periodic - 1] == w[-periodic - 1 + p]:
            periodic += 1
        first = w[-periodic:][:p]
        return {"pattern": [n for n, _ in first], "repeat_count": k, "pattern_length": p}
    return None


call_st = st.tuples(st.sampled_from("abc"), st.integers(0, 1))
runs_st = st.lists(st.lists(call_st, max_size=30), min_size=1, max_size=3)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(runs=runs_st, threshold=st.integers(2, 5), window=st.integers(4, 14),
       repeats=st.integers(2, 4))
def test_stuck_and_loop_match_brute_force(
    runs: list[list[tuple[str, int]]], threshold: int, window: int, repeats: int
) -> None:
    m = monitor(cooldown=0, stuck_threshold=threshold, loop_window=window, loop_min_repeats=repeats)

    async def go() -> None:
        for run in runs:
            m.begin_invocation()
            seen: list[tuple[str, int]] = []
            for name, arg in run:
                seen.append((name, arg))
                found = await m.record_tool_call(name, {"v": arg})
                new = m.take_new_anomalies()
                stuck, loop = brute_stuck(seen, threshold), brute_loop(seen, window, repeats)
                expected = [(AnomalyType.STUCK, stuck), (AnomalyType.LOOP, loop)]
                expected = [(t, d) for t, d in expected if d is not None]
                assert [(a.anomaly_type, a.details) for a in new] == expected
                assert found is (new[0] if new else None)

    asyncio.run(go())


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(runs=runs_st, window=st.integers(4, 10), repeats=st.integers(2, 3),
       new_window=st.integers(4, 10), cut=st.integers(0, 30))
def test_loop_after_resize_matches_brute_force(
    runs: list[list[tuple[str, int]]], window: int, repeats: int, new_window: int, cut: int
) -> None:
    """Resizing mid-run keeps the retained calls; detection matches brute force over them."""
    m = monitor(cooldown=0, stuck_threshold=50, loop_window=window, loop_min_repeats=repeats)
    run = [c for r in runs for c in r]

    async def go() -> None:
        kept: list[tuple[str, int]] = []
        for i, (name, arg) in enumerate(run):
            if i == cut:
                m.apply_config(m.config.model_copy(update={"loop_window": new_window}))
                kept = kept[-max(window, 50):]
            kept.append((name, arg))
            await m.record_tool_call(name, {"v": arg})
            new = [a.details for a in m.take_new_anomalies() if a.anomaly_type is AnomalyType.LOOP]
            current = new_window if i >= cut else window
            expected = brute_loop(kept, current, repeats)
            assert new == ([expected] if expected else [])

    asyncio.run(go())


@settings(max_examples=150, deadline=None)
@given(outcomes=st.lists(st.booleans(), max_size=40), window=st.integers(2, 8),
       threshold=st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.7, 1.0]))
def test_error_rate_matches_brute_force(
    outcomes: list[bool], window: int, threshold: float
) -> None:
    m = monitor(cooldown=0, error_window=window, error_rate_threshold=threshold)

    async def go() -> None:
        for i, failed in enumerate(outcomes):
            if not failed:
                assert await m.record_success() in (True, False)
                continue
            found = await m.record_error()
            last = outcomes[: i + 1][-window:]
            fires = len(outcomes[: i + 1]) >= window and sum(last) / window >= threshold
            assert (found is not None) is fires

    asyncio.run(go())
