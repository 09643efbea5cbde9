"""What an MCP server asks back during a tool call: a question for the operator
(``elicitation/create``) or a completion from the process's model (``sampling/createMessage``).

Each link has a :class:`ServerAsks`: it gives the link's ``ClientSession`` its two callbacks
(only those the server's config allows, so a capability turned off is not declared), keeps the
tool calls in flight on the link so a request is tied to the run and step that caused it, and
hands the request, as plain data, to the process's :class:`AskHandler` (runs/server_asks.py),
which parks the run for an operator or asks the model. The SDK's types stay in this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from runtime_core.agent.mcp.elicit_form import FormError, form_fields

if TYPE_CHECKING:
    from mcp import types

    from runtime_core.agent.mcp.config import HttpServerConfig, StdioServerConfig

log = logging.getLogger(__name__)

#: Where a tool call's ``_meta`` carries ``run_id:step`` (tools.IDEMPOTENCY_META).
CALL_KEY_META = "io.promptui/idempotency-key"
_CURRENT: contextvars.ContextVar[CallInFlight | None] = contextvars.ContextVar(
    "promptui_mcp_call", default=None)


class SamplingRefused(RuntimeError):
    """Sampling is not answered (no run, budget used up, the model failed): the server is
    told why, in an error response."""


@dataclass(frozen=True, slots=True)
class CallInFlight:
    """A tool call a server is working on: the run and step it belongs to."""

    server: str
    tool: str
    run_id: str
    step: int


@dataclass(frozen=True, slots=True)
class Elicitation:
    """A server's question: ``mode`` "form" (``schema`` is the requested schema) or "url"
    (the operator is asked to open ``url``)."""

    server: str
    call: CallInFlight
    message: str
    schema: dict[str, Any]
    timeout: float
    mode: str = "form"
    url: str = ""


@dataclass(frozen=True, slots=True)
class ElicitationAnswer:
    action: str  # accept, decline, cancel
    content: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Sampling:
    """A server's request for a completion: its messages as the runtime's ``role``/``content``
    dicts, its system prompt and token limit."""

    server: str
    call: CallInFlight
    messages: list[dict[str, Any]]
    system_prompt: str | None
    max_tokens: int
    stop_sequences: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SamplingReply:
    text: str
    model: str
    stop_reason: str = "endTurn"


class AskHandler(Protocol):
    """The process's side: answers both kinds of request (set on each link at start)."""

    async def elicit(self, ask: Elicitation) -> ElicitationAnswer: ...

    async def sample(self, ask: Sampling) -> SamplingReply: ...

    def server_gone(self, server: str, reason: str) -> None:
        """``server``'s connection ended (``reason``) while questions of it wait: they are
        about to be cut off (their requests cancelled), by the server's end, not this side's."""
        ...


def _call_of(server: str, tool: str, meta: Mapping[str, Any]) -> CallInFlight | None:
    key = meta.get(CALL_KEY_META)
    if not isinstance(key, str) or ":" not in key:
        return None
    run_id, _, step = key.rpartition(":")
    return CallInFlight(server, tool, run_id, int(step) if step.isdigit() else 0)


def _text_of(content: Any) -> str:
    """A sampling message's content as text; what is not text becomes a placeholder."""
    blocks = content if isinstance(content, list) else [content]
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text))
        elif kind in ("image", "audio"):
            size = len(getattr(block, "data", "") or "") * 3 // 4
            parts.append(f"[{kind}: {getattr(block, 'mime_type', '?')}, {size} bytes]")
        elif kind == "tool_result":
            parts.append(_text_of(getattr(block, "content", [])))
        elif kind:
            parts.append(f"[{kind}]")
    return "\n".join(parts)


