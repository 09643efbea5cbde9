"""The OpenAI-compatible adapter against a loopback server written for the tests (real HTTP
on 127.0.0.1, port 0): tool calls through a whole run, 429 then success, a 500 storm, malformed
JSON, a timeout, a missing key and a refused connection."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from runtime_core import AgentProcess, ProcessConfig, ToolContext, TriggerEvent
from runtime_core.agent.model import ModelError, ModelRequest
from runtime_core.agent.openai_compat import OpenAICompatibleModel, OpenAISettings
from runtime_core.journal import InMemoryJournal
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import ReadFilter
from tests.helpers.models import FakeOpenAI
from tests.helpers.polling import wait_for
from tests.helpers.ports import free_port


def settings(server: FakeOpenAI, **kw: Any) -> OpenAISettings:
    return OpenAISettings(model="test-model", base_url=f"http://127.0.0.1:{server.port}/v1",
                          api_key_env=None, **kw)


def request(text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": text}], tools=[], run_id="r",
                        turn=0, event=TriggerEvent("t", "manual", {}))


async def no_sleep(_: float) -> None:
    return None


def book(ctx: ToolContext, invoice: str) -> str:
    ctx.set("booked", invoice)
    return f"booked {invoice}"


async def test_a_run_with_tool_calls_end_to_end(server: FakeOpenAI,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.port}/v1")
    server.tool_call("book", {"invoice": "INV-7"})
    server.reply("Booked INV-7.")
    journal = InMemoryJournal()
    process = AgentProcess("books", ProcessConfig(
        model="openai:test-model", instructions="Book invoices.",
        journal={"level": "checkpoint", "backend": "memory"}), tools=[book], journal=journal)
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {"invoice": "INV-7"}))
    await wait_for(lambda: process.invocation_count == 1)
    assert process.context.get("booked") == "INV-7"
    assert process.recent_runs()[-1].reply == "Booked INV-7."
    first, second = server.requests
    assert first["line"] == "POST /v1/chat/completions HTTP/1.1"
    assert first["headers"]["authorization"] == "Bearer sk-test"
    assert first["json"]["model"] == "test-model"
    assert first["json"]["tools"][0]["function"]["name"] == "book"
    assert first["json"]["messages"][0] == {"role": "system", "content": "Book invoices."}
    tool_message = second["json"]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    assert "booked INV-7" in tool_message["content"]
    assert second["json"]["messages"][-2]["tool_calls"][0]["function"]["name"] == "book"
    usage = await journal.read(ReadFilter(process="books", entry_type=EntryType.MODEL_USAGE))
    assert [u.data.get("input_tokens") for u in usage] == [20, 12]
    await process.stop()


async def test_429_then_success_honours_retry_after(server: FakeOpenAI) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    server.answers.append((429, {"Retry-After": "2"}, b'{"error": "slow down"}'))
    server.reply("ok")
    turn = await OpenAICompatibleModel(settings(server), sleep=sleep).complete(request())
    assert turn.reply == "ok" and waits == [2.0] and len(server.requests) == 2


async def test_a_500_storm_exhausts_the_retries(server: FakeOpenAI) -> None:
    for _ in range(4):
        server.answers.append((503, {}, b"busy"))
    model = OpenAICompatibleModel(settings(server, max_retries=3), sleep=no_sleep)
    with pytest.raises(ModelError, match=r"HTTP 503 .* gave up after 4 attempts"):
        await model.complete(request())
    assert len(server.requests) == 4


async def test_malformed_json_and_bad_tool_arguments(server: FakeOpenAI) -> None:
    model = OpenAICompatibleModel(settings(server), sleep=no_sleep)
    server.answers.append((200, {}, b"{not json"))
    with pytest.raises(ModelError, match="malformed JSON"):
        await model.complete(request())
    server.answers.append((200, {}, json.dumps({"choices": [{"message": {"tool_calls": [
        {"id": "c", "function": {"name": "book", "arguments": "{oops"}}]}}]}).encode()))
    with pytest.raises(ModelError, match="malformed arguments for tool 'book'"):
        await model.complete(request())
    server.answers.append((400, {}, b'{"error": {"message": "model not found"}}'))
    with pytest.raises(ModelError, match=r"HTTP 400 .*model not found"):
        await model.complete(request())


async def test_a_timeout_names_the_server(server: FakeOpenAI) -> None:
    server.hang = True
    model = OpenAICompatibleModel(settings(server, timeout=0.3, max_retries=0))
    with pytest.raises(ModelError, match=r"no answer from .* within 0.3 s"):
        await asyncio.wait_for(model.complete(request()), 5)


async def test_a_missing_key_and_a_refused_connection_say_what_to_set(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keyed = OpenAICompatibleModel(OpenAISettings("m", "http://127.0.0.1:9/v1", "OPENAI_API_KEY"))
    with pytest.raises(ModelError, match="OPENAI_API_KEY is not set"):
        await keyed.complete(request())
    port = free_port()  # a port nobody listens on
    refused = OpenAICompatibleModel(OpenAISettings("m", f"http://127.0.0.1:{port}/v1", None,
                                                   label="ollama"))
    with pytest.raises(ModelError, match=r"cannot connect .* Set OLLAMA_HOST"):
        await refused.complete(request())


async def test_a_failing_model_fails_the_run_with_reason_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    process = AgentProcess("p", ProcessConfig(model="openai:gpt-x",
                                              trigger_delivery={"max_retries": 0}))
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: bool(process.recent_runs()))
    run = process.recent_runs()[-1]
    assert run.state.value == "failed" and run.reason == "model"
    assert "OPENAI_API_KEY is not set" in run.error
    await process.stop()


def test_model_strings_are_checked() -> None:
    assert ProcessConfig(model="ollama:llama3.1").model == "ollama:llama3.1"
    with pytest.raises(ValueError, match="'openai:<model>'"):
        ProcessConfig(model="mistral:large")


async def test_the_mapping_form_from_a_manifest(server: FakeOpenAI, tmp_path: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime_core.manifest.loader import load_manifest

    monkeypatch.setenv("LOCAL_LLM_KEY", "local-key")
    manifest = tmp_path / "local.agent"
    manifest.write_text(
        "version: '1.0'\nname: local\nmodel:\n  provider: openai\n  name: qwen2.5\n"
        f"  base_url: http://127.0.0.1:{server.port}/v1\n  api_key_env: LOCAL_LLM_KEY\n"
        "  timeout: 5\n  max_retries: 1\njournal: {level: none}\n")
    config = load_manifest(manifest).config
    server.reply("hello from a local server")
    process = AgentProcess("local", config)
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: process.invocation_count == 1)
    assert process.recent_runs()[-1].reply == "hello from a local server"
    assert server.requests[0]["json"]["model"] == "qwen2.5"
    assert server.requests[0]["headers"]["authorization"] == "Bearer local-key"
    await process.stop()


def test_a_bad_model_mapping_names_the_key(tmp_path: Any) -> None:
    from runtime_core.manifest.loader import ManifestError, load_manifest

    manifest = tmp_path / "bad.agent"
    manifest.write_text("version: '1.0'\nname: bad\nmodel:\n  provider: openai\n"
                        "  name: m\n  base_ur1: http://x\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest(manifest)
    assert any("base_ur1" in str(p) for p in caught.value.problems)
