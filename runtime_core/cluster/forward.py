"""Operator commands sent to any node reach the process's owner, and answer once it has done them.

A node that does not own a process forwards the command to the node that does, over the
cluster's own authenticated HTTP: :func:`owner_of` finds the live owner (a live lease in
``cluster_leases``, held by a node that beats in ``cluster_nodes``: its API ``address``), and
:func:`forward_request` makes the same call there with the cluster token and waits for the
owner's answer, whose status and body are passed back unchanged. No live owner (between a
crash and the takeover) is a :class:`NoLiveOwner`: 503 with Retry-After, the process moves
within the lease TTL. An owner that cannot be reached is a 503 too; one that took the request
but did not answer in time is a 504 that says the command may still be done.

A forwarded request carries ``X-Promptui-Forwarded-By: <node id>``: a node receiving one for a
process it does not own (ownership moved meanwhile) answers 503 instead of forwarding again.

:func:`cluster_token`: the bearer token nodes use with each other, one per cluster, made by the
first node that asks (``secrets.token_urlsafe(32)``, in ``cluster_meta``, created under an
advisory lock) and read by the others. It is never logged.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, NamedTuple

import httpx

from runtime_core.cluster.db import ConnectionSource, Database
from runtime_core.cluster.ddl import advisory_key, ensure_tables
from runtime_core.cluster.errors import ClusterError
from runtime_core.cluster.leases import LeaseStore
from runtime_core.cluster.nodes import NodeRegistry

__all__ = ["FORWARDED_BY", "ForwardError", "Forwarded", "NoLiveOwner", "Owner",
           "cluster_token", "forward_command", "forward_request", "forward_to_owner",
           "owner_address", "owner_of"]

FORWARDED_BY = "X-Promptui-Forwarded-By"
PASSED_HEADERS = ("retry-after", "content-type", "location")
META_LOCK = advisory_key(b"pcmeta")
META_STATEMENTS = ["""CREATE TABLE IF NOT EXISTS cluster_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
)"""]
TOKEN_KEY = "cluster_token"


# -- the cluster token --------------------------------------------------------------------------
async def cluster_token(source: ConnectionSource | str) -> str:
    """The cluster's shared bearer token: made once by the first node (under the advisory lock,
    so two first nodes agree), read by every other."""
    db = Database(source)
    try:
        async with db.connection() as conn:
            await ensure_tables(conn, META_LOCK, ("cluster_meta",), (), META_STATEMENTS)
            read = "SELECT value FROM cluster_meta WHERE key = %s"
            row = await (await conn.execute(read, (TOKEN_KEY,))).fetchone()
            if not conn.autocommit:
                await conn.commit()
            if row is None:
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (META_LOCK,))
                    await conn.execute(
                        "INSERT INTO cluster_meta (key, value) VALUES (%s, %s) "
                        "ON CONFLICT (key) DO NOTHING", (TOKEN_KEY, secrets.token_urlsafe(32)))
                    row = await (await conn.execute(read, (TOKEN_KEY,))).fetchone()
                if not conn.autocommit:
                    await conn.commit()
    finally:
        await db.close()
    if row is None:  # pragma: no cover - inserted above
        raise ClusterError("the cluster token could not be stored in cluster_meta")
    return str(row[0])


# -- who owns a process -------------------------------------------------------------------------
class Owner(NamedTuple):
    node_id: str
    address: str
    epoch: int


async def owner_of(leases: LeaseStore, registry: NodeRegistry, process: str, *,
                   stale_after_s: float = 10.0) -> Owner | None:
    """The node holding a live lease on ``process`` if it is live too (beat within
    ``stale_after_s``, not stopping); None when there is no such node."""
    lease = await leases.owner(process)
    if lease is None or lease.expires_in_s <= 0:
        return None
    for node in await registry.live_nodes(stale_after_s):
        if node.node_id == lease.node_id:
            return Owner(node.node_id, node.address, lease.epoch)
    return None


async def owner_address(leases: LeaseStore, registry: NodeRegistry, process: str, *,
                        stale_after_s: float = 10.0) -> str | None:
    """The live owner's API URL (see :func:`owner_of`)."""
    owner = await owner_of(leases, registry, process, stale_after_s=stale_after_s)
    return None if owner is None else owner.address


# -- errors -------------------------------------------------------------------------------------
class ForwardError(ClusterError):
    """A command that could not reach (or hear back from) the owner: answer ``status`` with
    :meth:`body` and :meth:`headers` (the API's error shape)."""

    def __init__(self, message: str, *, status: int = 503, code: str = "OWNER_UNREACHABLE",
                 retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.message, self.status, self.code = message, status, code
        self.retry_after_s = retry_after_s

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}

    def headers(self) -> dict[str, str]:
        if self.retry_after_s is None:
            return {}
        return {"Retry-After": str(max(1, round(self.retry_after_s)))}


