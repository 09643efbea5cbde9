"""Forwarding operator commands to a process's owner: the owner's answer passed through, the
cluster token sent, clear errors when there is no live owner or it cannot be reached; and the
cluster token shared by every node."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from runtime_core.cluster import LeaseStore, NodeRegistry
from runtime_core.cluster.forward import (
    FORWARDED_BY,
    ForwardError,
    NoLiveOwner,
    cluster_token,
    forward_command,
    forward_request,
    forward_to_owner,
    owner_address,
    owner_of,
)
from tests.helpers.polling import wait_for
from tests.helpers.ports import free_port

pytestmark = pytest.mark.slow

TOKEN = "t0ken-for-the-tests-only-0123456789"


async def stop(request: Request) -> Response:
    body = await request.json()
    return JSONResponse({"stopped": request.path_params["name"], "reason": body.get("reason"),
                         "auth": request.headers.get("authorization"),
                         "forwarded_by": request.headers.get(FORWARDED_BY.lower())})


async def conflict(request: Request) -> Response:
    return JSONResponse({"error": {"code": "STATE", "message": "already stopped"}}, 409)


async def full(request: Request) -> Response:
    return JSONResponse({"error": {"code": "QUEUE_FULL", "message": "no room"}}, 503,
                        headers={"Retry-After": "7"})


async def echo(request: Request) -> Response:
    return PlainTextResponse(f"limit={request.query_params.get('limit')}")


async def hang(request: Request) -> Response:
    while not await request.is_disconnected():  # longer than the caller waits
        await asyncio.sleep(0.05)
    return Response(status_code=204)


APP = Starlette(routes=[
    Route("/api/v1/processes/{name}/stop", stop, methods=["POST"]),
    Route("/conflict", conflict, methods=["POST"]),
    Route("/full", full, methods=["POST"]),
    Route("/echo", echo),
    Route("/hang", hang, methods=["POST"]),
])


@pytest.fixture
async def owner_url() -> AsyncIterator[str]:
    """A real HTTP server on 127.0.0.1, port 0 (uvicorn in this process)."""
    server = uvicorn.Server(uvicorn.Config(APP, host="127.0.0.1", port=0, log_level="warning",
                                           lifespan="off"))
    task = asyncio.get_running_loop().create_task(server.serve())
    await wait_for(lambda: server.started or task.done(), 10, "uvicorn to start")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


async def test_forward_passes_status_and_body_through(owner_url: str) -> None:
    status, body = await forward_command(
        owner_url, "post", "/api/v1/processes/p1/stop", token=TOKEN,
        json={"reason": "maintenance"}, forwarded_by="node-a", timeout=10)
    assert status == 200
    assert body == {"stopped": "p1", "reason": "maintenance", "auth": f"Bearer {TOKEN}",
                    "forwarded_by": "node-a"}
    status, body = await forward_command(owner_url, "POST", "/conflict", token=TOKEN, json={})
    assert (status, body) == (409, {"error": {"code": "STATE", "message": "already stopped"}})
    answer = await forward_request(owner_url, "POST", "/full", token=TOKEN)
    assert answer.status == 503 and answer.headers["Retry-After"] == "7"
    assert answer.body["error"]["code"] == "QUEUE_FULL"
    assert await forward_command(owner_url, "GET", "/echo", token=TOKEN,
                                 params={"limit": "3"}) == (200, "limit=3")


async def test_forward_errors_are_clear(owner_url: str) -> None:
    with pytest.raises(ForwardError) as unreachable:
        await forward_command(f"http://127.0.0.1:{free_port()}", "POST", "/x", token=TOKEN,
                              timeout=5)
    assert unreachable.value.status == 503 and unreachable.value.headers() == {
        "Retry-After": "5"}
    assert "could not be reached" in unreachable.value.message
    assert TOKEN not in str(unreachable.value)
    with pytest.raises(ForwardError) as slow:
        await forward_command(owner_url, "POST", "/hang", token=TOKEN, timeout=0.3)
    assert slow.value.status == 504 and "may still be done" in slow.value.message
    assert slow.value.body()["error"]["code"] == "OWNER_TIMEOUT"


async def test_commands_reach_the_live_owner(pg_dsn: str, owner_url: str) -> None:
    leases, registry = LeaseStore(pg_dsn), NodeRegistry(pg_dsn)
    try:
        await registry.register("a", owner_url)
        await registry.register("b", "http://127.0.0.1:1")
        assert await owner_address(leases, registry, "p1") is None  # never claimed
        with pytest.raises(NoLiveOwner) as missing:
            await forward_to_owner(leases, registry, "p1", "POST", "/api/v1/processes/p1/stop",
                                   token=TOKEN, json={}, ttl_s=3)
        assert missing.value.status == 503 and missing.value.headers() == {"Retry-After": "3"}
        assert "process 'p1' has no live owner; it moves within the lease TTL" in \
            missing.value.message
        epoch = await leases.claim("p1", "a", 30)
        assert epoch is not None
        owner = await owner_of(leases, registry, "p1")
        assert owner is not None and (owner.node_id, owner.address, owner.epoch) == \
            ("a", owner_url, epoch)
        answer = await forward_to_owner(leases, registry, "p1", "POST",
                                        "/api/v1/processes/p1/stop", token=TOKEN,
                                        json={"reason": "r"}, forwarded_by="b")
        assert answer.status == 200 and answer.body["stopped"] == "p1"
        await registry.leave("a")  # the owner stops: no live owner until another claims
        assert await owner_address(leases, registry, "p1") is None
    finally:
        await leases.close()
        await registry.close()


async def test_cluster_token_is_shared(pg_dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    first = await asyncio.gather(*(cluster_token(pg_dsn) for _ in range(4)))
    assert len(set(first)) == 1 and len(first[0]) >= 40
    async with AsyncConnectionPool(pg_dsn, min_size=1, max_size=1, open=False) as pool:
        assert await cluster_token(pool) == first[0]  # a later node, through a pool
    assert first[0] not in caplog.text


async def test_cluster_token_first_callers_on_fresh_pools_agree(pg_dsn: str) -> None:
    pools: list[AsyncConnectionPool[Any]] = [
        AsyncConnectionPool(pg_dsn, min_size=1, max_size=1, open=False) for _ in range(3)]
    for pool in pools:
        await pool.open()
    try:
        tokens = await asyncio.gather(*(cluster_token(pool) for pool in pools))
    finally:
        await asyncio.gather(*(pool.close() for pool in pools))
    assert len(set(tokens)) == 1