@dataclass(eq=False)
class ServerAsks:
    server: str
    elicitation: bool = True
    elicitation_timeout: float = 600.0
    sampling: bool = True
    handler: AskHandler | None = None
    _calls: list[CallInFlight] = field(default_factory=list)
    _deadlines: dict[asyncio.Timeout, float | None] = field(default_factory=dict)
    _asking: int = 0  # questions of this link waiting for the operator now

    @classmethod
    def for_config(cls, server: str, config: StdioServerConfig | HttpServerConfig
                   ) -> ServerAsks:
        return cls(server, elicitation=config.elicitation,
                   elicitation_timeout=config.elicitation_timeout, sampling=config.sampling)

    @property
    def calls(self) -> list[CallInFlight]:
        return list(self._calls)

    @contextlib.contextmanager
    def calling(self, tool: str, meta: Mapping[str, Any]) -> Iterator[None]:
        """Around one ``tools/call``: requests the server makes meanwhile belong to it."""
        call = _call_of(self.server, tool, meta)
        if call is None:
            yield
            return
        self._calls.append(call)
        token = _CURRENT.set(call)
        try:
            yield
        finally:
            _CURRENT.reset(token)
            with contextlib.suppress(ValueError):
                self._calls.remove(call)

    @contextlib.asynccontextmanager
    async def timeout(self, seconds: float | None) -> AsyncIterator[None]:
        """``asyncio.timeout(seconds)`` for a call on this link, except that the time a question
        of the server waits for the operator does not count (its own ``elicitation_timeout``
        bounds that): a call timeout must not cut an operator short."""
        async with asyncio.timeout(seconds) as deadline:
            self._deadlines[deadline] = None
            if self._asking:
                self._hold(deadline)
            try:
                yield
            finally:
                self._deadlines.pop(deadline, None)

    def _hold(self, deadline: asyncio.Timeout) -> None:
        when = deadline.when()
        if when is not None and self._deadlines.get(deadline) is None:
            self._deadlines[deadline] = when - asyncio.get_running_loop().time()
            deadline.reschedule(None)

    def _asked(self, delta: int) -> None:
        """A question starts waiting (+1) or is answered (-1): hold or restart the deadlines."""
        self._asking += delta
        if self._asking and delta > 0:
            for deadline in self._deadlines:
                self._hold(deadline)
        elif not self._asking:
            now = asyncio.get_running_loop().time()
            for deadline, left in self._deadlines.items():
                if left is not None:
                    deadline.reschedule(now + max(0.0, left))
                    self._deadlines[deadline] = None

    def connection_lost(self, reason: str) -> None:
        """The link found its connection broken (the server exited or went away): the questions
        waiting now are cut off by that, and the handler is told before their requests are
        cancelled, so it does not take the cut for a stop of the process."""
        if self._asking and self.handler is not None:
            self.handler.server_gone(self.server, reason)

    def current_call(self) -> CallInFlight | None:
        """The call a request belongs to: the one the request arrived inside (the 2026 wire
        delivers it in the caller's task), else the call in flight on this link; with several
        (a process running runs side by side), the oldest."""
        call = _CURRENT.get()
        if call is not None and call.server == self.server:
            return call
        return self._calls[0] if self._calls else None

    def callbacks(self) -> dict[str, Any]:
        """The ``ClientSession`` keyword arguments for the requests this server may make."""
        wanted: dict[str, Any] = {}
        if self.elicitation:
            wanted["elicitation_callback"] = self._on_elicit
        if self.sampling:
            from mcp import types

            wanted["sampling_callback"] = self._on_sample
            wanted["sampling_capabilities"] = types.SamplingCapability()
        return wanted

    async def _on_elicit(self, context: Any, params: types.ElicitRequestParams
                         ) -> types.ElicitResult | types.ErrorData:
        from mcp import types

        call = self.current_call()
        if call is None or self.handler is None:
            log.warning("MCP server %s asked a question outside a tool call of a run: "
                        "cancelled", self.server)
            return types.ElicitResult(action="cancel")
        if isinstance(params, types.ElicitRequestURLParams):
            ask = Elicitation(self.server, call, params.message, {},
                              self.elicitation_timeout, mode="url", url=params.url)
        else:
            schema = dict(params.requested_schema)
            try:
                form_fields(schema)
            except FormError as exc:
                return types.ErrorData(code=types.INVALID_PARAMS,
                                       message=f"requestedSchema cannot be shown as a form: {exc}")
            ask = Elicitation(self.server, call, params.message, schema,
                              self.elicitation_timeout)
        self._asked(+1)
        try:
            answer = await self.handler.elicit(ask)
        finally:
            self._asked(-1)
        content = answer.content if answer.action == "accept" and ask.mode == "form" else None
        return types.ElicitResult(action=answer.action,  # type: ignore[arg-type]
                                  content=content)

    async def _on_sample(self, context: Any, params: types.CreateMessageRequestParams
                         ) -> types.CreateMessageResult | types.ErrorData:
        from mcp import types

        call = self.current_call()
        if call is None or self.handler is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=(
                "sampling is answered only during a tool call of a run"))
        messages = [{"role": m.role, "content": _text_of(m.content)} for m in params.messages]
        ask = Sampling(self.server, call, messages, params.system_prompt, params.max_tokens,
                       tuple(params.stop_sequences or ()))
        try:
            reply = await self.handler.sample(ask)
        except SamplingRefused as exc:
            return types.ErrorData(code=types.INVALID_REQUEST, message=str(exc))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=reply.text),
            model=reply.model, stop_reason=reply.stop_reason)


__all__ = ["CALL_KEY_META", "AskHandler", "CallInFlight", "Elicitation", "ElicitationAnswer",
           "Sampling", "SamplingRefused", "SamplingReply", "ServerAsks"]
