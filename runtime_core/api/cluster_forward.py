"""A scale-out node answers for every process: a command or a read of a process another node
runs is forwarded to that node (its owner), and its answer passed back once it is done.

Plain ASGI, inside the Guard (the caller's token and the body size are checked first). For
``/api/v1/processes/{name}[/...]`` of a process the manifests declare but this node does not
run, the same method, path, query and JSON body go to the owner's API with the cluster token
and ``X-Promptui-Forwarded-By``; its status, body, Content-Type, Retry-After and Location come
back unchanged. An inject is not forwarded: ClusterControl puts it into the cluster inbox.

No live owner (between a crash and the takeover) is 503 NO_LIVE_OWNER with Retry-After (the
lease TTL); an owner that cannot be reached 503, one that took the request but did not answer
504 (the command may be done). A forwarded request that finds the process gone from this node
too (ownership moved meanwhile) is 503 with Retry-After, never forwarded again. A process that
is starting on this node is answered here (NOT_OWNER: try again shortly), and so is the status
of one between owners (what its journal last recorded).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any
from urllib.parse import unquote

from runtime_core.api.error_shape import raw_error
from runtime_core.api.guard import ASGIApp, Receive, Scope, Send, replay_body
from runtime_core.cluster.errors import describe
from runtime_core.cluster.forward import FORWARDED_BY, ForwardError, NoLiveOwner
from runtime_core.cluster.host import ClusterHost

__all__ = ["ForwardToOwner"]

log = logging.getLogger("promptui.api")
PROCESS_PATH = re.compile(r"^/api/v1/processes/(?P<name>[^/]+)(?P<rest>/.*)?$")
NOT_FORWARDED = {("POST", "/inject")}  # ClusterControl puts these into the cluster inbox


class ForwardToOwner:
    def __init__(self, app: ASGIApp, *, host: ClusterHost) -> None:
        self.app, self.host = app, host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self._elsewhere(scope)
        if found is None:
            await self.app(scope, receive, send)
            return
        name, rest = found
        host = self.host
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        retry = max(1.0, host.ttl_s)
        if FORWARDED_BY.lower() in headers:  # sent on by another node, but not ours either
            await _answer(send, *raw_error(
                503, "NOT_OWNER", f"{name} does not run on node {host.node_id!r} (it was "
                f"forwarded here by node {headers[FORWARDED_BY.lower()]!r}; ownership is "
                "moving): try again shortly", _retry(retry)))
            return
        body = await _read_body(receive)
        try:
            payload = json.loads(body) if body.strip() else None
        except ValueError:  # not JSON: answered here (422), no need to bother the owner
            await self.app(scope, replay_body(body, receive), send)
            return
        try:
            owner = await host.ingress.owner(host.leases, host.registry, name, host.ttl_s)
        except Exception as exc:
            await _answer(send, *raw_error(
                503, "OWNER_UNKNOWN", f"{name} runs on another node, which cannot be looked "
                f"up now (the cluster's database: {describe(exc)}): try again shortly",
                _retry(retry)))
            return
        if (owner is not None and owner.node_id == host.node_id) or \
                (owner is None and scope["method"] == "GET" and not rest):
            # starting here; or its status between owners: what its journal last recorded
            await self.app(scope, replay_body(body, receive), send)
            return
        path = scope.get("raw_path") or scope["path"].encode()
        target = path.decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        try:
            if owner is None:
                raise NoLiveOwner(name, retry)
            answer = await host.ingress.forward(owner, scope["method"], target, json=payload,
                                                retry_after_s=retry)
        except ForwardError as exc:
            await _answer(send, *raw_error(exc.status, exc.code, exc.message, exc.headers()))
            return
        except Exception as exc:
            await _answer(send, *raw_error(503, "OWNER_UNREACHABLE", f"{name}: forwarding "
                                           f"to its node failed ({describe(exc)})",
                                           _retry(retry)))
            return
        await _answer(send, answer.status, *_encoded(answer.body, answer.headers))

    def _elsewhere(self, scope: Scope) -> tuple[str, str] | None:
        """The process a request is for, when another node runs it (and it is forwarded)."""
        if scope["type"] != "http":
            return None
        found = PROCESS_PATH.match(scope.get("path", ""))
        if found is None:
            return None
        name, rest = unquote(found["name"]), found["rest"] or ""
        if (scope["method"], rest) in NOT_FORWARDED or name not in self.host.manifests:
            return None
        return None if self.host.runs_here(name) is not None else (name, rest)


def _retry(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, round(seconds)))}


def _encoded(body: Any, headers: dict[str, str]) -> tuple[list[tuple[bytes, bytes]], bytes]:
    kept = {k.lower(): v for k, v in headers.items()}
    if body is None:
        data = b""
    elif isinstance(body, str) and "json" not in kept.get("content-type", ""):
        data = body.encode()
        kept.setdefault("content-type", "text/plain; charset=utf-8")
    else:
        data = json.dumps(body, ensure_ascii=False).encode()
        kept["content-type"] = "application/json"
    kept["content-length"] = str(len(data))
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in kept.items()], data


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]],
                  body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