class NoLiveOwner(ForwardError):
    def __init__(self, process: str, retry_after_s: float) -> None:
        super().__init__(f"process {process!r} has no live owner; it moves within the lease "
                         f"TTL: try again in {max(1, round(retry_after_s))} s",
                         status=503, code="NO_LIVE_OWNER", retry_after_s=retry_after_s)
        self.process = process


# -- forwarding ---------------------------------------------------------------------------------
class Forwarded(NamedTuple):
    """The owner's answer: its status, its body (JSON decoded, else text, None when empty)
    and the headers worth passing on (Retry-After, Content-Type, Location)."""

    status: int
    body: Any
    headers: dict[str, str]


def _body(response: httpx.Response) -> Any:
    if not response.content:
        return None
    if "json" in response.headers.get("content-type", ""):
        try:
            return response.json()
        except ValueError:
            pass
    return response.text


async def forward_request(
        address: str, method: str, path: str, *, token: str, json: Any = None,
        params: Mapping[str, str] | None = None,
        timeout: float = 30.0,  # noqa: ASYNC109 - httpx's timeout for the owner's answer
        forwarded_by: str | None = None, retry_after_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None) -> Forwarded:
    """``method path`` on the node at ``address`` (its API URL) with the cluster ``token``;
    waits up to ``timeout`` s for its answer. Raises ForwardError when it cannot be reached
    (503, Retry-After ``retry_after_s``) or did not answer in time (504: it may have done it)."""
    headers = {"Authorization": f"Bearer {token}"}
    if forwarded_by:
        headers[FORWARDED_BY] = forwarded_by
    where = f"{method.upper()} {path} on node {address}"
    try:
        async with httpx.AsyncClient(base_url=address, timeout=timeout,
                                     transport=transport) as client:
            response = await client.request(method.upper(), path, json=json, params=params,
                                            headers=headers)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
        raise ForwardError(f"{where}: the owner node could not be reached ({exc or 'no answer'}); "
                           "its processes move to another node within the lease TTL",
                           retry_after_s=retry_after_s) from None
    except httpx.TimeoutException:
        raise ForwardError(f"{where}: no answer within {timeout:g} s; the command may still "
                           "be done: check the process before sending it again",
                           status=504, code="OWNER_TIMEOUT") from None
    except httpx.TransportError as exc:
        raise ForwardError(f"{where}: the connection broke before the answer ({exc}); the "
                           "command may or may not be done: check the process",
                           status=502, code="OWNER_CONNECTION_LOST") from None
    passed = {name.title(): response.headers[name] for name in PASSED_HEADERS
              if name in response.headers}
    return Forwarded(response.status_code, _body(response), passed)


async def forward_command(
        address: str, method: str, path: str, *, token: str, json: Any = None,
        params: Mapping[str, str] | None = None,
        timeout: float = 30.0,  # noqa: ASYNC109 - httpx's timeout for the owner's answer
        forwarded_by: str | None = None, retry_after_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None) -> tuple[int, Any]:
    """:func:`forward_request` answering (status, body) only."""
    answer = await forward_request(address, method, path, token=token, json=json,
                                   params=params, timeout=timeout, forwarded_by=forwarded_by,
                                   retry_after_s=retry_after_s, transport=transport)
    return answer.status, answer.body


async def forward_to_owner(
        leases: LeaseStore, registry: NodeRegistry, process: str, method: str, path: str, *,
        token: str, json: Any = None, params: Mapping[str, str] | None = None,
        timeout: float = 30.0,  # noqa: ASYNC109 - httpx's timeout for the owner's answer
        forwarded_by: str | None = None, ttl_s: float = 10.0,
        stale_after_s: float | None = None,
        transport: httpx.AsyncBaseTransport | None = None) -> Forwarded:
    """Find ``process``'s live owner and forward the command there; NoLiveOwner (503,
    Retry-After ``ttl_s``) when none, ForwardError when it cannot be reached."""
    owner = await owner_of(leases, registry, process,
                           stale_after_s=ttl_s if stale_after_s is None else stale_after_s)
    if owner is None:
        raise NoLiveOwner(process, ttl_s)
    return await forward_request(owner.address, method, path, token=token, json=json,
                                 params=params, timeout=timeout, forwarded_by=forwarded_by,
                                 retry_after_s=ttl_s, transport=transport)
