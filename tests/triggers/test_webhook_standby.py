"""A standby webhook (a cluster node's stand-in for a process another node runs) serves its path
only while no trigger of its own does: the process's trigger takes the path over on the same
port and gives it back when it stops, and the port answers all along."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from runtime_core.config import TriggerConfig
from runtime_core.triggers.webhook.trigger import WebhookTrigger
from tests.helpers.ports import free_port
from tests.helpers.webhooks import FakeAccept, github


def hook(port: int, path: str = "/hook", **fields: object) -> TriggerConfig:
    return TriggerConfig(type="webhook", webhook_path=path, webhook_port=port, **fields)


async def post(client: httpx.AsyncClient, body: dict[str, object], path: str = "/hook",
               headers: dict[str, str] | None = None) -> httpx.Response:
    return await client.post(path, content=json.dumps(body).encode(),
                             headers=headers or {"Content-Type": "application/json"})


async def test_the_processs_own_trigger_takes_the_path_over_and_gives_it_back() -> None:
    port = free_port()
    standby_sink, own_sink = FakeAccept(), FakeAccept()
    standby = WebhookTrigger("webhook-a", hook(port))
    own = WebhookTrigger("webhook-a", hook(port))
    await standby.start(standby_sink, standby=True)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                     trust_env=False) as client:
            assert (await post(client, {"n": 1})).status_code == 202
            await own.start(own_sink)  # the process starts on this node
            assert own.bound_port == standby.bound_port == port
            assert (await post(client, {"n": 2})).status_code == 202
            health = await client.get("/health")
            assert health.json() == {"status": "ok"}
            await own.stop()  # it stops here: the standby serves again, the port stayed open
            assert (await post(client, {"n": 3})).status_code == 202
        assert [e.payload["n"] for e in standby_sink.events] == [1, 3]
        assert [e.payload["n"] for e in own_sink.events] == [2]
    finally:
        await own.stop()
        await standby.stop()


async def test_the_port_keeps_answering_while_the_owner_comes_and_goes() -> None:
    """Requests sent all the while a process starts and stops here, over and over: every
    one is answered 202 by one of the two (none refused, none lost)."""
    port = free_port()
    standby_sink, own_sink = FakeAccept(), FakeAccept()
    standby = WebhookTrigger("webhook-a", hook(port))
    await standby.start(standby_sink, standby=True)
    done = asyncio.Event()
    answers: list[int] = []

    async def send() -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                     trust_env=False) as client:
            n = 0
            while not done.is_set():
                answers.append((await post(client, {"n": n})).status_code)
                n += 1

    sender = asyncio.create_task(send())
    try:
        for _ in range(10):
            own = WebhookTrigger("webhook-a", hook(port))
            await own.start(own_sink)
            await asyncio.sleep(0.02)
            await own.stop()
            await asyncio.sleep(0.02)
        done.set()
        await sender
    finally:
        done.set()
        await standby.stop()
    assert answers and set(answers) == {202}
    assert len(standby_sink.events) + len(own_sink.events) == len(answers)


async def test_a_standby_checks_the_signature_as_the_trigger_does() -> None:
    port = free_port()
    sink = FakeAccept()
    standby = WebhookTrigger("webhook-gh", hook(port, "/gh", signature_scheme="github",
                                                hmac_secret="s3cret"))
    await standby.start(sink, standby=True)
    try:
        body = json.dumps({"action": "opened"}).encode()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                     trust_env=False) as client:
            bad = await client.post("/gh", content=body, headers=github(body, "wrong", "d-1"))
            good = await client.post("/gh", content=body, headers=github(body, "s3cret", "d-1"))
            again = await client.post("/gh", content=body, headers=github(body, "s3cret", "d-1"))
        assert bad.status_code == 401
        assert good.status_code == 202
        assert (again.status_code, again.json()["status"]) == (200, "duplicate")
        assert len(sink.events) == 1
        assert sink.events[0].metadata["delivery_key"] == "/gh#d-1"
    finally:
        await standby.stop()


async def test_two_standbys_for_one_path_are_refused() -> None:
    port = free_port()
    first = WebhookTrigger("webhook-a", hook(port))
    second = WebhookTrigger("webhook-b", hook(port))
    await first.start(FakeAccept(), standby=True)
    try:
        with pytest.raises(ValueError, match="both want path '/hook'"):
            await second.start(FakeAccept(), standby=True)
    finally:
        await first.stop()
