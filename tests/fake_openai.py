"""A loopback OpenAI-compatible server written for the tests: real HTTP on 127.0.0.1, port 0,
answering each request with the next scripted reply and recording what it was sent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class FakeServer:
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


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    fake = FakeServer()
    srv = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    fake.port = srv.sockets[0].getsockname()[1]
    async with srv:
        yield fake
        srv.close()
        for writer in fake.writers:  # keep-alive clients must not hold the teardown
            writer.transport.abort()
