"""Completion contracts and run identity, through AgentProcess with the scripted model: a run
succeeds only on the evidence its profile requires, waits with missing_completion_evidence
otherwise, and the operator supplies evidence, sends it back, or fails it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.control import LocalControl
from runtime_core.journal.entry import EntryType
from runtime_core.journal.left_out import identity_of
from runtime_core.journal.provider import ReadFilter
from runtime_core.journal.replay import full_identity
from runtime_core.runs.completion import CompletionEvidence, CompletionVerdict, StaleEvidenceError
from runtime_core.runtime import AgentRuntime
from tests.helpers.completion import CHECK, DISPATCH, PIPELINE_STATUS, TOOLS, config
from tests.helpers.polling import wait_for


async def one_run(process: AgentProcess, payload: Any = None) -> None:
    await process.inject(TriggerEvent("t", "manual", payload or {"branch": "main"}))
    await wait_for(lambda: process.invocation_count + len(process.waiting_runs()) >= 1, 10)


@pytest.fixture(autouse=True)
def pipeline_succeeds() -> Any:
    PIPELINE_STATUS["status"] = "success"
    yield


async def test_an_action_with_its_linked_verification_succeeds() -> None:
    process = AgentProcess("p", config(DISPATCH, CHECK, {"reply": "deployed"}), tools=TOOLS)
    async with process:
        await one_run(process)
        run = process.recent_runs()[-1]
        assert run.state.value == "succeeded"
        action, verification = run.artifacts
        assert (action.kind, action.tool) == ("action", "dispatch_pipeline")
        assert verification.kind == "verification" and verification.links == (action.artifact_id,)
        # The verification was written in the same entry as the read's result.
        assert process.journal is not None
        results = await process.journal.read(ReadFilter(process="p",
                                                        entry_type=EntryType.TOOL_RESULT))
        assert results[1].data["tool"] == "check_pipeline"
        assert results[1].data["artifacts"][0]["links"] == [action.artifact_id]


async def test_dispatching_alone_waits_for_evidence_then_evidence_supplied_succeeds() -> None:
    process = AgentProcess("p", config(DISPATCH, {"reply": "dispatched, all good"}), tools=TOOLS)
    async with process:
        await one_run(process)
        (run,) = process.waiting_runs()
        assert run.state.value == "waiting" and run.waiting_reason == "missing_completion_evidence"
        assert process.invocation_count == 0  # not succeeded
        detail = process.waiting_detail(run.run_id)
        assert "has no verification linked to it" in detail["missing"]
        assert detail["reply"] == "dispatched, all good"
        assert detail["latest_action"] == run.artifacts[0].artifact_id
        await process.supply_evidence(run.run_id, {"pipeline": "green", "url": "ci/42"},
                                      note="checked the CI page")
        await wait_for(lambda: process.invocation_count == 1, 10)
        done = process.recent_runs()[-1]
        assert done.run_id == run.run_id and done.state.value == "succeeded"
        assert done.reply == "dispatched, all good"
        kinds = [e.entry_type for e in await process.journal.read(  # type: ignore[union-attr]
            ReadFilter(process="p", run_id=run.run_id))]
        assert kinds.count(EntryType.RUN_WAITING) == 1 and EntryType.EVIDENCE in kinds


async def test_a_failed_verification_keeps_the_run_waiting() -> None:
    PIPELINE_STATUS["status"] = "failed"
    process = AgentProcess("p", config(DISPATCH, CHECK, {"reply": "deployed"}), tools=TOOLS)
    async with process:
        await one_run(process)
        (run,) = process.waiting_runs()
        assert "did not pass" in process.waiting_detail(run.run_id)["missing"]


async def test_stale_evidence_is_refused_and_changes_nothing() -> None:
    # Verified the first dispatch, then dispatched again: the verification is for an earlier
    # action, so the run waits; evidence for the old action is stale.
    process = AgentProcess("p", config(DISPATCH, CHECK, DISPATCH, {"reply": "done"}),
                           tools=TOOLS)
    async with process:
        await one_run(process)
        (run,) = process.waiting_runs()
        first, _, second = run.artifacts
        detail = process.waiting_detail(run.run_id)
        assert "a verification exists, but for an earlier action" in detail["missing"]
        with pytest.raises(StaleEvidenceError, match="latest action is"):
            await process.supply_evidence(run.run_id, "green", links=[first.artifact_id])
        assert process.waiting_runs() == [run]
        await process.supply_evidence(run.run_id, "green", links=[second.artifact_id])
        await wait_for(lambda: process.invocation_count == 1, 10)


async def test_send_back_to_the_model_with_a_note_then_fail_and_never_reopen() -> None:
    process = AgentProcess("p", config(DISPATCH, {"reply": "dispatched"}, {"reply": "still"},
                                       {"reply": "sorry"}), tools=TOOLS)
    async with process:
        await one_run(process)
        (run,) = process.waiting_runs()
        with pytest.raises(ValueError, match="a note is required"):
            await process.return_to_model(run.run_id, "  ")
        await process.return_to_model(run.run_id, "check the pipeline before you say done")
        # The model saw the note and answered again; still no verification: waiting again.
        await wait_for(lambda: process.waiting_runs() != [] and
                       process.waiting_runs()[0].reply == "still", 10)
        await process.fail_waiting_run(run.run_id, "pipeline never verified")
        done = process.recent_runs()[-1]
        assert done.state.value == "failed" and done.reason == "operator"
        assert "pipeline never verified" in done.error
        with pytest.raises(ValueError, match="a finished run is never reopened"):
            await process.supply_evidence(run.run_id, "late")
        assert process.dead_letters == []  # settled by the operator, not dead-lettered


async def test_the_solution_evaluator_wants_a_reply_or_a_declared_artifact() -> None:
    empty = AgentProcess("p", config({"reply": ""}, evaluator="solution"), tools=TOOLS)
    async with empty:
        await one_run(empty)
        (run,) = empty.waiting_runs()
        assert "no solution" in empty.waiting_detail(run.run_id)["missing"]
    declared = AgentProcess("q", config(
        {"tool_calls": [{"name": "write_solution", "args": {"text": "patch"}}]}, {"reply": ""},
        evaluator="solution"), tools=TOOLS)
    async with declared:
        await one_run(declared)
        assert declared.recent_runs()[-1].state.value == "succeeded"


def two_actions(evidence: CompletionEvidence) -> CompletionVerdict:
    count = len(evidence.actions())
    return CompletionVerdict(count >= 2, f"{count} of 2 actions")


async def test_a_user_evaluator_by_import_path() -> None:
    path = "tests.runtime.test_completion:two_actions"
    once = AgentProcess("p", config(DISPATCH, {"reply": "ok"}, evaluator=path), tools=TOOLS)
    async with once:
        await one_run(once)
        (run,) = once.waiting_runs()
        assert once.waiting_detail(run.run_id)["missing"] == "1 of 2 actions"
    twice = AgentProcess("q", config(DISPATCH, DISPATCH, {"reply": "ok"}, evaluator=path),
                         tools=TOOLS)
    async with twice:
        await one_run(twice)
        assert twice.recent_runs()[-1].state.value == "succeeded"


def test_an_unknown_evaluator_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="unknown completion evaluator 'magic'"):
        config(evaluator="magic")


async def test_the_run_identity_is_frozen_at_start_and_journaled() -> None:
    process = AgentProcess("p", config(DISPATCH, CHECK, {"reply": "deployed"},
                                       allowed_tools=["dispatch_pipeline", "check_pipeline"],
                                       run_budget={"max_tool_calls": 5}), tools=TOOLS)
    async with process:
        await one_run(process)
        run = process.recent_runs()[-1]
        identity = run.identity
        assert identity is not None
        assert (identity.profile, identity.version) == ("deployer", "3")
        assert identity.evaluator == "action_with_verification"
        assert identity.policy == {"allowed_tools": ["dispatch_pipeline", "check_pipeline"],
                                   "tools": {"check_pipeline": "read",
                                             "dispatch_pipeline": "write"}}
        assert identity.budget["max_tool_calls"] == 5
        assert '"branch": "main"' in identity.goal and identity.goal.startswith("[Trigger: manual]")
        assert len(identity.config_digest) == 16
        with pytest.raises(dataclasses.FrozenInstanceError):
            identity.goal = "something else"  # type: ignore[misc]
        started = await process.journal.read(  # type: ignore[union-attr]
            ReadFilter(process="p", entry_type=EntryType.RUN_STARTED))
        # The run's part of its identity; the profile once per configuration, by its digest;
        # the goal as its parts (schema 6 on), rendered again on read.
        kept = identity_of(started[0].data, started[0].timestamp, started[0].run_id)
        assert kept == {"config_digest": identity.config_digest, "goal": identity.goal}
        assert "goal" not in started[0].data["identity"]
        profile = await process.journal.read(  # type: ignore[union-attr]
            ReadFilter(process="p", entry_type=EntryType.PROFILE))
        assert [p.data for p in profile] == [
            {k: v for k, v in identity.to_dict().items() if k != "goal"}]
        assert await full_identity(process.journal, "p", kept,
                                   started[0].seq) == identity.to_dict()
        # The model was given exactly the goal the identity froze.
        usage = await process.journal.read(  # type: ignore[union-attr]
            ReadFilter(process="p", entry_type=EntryType.MODEL_USAGE))
        assert any(m.get("content") == identity.goal for m in usage[0].data["prompt"])


async def test_without_a_profile_the_version_is_a_digest_and_any_reply_completes() -> None:
    process = AgentProcess("plain", ProcessConfig(model={"provider": "scripted", "turns": [
        {"reply": ""}]}))
    async with process:
        await one_run(process)
        run = process.recent_runs()[-1]
        assert run.state.value == "succeeded"
        assert run.identity is not None and run.identity.profile == "plain"
        assert run.identity.version == run.identity.config_digest[:12]


async def test_a_wait_survives_a_restart_and_a_changed_config_is_flagged(tmp_path: Path) -> None:
    journal = {"level": "checkpoint", "path": str(tmp_path / "journal.db")}
    first = AgentProcess("p", config(DISPATCH, {"reply": "dispatched"}, journal=journal),
                         tools=TOOLS)
    await first.start()
    await one_run(first)
    (run,) = first.waiting_runs()
    digest = run.identity.config_digest  # type: ignore[union-attr]
    await first.close()

    # Same journal, a changed configuration (other instructions).
    runtime = AgentRuntime()
    changed = config(DISPATCH, {"reply": "dispatched"}, journal=journal,
                     instructions="Deploy carefully.")
    second = runtime.add_process("p", changed, tools=TOOLS)
    await second.start()
    try:
        (again,) = second.waiting_runs()
        assert again.run_id == run.run_id
        assert again.waiting_reason == "missing_completion_evidence"
        assert again.config_changed.startswith(f"{digest} -> ")
        detail = second.waiting_detail(again.run_id)
        assert "has no verification" in detail["missing"] and detail["reply"] == "dispatched"
        view = await LocalControl(runtime).process_detail("p")
        shown = next(r for r in view.runs if r.run_id == run.run_id)
        assert shown.config_changed == again.config_changed
        assert shown.identity["profile"] == "deployer"
        assert second.journal is not None
        await second.journal.flush()  # submitted without waiting: make it durable to read it
        entries = await second.journal.read(
            ReadFilter(process="p", entry_type=EntryType.CONFIG_CHANGED))
        assert entries[0].data["started_under"] == digest
        await second.supply_evidence(again.run_id, "green")
        await wait_for(lambda: second.invocation_count == 1, 10)
        assert second.recent_runs()[-1].state.value == "succeeded"
    finally:
        await runtime.close()
