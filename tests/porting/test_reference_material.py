"""The reference runtime's own material (issue 35), from tests/porting/reference (made from
promptise 1.10.1, see its README): its 12 example manifests load, or are refused with the
porting note that says what to write; every route of its HTTP API is either served here under
the same method and path, or listed on the porting page with what to call instead."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from runtime_core import AgentRuntime, ProcessConfig
from runtime_core.api.server import create_app
from runtime_core.control import LocalControl
from runtime_core.manifest.loader import ManifestError, load_manifest
from tests.helpers.serving import TOKEN

REFERENCE = Path(__file__).parent / "reference"
MANIFESTS = sorted((REFERENCE / "manifests").glob("*.agent"))
ROUTES = json.loads((REFERENCE / "routes.json").read_text())
PORTING = Path(__file__).parents[2] / "docs" / "porting.md"
#: What the reference's example manifests refer to in the environment.
ENV = {"WEBHOOK_SECRET": "s3cret", "STRIPE_API_KEY": "sk_test", "DB_PASSWORD": "pw"}
#: The one refused, and the words of its porting note.
REFUSED = {"docs-context": ("context.state_tool", "ToolContext parameter calling ctx.set")}


def test_there_are_twelve_manifests_and_39_routes() -> None:
    assert len(MANIFESTS) == 12
    assert len(ROUTES) == 39


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.stem)
def test_each_example_manifest_loads_or_is_refused_with_the_porting_note(
        path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    if path.stem in REFUSED:
        where, fix = REFUSED[path.stem]
        with pytest.raises(ManifestError) as caught:
            load_manifest(path)
        said = " ".join(str(caught.value).split())
        assert f"{path}:" in said and where in said and fix in said, said
        assert len(caught.value.problems) == 1, said  # the note only, no generic error
        return
    manifest = load_manifest(path)
    assert manifest.config is not None


def test_what_the_four_that_failed_now_carry(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    full = load_manifest(REFERENCE / "manifests" / "docs-manifests-full.agent")
    assert [(h.event, h.command) for h in full.config.hooks] == [
        ("session_start", ["./hooks/announce.sh"])]
    assert full.config.inbox.enabled  # config.inbox: the reference's place
    assert any("config.inbox is the reference runtime's place" in n for n in full.notes)
    secrets = load_manifest(REFERENCE / "manifests" / "docs-secrets.agent").config.secrets
    assert secrets.ttls == {"stripe_key": 1800}
    budget = load_manifest(REFERENCE / "manifests" / "docs-budget.agent").config.budget
    assert budget.tool_costs["stripe_charge"].irreversible


def _shape(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def _documented() -> str:
    text = PORTING.read_text()
    start = text.index("## The reference's HTTP API")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def test_every_reference_route_is_served_or_documented() -> None:
    app = create_app(LocalControl(AgentRuntime()), token=TOKEN, start_processes=False)
    served = {(method.upper(), _shape(path)) for path, operations in app.openapi()["paths"].items()
              for method in operations}
    section = _documented()
    missing = []
    for route in ROUTES:
        key = (route["method"], _shape(route["path"]))
        row = f"`{route['method']} {route['path'].removeprefix('/api/v1')}`"
        if key not in served and row not in section:
            missing.append(row)
    assert not missing, f"neither served nor on the porting page: {missing}"
    # and a row on the page for a served route says so (the page is the whole list)
    for route in ROUTES:
        row = f"`{route['method']} {route['path'].removeprefix('/api/v1')}`"
        assert row in section, f"{row} is not listed on the porting page"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    runtime = AgentRuntime()
    runtime.add_process("worker", ProcessConfig(
        model={"provider": "scripted", "turns": [{"reply": "ok"}]},
        context={"initial_state": {"status": "unknown"}}))
    control = LocalControl(runtime)
    app = create_app(control, token=TOKEN, start_processes=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1/api/v1",
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        yield http
    await control.shutdown(0.0)


async def test_the_served_aliases_answer_as_the_reference_does(
        client: httpx.AsyncClient) -> None:
    assert (await client.post("/runtime/start-all")).json() == {"status": "started"}
    status = (await client.get("/runtime/status")).json()
    assert status["processes"]["worker"]["state"] == "running"
    assert (await client.get("/processes/worker/metrics")).json()["state"] == "running"
    context = (await client.get("/processes/worker/context")).json()
    assert context["state"]["status"] == "unknown"
    assert (await client.get("/processes/worker/mission")).json()["mission_enabled"] is False
    assert (await client.get("/processes/worker/inbox")).status_code == 200
    stopped = (await client.post("/runtime/stop-all")).json()
    assert stopped == {"status": "stopped", "stopped": ["worker"]}
    assert (await client.get("/processes/nobody/metrics")).status_code == 404
    unauthorised = await client.get("/runtime/status", headers={"Authorization": "Bearer no"})
    assert unauthorised.status_code == 401  # behind the same token

