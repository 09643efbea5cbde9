"""An OpenAI-compatible chat-completions model over httpx: OpenAI itself, Ollama's /v1
endpoint, vLLM, llama.cpp servers. Tool calling, token usage, retries with backoff on 429 and
5xx (honouring Retry-After), a timeout. Every failure is a ModelError whose message says what to
set or check; the run then fails with reason "model", never with a traceback on screen."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from runtime_core.agent.attachments import IMAGE_TYPES, message_attachments
from runtime_core.agent.model import ModelError, ModelRequest, ModelTurn, ToolCall, Usage
from runtime_core.agent.script import RemoteModelSpec

RETRY_AFTER_CAP = 30.0  # seconds; a server asking for longer fails the turn instead
IMAGE_LIMIT = 20 * 1024 * 1024  # bytes; a larger image stays a placeholder


@dataclass(frozen=True, slots=True)
class OpenAISettings:
    model: str
    base_url: str
    api_key_env: str | None  # None: no key (a local server)
    timeout: float = 60.0
    max_retries: int = 3
    label: str = "openai"
    images: bool = True  # send images tools returned (a model without vision: False)


def settings_for(setting: str) -> OpenAISettings:
    """``openai:<model>`` (OPENAI_API_KEY, OPENAI_BASE_URL) or ``ollama:<model>`` (OLLAMA_HOST,
    default http://127.0.0.1:11434)."""
    provider, _, model = setting.partition(":")
    model = model.strip()
    if provider == "openai":
        base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        return OpenAISettings(model, base.rstrip("/"), "OPENAI_API_KEY", label="openai")
    if provider == "ollama":
        host = os.environ.get("OLLAMA_HOST", "http://127.0.0.1:11434").rstrip("/")
        if not host.startswith(("http://", "https://")):
            host = "http://" + host
        return OpenAISettings(model, host + "/v1", None, label="ollama")
    raise ValueError(f"unknown OpenAI-compatible provider {provider!r}")


def settings_from_spec(spec: RemoteModelSpec) -> OpenAISettings:
    """The mapping form: explicit base_url / api_key_env win over the environment."""
    base = settings_for(f"{spec.provider}:{spec.name}")
    # A server of your own (base_url given) needs no key unless you name its variable.
    key_env = spec.api_key_env or (None if spec.base_url else base.api_key_env)
    return OpenAISettings(spec.name, (spec.base_url or base.base_url).rstrip("/"), key_env,
                          timeout=spec.timeout, max_retries=spec.max_retries,
                          label=spec.provider, images=spec.images)


def _image_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for image in message_attachments(message):
        if image.kind == "image" and image.mime_type in IMAGE_TYPES and \
                image.size <= IMAGE_LIMIT:
            parts.append({"type": "text", "text": f"Image from tool {message.get('name', '')} "
                          f"(call {message.get('tool_call_id', '')}): {image.placeholder()}"})
            parts.append({"type": "image_url", "image_url": {
                "url": f"data:{image.mime_type};base64,{image.data}"}})
    return parts


def to_openai_messages(messages: list[dict[str, Any]], *, images: bool = True
                       ) -> list[dict[str, Any]]:
    """Our conversation format -> chat-completions messages. Tool messages are text only
    there, so the images tools returned follow them in one user message (after the last
    tool message of the turn: nothing may come between a turn's tool messages)."""
    out: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role != "tool" and pending:
            out.append({"role": "user", "content": pending})
            pending = []
        if role == "assistant" and message.get("tool_calls"):
            out.append({"role": "assistant", "content": message.get("content") or None,
                        "tool_calls": [{"id": c.get("id") or f"call_{i}", "type": "function",
                                        "function": {"name": c.get("name"),
                                                     "arguments": json.dumps(c.get("args") or {})}}
                                       for i, c in enumerate(message["tool_calls"])]})
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": message.get("tool_call_id") or "",
                        "content": str(message.get("content") or "")})
            if images:
                pending.extend(_image_parts(message))
        else:
            out.append({"role": role or "user", "content": str(message.get("content") or "")})
    if pending:
        out.append({"role": "user", "content": pending})
    return out


