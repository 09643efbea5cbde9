"""A native Anthropic Messages API model over httpx (no SDK): tool use, token usage, retries on
429 (rate limited), 529 (overloaded) and other 5xx honouring ``retry-after``, a timeout. Every
failure is a ModelError whose message says what to set or check; the run then fails with reason
"model", never with a traceback on screen. The wire format is in anthropic_wire.py."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from runtime_core.agent.anthropic_wire import error_of, parse_message, to_anthropic, to_tools
from runtime_core.agent.model import ModelError, ModelRequest, ModelTurn
from runtime_core.agent.script import RemoteModelSpec

log = logging.getLogger(__name__)

API_VERSION = "2023-06-01"
DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 4096
RETRY_AFTER_CAP = 30.0  # seconds; a longer retry-after is waited for this long, then retried
KEY_ENV = "ANTHROPIC_API_KEY"
BASE_ENV = "ANTHROPIC_BASE_URL"


@dataclass(frozen=True, slots=True)
class AnthropicSettings:
    model: str
    base_url: str = DEFAULT_BASE_URL  # without /v1: the SDK's ANTHROPIC_BASE_URL convention
    api_key_env: str = KEY_ENV
    timeout: float = 60.0
    max_retries: int = 3
    max_tokens: int = DEFAULT_MAX_TOKENS
    images: bool = True  # send images tools returned inside their tool_result


def _base(url: str) -> str:
    url = url.rstrip("/")
    # Both https://api.anthropic.com and .../v1 are written in the wild; the path adds /v1.
    return url[:-3] if url.endswith("/v1") else url


def settings_for(setting: str) -> AnthropicSettings:
    """``anthropic:<model>``: ANTHROPIC_API_KEY, and ANTHROPIC_BASE_URL for a proxy."""
    provider, _, model = setting.partition(":")
    if provider != "anthropic":
        raise ValueError(f"not an Anthropic model: {setting!r}")
    return AnthropicSettings(model.strip(), _base(os.environ.get(BASE_ENV) or DEFAULT_BASE_URL))


def settings_from_spec(spec: RemoteModelSpec) -> AnthropicSettings:
    """The mapping form: explicit base_url / api_key_env win over the environment."""
    base = settings_for(f"anthropic:{spec.name}")
    return AnthropicSettings(spec.name, _base(spec.base_url) if spec.base_url else base.base_url,
                             spec.api_key_env or KEY_ENV, timeout=spec.timeout,
                             max_retries=spec.max_retries,
                             max_tokens=spec.max_tokens or DEFAULT_MAX_TOKENS,
                             images=spec.images)


class AnthropicModel:
    def __init__(self, settings: AnthropicSettings, *,
                 transport: httpx.AsyncBaseTransport | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.settings = settings
        self.name = f"anthropic:{settings.model}"
        self._transport = transport
        self._sleep = sleep
        self._client: httpx.AsyncClient | None = None

    def _headers(self) -> dict[str, str]:
        env = self.settings.api_key_env
        key = os.environ.get(env)
        if not key:
            raise ModelError(f"{env} is not set: export it with your Anthropic API key (or "
                             "use a scripted: model offline)")
        return {"x-api-key": key, "anthropic-version": API_VERSION,
                "content-type": "application/json"}

    def body(self, request: ModelRequest) -> dict[str, Any]:
        system, messages = to_anthropic(request.messages, images=self.settings.images)
        cap = self.settings.max_tokens  # lowered by a request's own (an MCP server's sampling)
        if request.max_tokens is not None:
            cap = max(1, min(cap, request.max_tokens))
        body: dict[str, Any] = {"model": self.settings.model, "max_tokens": cap,
                                "messages": messages}
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = to_tools(request.tools)
        return body

    async def complete(self, request: ModelRequest) -> ModelTurn:
        s = self.settings
        headers = self._headers()
        body = self.body(request)
        if self._client is None:
            self._client = httpx.AsyncClient(transport=self._transport, timeout=s.timeout)
        url = f"{s.base_url}/v1/messages"
        last = ""
        for attempt in range(s.max_retries + 1):
            delay = 2.0 ** attempt * 0.5
            try:
                response = await self._client.post(url, json=body, headers=headers)
            except httpx.ConnectError:
                raise ModelError(f"cannot connect to {s.base_url} (anthropic); check "
                                 f"{BASE_ENV} or the model's base_url") from None
            except httpx.TimeoutException:
                last = (f"no answer from {s.base_url} within {s.timeout:g} s (raise the model's "
                        "timeout for long replies)")
            except httpx.TransportError as exc:  # a dropped connection: worth another try
                last = f"the connection to {s.base_url} failed: {type(exc).__name__}"
            else:
                status = response.status_code
                if status == 429 or status >= 500:  # 529: overloaded
                    kind, message = error_of(response)
                    last = f"HTTP {status} from {s.base_url} ({kind or 'error'}: {message})"
                    after = _retry_after(response)
                    delay = delay if after is None else after
                elif status >= 400:
                    raise ModelError(self._refusal(response))
                else:
                    return self._turn(response)
            if attempt < s.max_retries:
                await self._sleep(min(delay, RETRY_AFTER_CAP))
        raise ModelError(f"{last}; gave up after {s.max_retries + 1} attempts")

    def _turn(self, response: httpx.Response) -> ModelTurn:
        s = self.settings
        try:
            data = response.json()
        except ValueError:
            raise ModelError(f"{s.base_url} answered with malformed JSON: "
                             f"{response.text[:200]!r}") from None
        turn, stop = parse_message(data, s.max_tokens)
        if stop == "max_tokens":
            log.warning("%s: the reply was cut at max_tokens=%d; raise max_tokens in the model "
                        "mapping for longer replies", self.name, s.max_tokens)
        return turn

    def _refusal(self, response: httpx.Response) -> str:
        """What a 4xx means and what to do about it (these are not retried)."""
        s = self.settings
        status = response.status_code
        kind, message = error_of(response)
        said = f"HTTP {status} from {s.base_url} ({kind or 'error'}: {message})"
        if status == 401:
            return f"{said}; set {s.api_key_env} to a valid Anthropic API key"
        if status == 403:
            return f"{said}; the key in {s.api_key_env} may not use model {s.model!r}"
        if status == 404:
            return (f"{said}; model {s.model!r} was not found: check the model name, or "
                    f"{BASE_ENV} / base_url if you use a proxy")
        if status == 413:
            return f"{said}; the conversation is too large: lower context.conversation_max_messages"
        return said

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: the backoff is good enough
        return None
