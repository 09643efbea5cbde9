"""Loopback model services written for the tests: real HTTP on 127.0.0.1, port 0, answering
each request with the next scripted reply and recording what they were sent.

``FakeOpenAI`` speaks the OpenAI-compatible chat completions API. ``FakeAnthropic`` speaks the
Anthropic Messages API and checks each request the way the API does (the path, the headers, the
key, max_tokens, roles that alternate, every tool_use answered by a tool_result first in the next
user turn, no empty text): it answers a 400 invalid_request_error or a 401
authentication_error like the API when one is wrong."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from runtime_core.agent.model import ModelRequest, ModelTurn


# -- OpenAI-compatible ---------------------------------------------------------------------------
@dataclass
class FakeOpenAI:
    """Answers each POST with the next scripted (status, headers, body); records requests."""

    port: int = 0
    answers: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    hang: bool = False
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                headers = {k.lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests.append({"line": lines[0], "headers": headers,
                                      "json": json.loads(body)})
                if self.hang:
                    await asyncio.sleep(30)
                status, extra, payload = self.answers.pop(0)
                head_out = f"HTTP/1.1 {status} X\r\nContent-Length: {len(payload)}\r\n" + "".join(
                    f"{k}: {v}\r\n" for k, v in extra.items()) + "\r\n"
                writer.write(head_out.encode() + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def reply(self, content: str, usage: tuple[int, int] = (12, 3)) -> None:
        self.answers.append((200, {}, json.dumps({"choices": [{"message": {
            "role": "assistant", "content": content}}], "usage": {
            "prompt_tokens": usage[0], "completion_tokens": usage[1]}}).encode()))

    def tool_call(self, name: str, args: dict[str, Any]) -> None:
        self.answers.append((200, {}, json.dumps({"choices": [{"message": {
            "role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}]}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 7}}).encode()))


@asynccontextmanager
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    fake = FakeOpenAI()
    srv = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    fake.port = srv.sockets[0].getsockname()[1]
    async with srv:
        yield fake
        srv.close()
        for writer in fake.writers:  # keep-alive clients must not hold the teardown
            writer.transport.abort()


# -- Anthropic Messages --------------------------------------------------------------------------
Answer = tuple[int, dict[str, str], bytes]


def error_body(kind: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


def message_body(content: list[dict[str, Any]], stop: str, usage: tuple[int, int],
                 model: str = "claude-test") -> bytes:
    return json.dumps({
        "id": "msg_01Test", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}).encode()


def protocol_problem(line: str, headers: dict[str, str], body: Any) -> str | None:
    """What the real API would refuse with 400 invalid_request_error, or None."""
    if not line.startswith("POST /v1/messages "):
        return f"unexpected request line {line!r}"
    if headers.get("anthropic-version") != "2023-06-01":
        return "anthropic-version: header is required"
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return "max_tokens: Field required"
    if "system" in body and not isinstance(body["system"], str | list):
        return "system: Input should be a valid string"
    for i, tool in enumerate(body.get("tools") or []):
        if not tool.get("name") or not isinstance(tool.get("input_schema"), dict):
            return f"tools.{i}: name and input_schema are required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    return _messages_problem(messages)


def _messages_problem(messages: list[Any]) -> str | None:
    asked: list[str] = []  # tool_use ids of the previous assistant turn
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if i == 0 and role != "user":
            return 'messages: first message must use the "user" role'
        if i and messages[i - 1].get("role") == role:
            return (f'messages: roles must alternate between "user" and "assistant", but found '
                    f'multiple "{role}" roles in a row')
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks:
            return f"messages.{i}: content must be a non-empty list or string"
        answered = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if role == "user":
            if set(answered) - set(asked):
                return (f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` "
                        "blocks; each tool_result must have a corresponding tool_use block in "
                        "the previous message")
            if set(asked) - set(answered):
                return (f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                        f"immediately after: {sorted(set(asked) - set(answered))}")
            kinds = [b.get("type") for b in blocks]
            if "tool_result" in kinds[len(answered):]:
                return f"messages.{i}.content: tool_result blocks must come first"
        elif answered:
            return f"messages.{i}: tool_result blocks belong in a user message"
        for b in blocks:
            if b.get("type") == "text" and not str(b.get("text") or "").strip():
                return f"messages.{i}: text content blocks must be non-empty"
        asked = [b["id"] for b in blocks if b.get("type") == "tool_use"] \
            if role == "assistant" else []
    if asked:
        return "messages: the last tool_use ids have no tool_result blocks after them"
    return None


@dataclass
class FakeAnthropic:
    """Answers each valid POST /v1/messages with the next scripted (status, headers, body)."""

    port: int = 0
    api_key: str = "sk-ant-test"
    answers: list[Answer] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    hang: bool = False
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                headers = {k.lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in lines[1:] if line)}
                body = json.loads(await reader.readexactly(int(headers.get("content-length",
                                                                           "0"))))
                self.requests.append({"line": lines[0], "headers": headers, "json": body})
                if self.hang:
                    await asyncio.sleep(30)
                status, extra, payload = self._answer(lines[0], headers, body)
                head_out = (f"HTTP/1.1 {status} X\r\nContent-Length: {len(payload)}\r\n"
                            "Content-Type: application/json\r\n"
                            + "".join(f"{k}: {v}\r\n" for k, v in extra.items()) + "\r\n")
                writer.write(head_out.encode() + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _answer(self, line: str, headers: dict[str, str], body: Any) -> Answer:
        if headers.get("x-api-key") != self.api_key:
            return 401, {}, error_body("authentication_error", "invalid x-api-key")
        problem = protocol_problem(line, headers, body)
        if problem is not None:
            return 400, {}, error_body("invalid_request_error", problem)
        return self.answers.pop(0)

    # -- scripting the answers ------------------------------------------------------------------
    def reply(self, text: str, usage: tuple[int, int] = (12, 3), stop: str = "end_turn") -> None:
        self.answers.append((200, {}, message_body([{"type": "text", "text": text}], stop,
                                                   usage)))

    def tool_use(self, name: str, args: dict[str, Any], call_id: str = "toolu_01A",
                 text: str | None = None, usage: tuple[int, int] = (20, 7)) -> None:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": args})
        self.answers.append((200, {}, message_body(content, "tool_use", usage)))

    def error(self, status: int, kind: str, message: str,
              headers: dict[str, str] | None = None) -> None:
        self.answers.append((status, headers or {}, error_body(kind, message)))


@asynccontextmanager
async def fake_anthropic() -> AsyncIterator[FakeAnthropic]:
    fake = FakeAnthropic()
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    fake.port = server.sockets[0].getsockname()[1]
    async with server:
        yield fake
        server.close()
        for writer in fake.writers:  # keep-alive clients must not hold the teardown
            writer.transport.abort()


class CountingModel:
    """A model that answers "done" and counts how often it was asked."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelTurn:
        self.calls += 1
        return ModelTurn(reply="done")