def parse_turn(data: Any) -> ModelTurn:
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise ModelError("the model server's answer has no choices[0].message; is this an "
                         "OpenAI-compatible /chat/completions endpoint?") from None
    calls = []
    for i, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        raw = function.get("arguments") or "{}"
        try:
            args = json.loads(raw) if isinstance(raw, str) else dict(raw)
        except (json.JSONDecodeError, TypeError, ValueError):
            raise ModelError(f"the model sent malformed arguments for tool "
                             f"{function.get('name')!r}: {str(raw)[:200]}") from None
        if not isinstance(args, dict):
            raise ModelError(f"the model sent non-object arguments for {function.get('name')!r}")
        calls.append(ToolCall(str(function.get("name") or ""), args,
                              str(call.get("id") or f"call_{i}")))
    usage = data.get("usage") or {}
    turn_usage = Usage(int(usage.get("prompt_tokens") or 0),
                       int(usage.get("completion_tokens") or 0))
    if calls:
        return ModelTurn(tool_calls=tuple(calls), usage=turn_usage)
    return ModelTurn(reply=str(message.get("content") or ""), usage=turn_usage)


class OpenAICompatibleModel:
    def __init__(self, settings: OpenAISettings, *,
                 transport: httpx.AsyncBaseTransport | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.settings = settings
        self.name = f"{settings.label}:{settings.model}"
        self._transport = transport
        self._sleep = sleep
        self._client: httpx.AsyncClient | None = None

    def _headers(self) -> dict[str, str]:
        env = self.settings.api_key_env
        if env is None:
            return {}
        key = os.environ.get(env)
        if not key:
            raise ModelError(f"{env} is not set: export it (or point OPENAI_BASE_URL at a local "
                             "server, or use an ollama:<model> / scripted: model)")
        return {"Authorization": f"Bearer {key}"}

    async def complete(self, request: ModelRequest) -> ModelTurn:
        s = self.settings
        body: dict[str, Any] = {"model": s.model,
                                "messages": to_openai_messages(request.messages,
                                                               images=s.images)}
        if request.tools:
            body["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in request.tools]
        headers = self._headers()
        if self._client is None:
            self._client = httpx.AsyncClient(transport=self._transport, timeout=s.timeout)
        url = f"{s.base_url}/chat/completions"
        last = ""
        for attempt in range(s.max_retries + 1):
            try:
                response = await self._client.post(url, json=body, headers=headers)
            except httpx.ConnectError:
                raise ModelError(f"cannot connect to {s.base_url} ({s.label}); is the server "
                                 "running? Set " + ("OLLAMA_HOST" if s.label == "ollama"
                                                    else "OPENAI_BASE_URL")
                                 + " to its address") from None
            except httpx.TimeoutException:
                last = f"no answer from {s.base_url} within {s.timeout:g} s"
                delay = 2.0 ** attempt * 0.5
            else:
                if response.status_code == 429 or response.status_code >= 500:
                    last = f"HTTP {response.status_code} from {s.base_url}"
                    delay = _retry_after(response) or 2.0 ** attempt * 0.5
                elif response.status_code >= 400:
                    raise ModelError(f"HTTP {response.status_code} from {s.base_url}: "
                                     f"{_error_text(response)}")
                else:
                    try:
                        data = response.json()
                    except ValueError:
                        raise ModelError(f"{s.base_url} answered with malformed JSON: "
                                         f"{response.text[:200]!r}") from None
                    return parse_turn(data)
            if attempt < s.max_retries:
                await self._sleep(min(delay, RETRY_AFTER_CAP))
        raise ModelError(f"{last}; gave up after {s.max_retries + 1} attempts")

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _error_text(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error)[:300]
        return str(error or response.text)[:300]
    except ValueError:
        return response.text[:300]
