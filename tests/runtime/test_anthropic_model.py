"""The native Anthropic Messages adapter against tests/helpers/models.py (real HTTP on 127.0.0.1,
port 0, checking each request as the API does): tool use through a whole run with usage
journaled, 429 and 529 retried honouring retry-after, errors that say what to set, a timeout, the
string and mapping forms, and a model object given to ProcessConfig."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime_core import AgentProcess, ProcessConfig, ToolContext, TriggerEvent
from runtime_core.agent.anthropic import AnthropicModel, AnthropicSettings
from runtime_core.agent.factory import build_model
from runtime_core.agent.model import ModelError, ModelRequest, ModelTurn
from runtime_core.journal import InMemoryJournal
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import ReadFilter
from tests.helpers.models import FakeAnthropic, fake_anthropic
from tests.helpers.polling import wait_for
from tests.helpers.ports import free_port


@pytest.fixture
async def api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeAnthropic]:
    async with fake_anthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", fake.api_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        yield fake


def request(text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": text}], tools=[], run_id="r",
                        turn=0, event=TriggerEvent("t", "manual", {}))


def model_for(api: FakeAnthropic, waits: list[float] | None = None, **kw: Any) -> AnthropicModel:
    async def sleep(seconds: float) -> None:
        if waits is not None:
            waits.append(seconds)

    return AnthropicModel(AnthropicSettings("claude-test", api.base_url, **kw), sleep=sleep)


def book(ctx: ToolContext, invoice: str) -> str:
    ctx.set("booked", invoice)
    return f"booked {invoice}"


async def test_a_run_with_tool_use_end_to_end(api: FakeAnthropic) -> None:
    api.tool_use("book", {"invoice": "INV-7"}, text="Booking it.")
    api.reply("Booked INV-7.")
    journal = InMemoryJournal()
    process = AgentProcess("books", ProcessConfig(
        model="anthropic:claude-test", instructions="Book invoices.",
        journal={"level": "checkpoint", "backend": "memory"}), tools=[book], journal=journal)
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {"invoice": "INV-7"}))
    await wait_for(lambda: process.invocation_count == 1)
    assert process.context.get("booked") == "INV-7"
    assert process.recent_runs()[-1].reply == "Booked INV-7."
    first, second = api.requests
    assert first["headers"]["x-api-key"] == api.api_key
    assert first["json"]["model"] == "claude-test" and first["json"]["max_tokens"] == 4096
    assert first["json"]["system"] == "Book invoices."
    assert first["json"]["tools"][0]["name"] == "book"
    assert "input_schema" in first["json"]["tools"][0]
    asked, answered = second["json"]["messages"][-2:]
    assert asked["role"] == "assistant"
    assert [b["type"] for b in asked["content"]] == ["text", "tool_use"]
    result = answered["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_01A"
    assert "booked INV-7" in str(result["content"])
    usage = await journal.read(ReadFilter(process="books", entry_type=EntryType.MODEL_USAGE))
    assert [u.data.get("input_tokens") for u in usage] == [20, 12]
    assert [u.data.get("output_tokens") for u in usage] == [7, 3]
    await process.stop()


@pytest.mark.parametrize("status", [429, 529])
async def test_rate_limit_and_overload_are_retried_honouring_retry_after(
        api: FakeAnthropic, status: int) -> None:
    waits: list[float] = []
    kind = "rate_limit_error" if status == 429 else "overloaded_error"
    api.error(status, kind, "slow down", {"retry-after": "2"})
    api.error(status, kind, "still busy")  # no retry-after: the backoff
    api.reply("ok")
    turn = await model_for(api, waits).complete(request())
    assert isinstance(turn, ModelTurn) and turn.reply == "ok"
    assert waits[0] == 2.0 and 0 < waits[1] <= 30
    assert len(api.requests) == 3


async def test_a_storm_gives_up_and_says_so(api: FakeAnthropic) -> None:
    for _ in range(3):
        api.error(529, "overloaded_error", "Overloaded")
    with pytest.raises(ModelError, match=r"HTTP 529 .*overloaded_error: Overloaded.* gave up "
                                         r"after 3 attempts"):
        await model_for(api, [], max_retries=2).complete(request())


async def test_errors_say_what_to_set(api: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
                                      ) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "wrong")
    with pytest.raises(ModelError, match=r"HTTP 401 .*set ANTHROPIC_API_KEY to a valid"):
        await model_for(api).complete(request())
    monkeypatch.setenv("ANTHROPIC_API_KEY", api.api_key)
    api.error(404, "not_found_error", "model: claude-nope")
    with pytest.raises(ModelError, match="model 'claude-test' was not found"):
        await model_for(api).complete(request())
    assert len(api.requests) == 2  # a 4xx is not retried
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY is not set"):
        await model_for(api).complete(request())
    port = free_port()  # a port nobody listens on
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    refused = AnthropicModel(AnthropicSettings("claude-test", f"http://127.0.0.1:{port}"))
    with pytest.raises(ModelError, match=r"cannot connect .*check ANTHROPIC_BASE_URL"):
        await refused.complete(request())


async def test_a_request_the_api_would_refuse_is_never_sent(api: FakeAnthropic) -> None:
    """A bounded history can start with a tool result or hold two user turns in a row; the
    adapter repairs it so the fake (which refuses as the API does) accepts it."""
    api.reply("fine")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "tool", "tool_call_id": "lost", "content": "orphan result"},
        {"role": "user", "content": "one"}, {"role": "user", "content": "two"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c.1", "name": "book", "arguments": {"invoice": "I"}}]},
        {"role": "user", "content": "three"}]
    turn = await model_for(api).complete(ModelRequest(
        messages=messages, tools=[], run_id="r", turn=0, event=TriggerEvent("t", "manual", {})))
    assert turn.reply == "fine"


async def test_no_answer_within_the_timeout(api: FakeAnthropic) -> None:
    api.hang = True
    with pytest.raises(ModelError, match=r"no answer from .* within 0.3 s"):
        await asyncio.wait_for(model_for(api, [], timeout=0.3, max_retries=0)
                               .complete(request()), 5)


def test_the_string_and_mapping_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime_core.manifest.loader import ManifestError, load_manifest

    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://proxy.local:8080/v1")
    model = build_model("anthropic:claude-x")
    assert isinstance(model, AnthropicModel)
    assert model.settings.base_url == "http://proxy.local:8080"  # /v1 is the path's
    manifest = tmp_path / "a.agent"
    manifest.write_text("version: '1.0'\nname: a\nmodel:\n  provider: anthropic\n"
                        "  name: claude-y\n  api_key_env: MY_KEY\n  max_tokens: 512\n"
                        "  base_url: http://127.0.0.1:9\n")
    built = build_model(load_manifest(manifest).config.model)
    assert isinstance(built, AnthropicModel)
    assert (built.settings.model, built.settings.api_key_env, built.settings.max_tokens,
            built.settings.base_url) == ("claude-y", "MY_KEY", 512, "http://127.0.0.1:9")
    manifest.write_text("version: '1.0'\nname: a\nmodel:\n  provider: openai\n"
                        "  name: gpt\n  max_tokens: 512\n")
    with pytest.raises(ManifestError, match="max_tokens applies to provider anthropic"):
        load_manifest(manifest)


class EchoObject:
    """A model object with the model protocol, not a setting a manifest could write."""

    name = "house-model"

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelTurn:
        self.requests.append(request)
        return ModelTurn(reply="from the object")


async def test_process_config_takes_a_model_object() -> None:
    model = EchoObject()
    config = ProcessConfig(model=model, journal={"level": "none"})
    assert config.model is model
    assert config.model_dump(mode="json")["model"] == "<EchoObject object 'house-model'>"
    process = AgentProcess("obj", config)
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: process.invocation_count == 1)
    assert process.recent_runs()[-1].reply == "from the object" and len(model.requests) == 1
    twin = config.model_copy(deep=True)
    assert twin.model is model  # shared, never copied (it may hold connections)
    await process.stop()
    with pytest.raises(ValueError, match="has no name"):
        ProcessConfig(model=type("Nameless", (), {"complete": EchoObject.complete})())
