"""The control plane's ``manifest_text(name)``: a process's configuration now (its live changes
included) as a manifest, the same from LocalControl and over HTTP (GET
/processes/{name}/manifest), credentials never written, and refusals as ControlError."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml

from runtime_core import AgentRuntime, ProcessConfig
from runtime_core.control import ControlError, LocalControl, RemoteControl
from runtime_core.manifest.loader import parse_manifest
from tests.helpers.serving import TOKEN, served

SECRET = "a-scoped-secret-value-0042"


class _ObjectModel:
    name = "mine"

    async def complete(self, request: object) -> object:
        raise NotImplementedError


def _runtime(monkeypatch: pytest.MonkeyPatch) -> AgentRuntime:
    monkeypatch.setenv("PORTING_SECRET", SECRET)
    runtime = AgentRuntime()
    runtime.add_process("worker", ProcessConfig(
        model="echo", instructions="Be brief.",
        triggers=[{"type": "interval", "seconds": 3600}],
        secrets={"enabled": True, "secrets": {"api": "${PORTING_SECRET}"}},
        concurrency=2))
    runtime.add_process("objecty", ProcessConfig(model=_ObjectModel()))
    return runtime


async def test_the_manifest_holds_live_changes_and_loads_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    runtime = _runtime(monkeypatch)
    control = LocalControl(runtime, name="t")
    await control.start_all()
    try:
        process = runtime.get_process("worker")
        added = await control.add_trigger("worker", {"type": "message", "topic": "jobs.*"})
        process.update_instructions("Be briefer.")
        text = await control.manifest_text("worker")
        assert SECRET not in text
        data = yaml.safe_load(text)
        assert data["name"] == "worker" and data["instructions"] == "Be briefer."
        assert data["triggers"] == [{"type": "interval", "seconds": 3600.0},
                                    {"type": "message", "topic": "jobs.*"}]
        assert data["secrets"]["secrets"] == {"api": "${PORTING_SECRET}"}
        assert data["config"] == {"concurrency": 2}
        loaded = parse_manifest(text, tmp_path / "worker.agent").config
        assert [t.type for t in loaded.triggers] == ["interval", "message"]
        await control.remove_trigger("worker", added)
        assert [t["type"] for t in yaml.safe_load(
            await control.manifest_text("worker"))["triggers"]] == ["interval"]
        with pytest.raises(ControlError) as caught:
            await control.manifest_text("objecty")
        assert caught.value.code == "NOT_SAVABLE"
        assert "Python object" in str(caught.value)
    finally:
        await control.close()


@pytest.mark.slow
async def test_over_http_the_same_text_and_the_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = _runtime(monkeypatch)
    async with served(runtime) as url:
        remote = RemoteControl(url, token=TOKEN)
        local = LocalControl(runtime, name="t")
        try:
            await remote.start_all()
            assert await remote.manifest_text("worker") == await local.manifest_text("worker")
            async with httpx.AsyncClient(base_url=url, trust_env=False, headers={
                    "Authorization": f"Bearer {TOKEN}"}) as client:
                answer = await client.get("/api/v1/processes/worker/manifest")
                assert answer.status_code == 200
                assert answer.headers["content-type"].startswith("application/yaml")
                refused = await client.get("/api/v1/processes/objecty/manifest")
                assert (refused.status_code, refused.json()["error"]["code"]) == (
                    409, "NOT_SAVABLE")
                missing = await client.get("/api/v1/processes/nope/manifest")
                assert missing.status_code == 404
                schema = (await client.get("/api/v1/openapi.json")).json()
                route = schema["paths"]["/api/v1/processes/{name}/manifest"]["get"]
                assert "application/yaml" in route["responses"]["200"]["content"]
                assert {"404", "409"} <= set(route["responses"])
            with pytest.raises(ControlError) as caught:
                await remote.manifest_text("objecty")
            assert caught.value.code == "NOT_SAVABLE"
        finally:
            await remote.close()
