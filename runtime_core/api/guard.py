"""The gate every request passes before a route runs: the Host header (DNS rebinding), any
browser Origin, the bearer token, read-only mode and the body size. Plain ASGI, so unknown
paths are guarded the same as known ones."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from runtime_core.api.error_shape import raw_error
from runtime_core.http.guard import mark_authenticated
from runtime_core.http.origin import host_name, is_loopback

__all__ = ["DEFAULT_MAX_BODY", "MUTATING", "PUBLIC_PATHS", "Guard", "host_name", "is_loopback"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC_PATHS = frozenset({"/api/v1/health"})
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
DEFAULT_MAX_BODY = 1024 * 1024


class Guard:
    def __init__(self, app: ASGIApp, *, token: str, read_only: bool, loopback_only: bool,
                 max_body: int = DEFAULT_MAX_BODY,
                 also_token: Callable[[], str | None] | None = None) -> None:
        self.app = app
        self.token = token.encode()
        self.also_token = also_token  # a scale-out cluster's shared token, once known
        self.read_only = read_only
        self.loopback_only = loopback_only  # bound to loopback: only loopback Host headers
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await self._answer(send, *refusal)
            return
        if scope.get("path", "") not in PUBLIC_PATHS:  # the token was checked: a known client
            mark_authenticated(scope)
        if scope["method"] in MUTATING:
            body, too_big = await self._read_body(receive, headers)
            if body is None:  # the client left (or was cut off as too slow) mid-body
                return
            if too_big:
                await self._answer(send, *raw_error(
                    413, "BODY_TOO_LARGE", f"the request body is over {self.max_body} bytes; "
                    "send less (a payload is a small JSON object)"))
                return
            receive = replay_body(body, receive)
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]
                 ) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        if self.loopback_only and not is_loopback(host_name(headers.get("host", ""))):
            return raw_error(421, "MISDIRECTED_REQUEST", "this server answers only requests "
                             "addressed to a loopback host (127.0.0.1, localhost, ::1)")
        if "origin" in headers:
            return raw_error(403, "CROSS_ORIGIN_REFUSED", "requests from a web page are "
                             "refused; use the promptui CLI, attach, or a plain HTTP client")
        path = scope.get("path", "")
        if path not in PUBLIC_PATHS and not self._authorized(headers.get("authorization", "")):
            return raw_error(401, "UNAUTHORIZED", "a valid 'Authorization: Bearer <token>' "
                             "header is needed; the token is in the file 'promptui serve' "
                             "printed, or in PROMPTUI_TOKEN", {"WWW-Authenticate": "Bearer"})
        if self.read_only and scope["method"] in MUTATING:
            return raw_error(403, "READ_ONLY", "this server was started with --read-only: "
                             "it only answers reads")
        return None

    def _authorized(self, header: str) -> bool:
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        # latin-1 keeps any header byte as it came, so odd bytes compare as unequal, never fail
        raw = given.strip().encode("latin-1")
        if hmac.compare_digest(raw, self.token):
            return True
        also = self.also_token() if self.also_token is not None else None
        return also is not None and len(also) > 0 and hmac.compare_digest(raw, also.encode())

    async def _read_body(self, receive: Receive, headers: dict[str, str]
                         ) -> tuple[bytes | None, bool]:
        """The whole body; None when the connection ended first (never a partial body)."""
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            return b"", True
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None, False
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return b"", True
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks), False

    @staticmethod
    async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]],
                      body: bytes) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def replay_body(body: bytes, then: Receive) -> Receive:
    """The body already read, then the connection's own messages (its disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await then()

    return receive
