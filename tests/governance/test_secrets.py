"""Secret scoping through AgentProcess: tools get the value, nothing else ever does. A planted
secret is searched for in the journal file, the event stream, status and dead letters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime_core import AgentProcess, ProcessConfig, ProcessState, ToolContext, TriggerEvent
from runtime_core.governance.secrets import SecretError
from tests.helpers.polling import wait_for

SECRET = "sk-planted-7f3a9c1e5b2d"


def call_api(ctx: ToolContext) -> str:
    token = ctx.secret("api_key")
    return f"called with token={token}"


def leak_in_error(ctx: ToolContext) -> str:
    raise RuntimeError(f"auth failed for {ctx.secret('api_key')}")


async def test_a_planted_secret_reaches_tools_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANTED_API_KEY", SECRET)
    db = tmp_path / "journal.db"
    config = ProcessConfig(
        model={"provider": "scripted", "turns": [
            {"tool_calls": [{"name": "call_api"}, {"name": "leak_in_error"}]},
            {"reply": "done"}]},
        secrets={"enabled": True, "secrets": {"api_key": "${PLANTED_API_KEY}"}},
        journal={"level": "full", "path": str(db)},
    )
    process = AgentProcess("secretive", config, tools=[call_api, leak_in_error])
    events: list[str] = []
    process.notifier.add_callback(lambda e: events.append(json.dumps(e.to_dict(), default=str)))
    await process.start()
    assert process.status()["active_secrets"] == 1
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: process.invocation_count == 1)
    run = process.recent_runs()[-1]
    assert run.steps[1].result == "called with token=[secret:api_key]"
    assert "[secret:api_key]" in run.steps[2].result
    status = json.dumps(process.status(), default=str)
    await process.close()
    assert process.status().get("active_secrets") == 0  # revoked
    raw = db.read_bytes() + (db.with_name(db.name + "-wal").read_bytes()
                             if db.with_name(db.name + "-wal").exists() else b"")
    assert SECRET.encode() not in raw
    assert b"secret_access" in raw and b"api_key" in raw  # who asked, never the value
    assert not any(SECRET in e for e in events)
    assert SECRET not in status
    assert SECRET not in json.dumps([str(m) for m in process.conversation.messages()])


async def test_a_missing_variable_fails_the_start_clearly(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    process = AgentProcess("p", ProcessConfig(secrets={
        "enabled": True, "secrets": {"db": "${NOT_SET_ANYWHERE}"}}))
    with pytest.raises(SecretError, match="NOT_SET_ANYWHERE"):
        await process.start()
    assert process.state is ProcessState.FAILED


async def test_tools_without_secrets_configured_get_a_clear_error() -> None:
    process = AgentProcess("p", ProcessConfig(model={"provider": "scripted", "turns": [
        {"tool_calls": [{"name": "call_api"}]}, {"reply": "ok"}]}), tools=[call_api])
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: process.invocation_count == 1)
    assert "no secrets are configured" in process.recent_runs()[-1].steps[1].result
    await process.stop()


def test_a_manifest_keeps_secret_references_unresolved_until_start() -> None:
    from runtime_core.manifest.loader import parse_manifest

    manifest = parse_manifest(
        "name: a\nsecrets:\n  enabled: true\n  secrets: {api_key: '${SURELY_UNSET_SECRET_VAR}'}\n",
        Path("a.agent"))
    assert manifest.config.secrets.secrets == {"api_key": "${SURELY_UNSET_SECRET_VAR}"}
