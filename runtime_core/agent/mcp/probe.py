"""What became of one MCP request over streamable HTTP: never sent (the connection was refused),
refused because its session is gone (the server restarted), or answered.

A call whose connection is lost may or may not have taken effect; these two cases are the ones
where it certainly did not, so the call may be sent again (on a new session) even for a write.
The SDK reports both as a bare JSON-RPC error, so the HTTP client looks at each request itself:
the SDK sends a request from the context of the task that made the call (it copies the caller's
contextvars), so a ContextVar set around ``call_tool`` reaches ``send`` for that request only.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx2

SESSION_HEADER = "mcp-session-id"


@dataclass(slots=True)
class RequestProbe:
    """Filled in by the HTTP client while one call's request is sent."""

    not_sent: str = ""  # why the request never reached the server
    session_lost: bool = False  # refused for its session (404, or 400 naming the session)
    answered: bool = False  # the server sent back a response to it (it may have acted)

    @property
    def safe_to_resend(self) -> bool:
        """The server certainly did not act on the request."""
        return (bool(self.not_sent) or self.session_lost) and not self.answered


_PROBE: ContextVar[RequestProbe | None] = ContextVar("mcp_request_probe", default=None)


@contextlib.contextmanager
def probing() -> Iterator[RequestProbe]:
    """Watch the request the current task sends next (a tools/call, a resources/read)."""
    probe = RequestProbe()
    token = _PROBE.set(probe)
    try:
        yield probe
    finally:
        _PROBE.reset(token)


def _is_request(request: httpx2.Request) -> bool:
    """A JSON-RPC request (a method and an id), not a notification or a response we send."""
    if request.method != "POST":
        return False
    try:
        body = json.loads(request.content or b"null")
    except (ValueError, httpx2.RequestNotRead):
        return False
    return isinstance(body, dict) and "method" in body and "id" in body


def _names_session(body: bytes) -> bool:
    """A 400 that says the session is unknown (e.g. the TypeScript SDK's examples answer
    "Bad Request: No valid session ID provided" where the spec asks for 404)."""
    try:
        error = json.loads(body).get("error") or {}
    except (ValueError, AttributeError):
        return False
    return isinstance(error, dict) and "session" in str(error.get("message", "")).lower()


class ProbedClient(httpx2.AsyncClient):
    """An httpx client that tells the calling task what became of its request."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._dead_sessions: set[str] = set()  # the server said it does not know them

    async def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        session = request.headers.get(SESSION_HEADER)
        if request.method == "DELETE" and session in self._dead_sessions:
            # Ending a session the server has forgotten: nothing to say (and no warning).
            return httpx2.Response(204, request=request)
        probe = _PROBE.get()
        if probe is None or not _is_request(request):
            return await super().send(request, **kwargs)
        try:
            response = await super().send(request, **kwargs)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            probe.not_sent = f"connection refused or unreachable ({exc or type(exc).__name__})"
            raise
        if session is not None and response.status_code == 404:
            probe.session_lost = True
        elif session is not None and response.status_code == 400:
            probe.session_lost = _names_session(await response.aread())  # cached for the SDK
        probe.answered = not probe.session_lost
        if probe.session_lost and session is not None:
            self._dead_sessions.add(session)
        return response
