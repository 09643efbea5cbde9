"""A suspension by health, budget or an operator is journaled and kept by the next start (issue
36): the process comes back suspended, with the same reason and "since"; a resume journals its
end, so the start after it runs the process. "Resume and watch again" (the spec's
clear_anomalies() then resume()) makes a recurring anomaly pause the process again at once,
where a plain resume leaves the monitor's cooldown in place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime_core import AgentRuntime, ProcessConfig, tool
from runtime_core.control.local import LocalControl
from tests.helpers.polling import wait_for

STUCK_MODEL = {"turns": [{"tool_calls": [{"name": "check", "args": {"service": "queue"}}],
                          "repeat": "forever"}]}


async def check(service: str) -> str:
    return f"{service}: still draining"


def runtime_on(journal: Path, **extra: Any) -> AgentRuntime:
    """A looper like the demo's: stuck on one call, paused by its health monitor."""
    runtime = AgentRuntime()
    runtime.add_process("looper", ProcessConfig(
        model=STUCK_MODEL, run_budget={"max_model_calls": 6}, max_consecutive_failures=1000,
        health={"enabled": True, "stuck_threshold": 3, "on_anomaly": "pause"},
        journal={"level": "checkpoint", "backend": "sqlite", "path": str(journal)}, **extra),
        tools=[tool(check, effect="read")])
    return runtime


async def restarted(journal: Path) -> tuple[AgentRuntime, LocalControl]:
    runtime = runtime_on(journal)
    control = LocalControl(runtime)
    await control.start_all()
    return runtime, control


async def test_an_operators_suspension_survives_a_restart_and_a_resume_ends_it(
        tmp_path: Path) -> None:
    journal = tmp_path / "j.db"
    runtime, control = await restarted(journal)
    await control.suspend("looper")
    [row] = await control.list_processes()
    since = row.suspended_since
    assert (row.state, row.suspend_reason, row.suspended_by) == ("suspended", "operator",
                                                                 "operator")
    assert since is not None and row.suspension_kept
    await runtime.shutdown()

    runtime, control = await restarted(journal)
    [row] = await control.list_processes()
    assert (row.state, row.suspend_reason, row.suspended_by) == ("suspended", "operator",
                                                                 "operator")
    assert row.suspended_since == since  # since when: the first suspension's, not the start's
    status = await control.process_status("looper")
    assert status["suspension"]["since"] == since
    await control.resume("looper")
    await runtime.shutdown()

    runtime, control = await restarted(journal)
    [row] = await control.list_processes()
    assert row.suspend_reason == "" and row.suspended_since is None
    assert row.state == "running"
    await runtime.shutdown()


async def test_a_health_pause_survives_a_restart(tmp_path: Path) -> None:
    journal = tmp_path / "j.db"
    runtime, control = await restarted(journal)
    looper = runtime.get_process("looper")
    await control.inject("looper", {"n": 1})
    await wait_for(lambda: looper.state.value == "suspended", what="the health pause")
    assert looper.suspend_reason == "health"
    since = looper.status()["suspension"]["since"]
    await runtime.shutdown()

    runtime, control = await restarted(journal)
    looper = runtime.get_process("looper")
    assert (looper.state.value, looper.suspend_reason) == ("suspended", "health")
    assert looper.status()["suspension"] == {"by": "health", "reason": "health",
                                             "since": since, "kept_across_restarts": True}
    await control.inject("looper", {"n": 2})  # queued, not run: the process stays paused
    assert looper.status()["queue_size"] == 1 and looper.status()["active_runs"] == 0
    await runtime.shutdown()


async def test_the_specs_manual_suspension_is_not_kept(tmp_path: Path) -> None:
    """process.suspend() with its default reason ("manual") stays the spec's in-memory one."""
    journal = tmp_path / "j.db"
    runtime, _ = await restarted(journal)
    await runtime.get_process("looper").suspend()
    await runtime.shutdown()
    runtime, _ = await restarted(journal)
    assert runtime.get_process("looper").state.value == "running"
    await runtime.shutdown()


async def test_resume_and_watch_again_pauses_a_recurring_anomaly_at_once(
        tmp_path: Path) -> None:
    runtime, control = await restarted(tmp_path / "j.db")
    looper = runtime.get_process("looper")
    await control.inject("looper", {"n": 1})
    await wait_for(lambda: looper.state.value == "suspended", what="the first pause")
    runs = len(looper.recent_runs())

    # A plain resume: the monitor keeps its memory, the same stuck call is in its cooldown.
    await control.resume("looper")
    await control.inject("looper", {"n": 2})
    await wait_for(lambda: len(looper.recent_runs()) == runs + 1, what="the next run")
    assert looper.state.value == "running"
    runs += 1

    await control.suspend("looper")
    await control.resume("looper", watch_again=True)
    await control.inject("looper", {"n": 3})
    await wait_for(lambda: looper.state.value == "suspended", what="the pause after watch again")
    assert looper.suspend_reason == "health"
    assert len(looper.recent_runs()) == runs + 1  # the first stuck run paused it
    await runtime.shutdown()


async def test_watch_again_needs_a_health_monitor(tmp_path: Path) -> None:
    runtime = runtime_on(tmp_path / "j.db", )
    runtime.add_process("plain", ProcessConfig(model={"turns": [{"reply": "ok"}]}))
    control = LocalControl(runtime)
    await control.start_all()
    await control.suspend("plain")
    try:
        await control.resume("plain", watch_again=True)
    except Exception as exc:
        assert "no health monitor" in str(exc)
    else:
        raise AssertionError("watch_again on a process without health monitoring")
    assert runtime.get_process("plain").state.value == "suspended"
    await runtime.shutdown()


async def test_an_operators_start_after_a_stop_runs_the_process_and_ends_the_suspension(
        tmp_path: Path) -> None:
    """A restart of the host keeps a suspension; an operator's own stop then start is a newer
    decision than the pause: the process runs, and the next restart keeps it running."""
    journal = tmp_path / "j.db"
    runtime, control = await restarted(journal)
    await control.suspend("looper")
    await control.stop("looper")
    await control.start("looper")
    [row] = await control.list_processes()
    assert (row.state, row.suspended_since) == ("running", None)
    await runtime.shutdown()

    runtime, control = await restarted(journal)
    [row] = await control.list_processes()
    assert (row.state, row.suspended_since) == ("running", None)
    await runtime.shutdown()
