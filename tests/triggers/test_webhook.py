"""Webhook trigger: answers per accept result, signatures, limits, shared servers."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from runtime_core.config import TriggerConfig
from runtime_core.triggers.base import AcceptResult, PushTrigger
from runtime_core.triggers.webhook.trigger import WebhookTrigger
from tests.helpers.ports import free_port
from tests.helpers.webhooks import SECRET, FakeAccept, raw_status_line, signed

MakeTrigger = Callable[..., Awaitable[WebhookTrigger]]


@pytest.fixture
async def make_trigger() -> AsyncIterator[MakeTrigger]:
    """Start webhook triggers (port 0 unless given) and stop them all after the test."""
    started: list[WebhookTrigger] = []

    async def make(path: str = "/events", *, accept: FakeAccept | None = None,
                   trigger_id: str | None = None, **fields: Any) -> WebhookTrigger:
        config = TriggerConfig(type="webhook", webhook_path=path,
                               webhook_port=fields.pop("webhook_port", 0), **fields)
        trigger = WebhookTrigger(trigger_id or f"webhook-{path.strip('/')}", config)
        await trigger.start(accept or FakeAccept())
        started.append(trigger)
        return trigger

    yield make
    for trigger in started:
        await trigger.stop()


def client_for(trigger: WebhookTrigger) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{trigger.bound_port}", trust_env=False)


# -- answers per accept result --------------------------------------------------------------------
async def test_json_post_is_accepted_with_event_id_and_parsed_payload(
        make_trigger: MakeTrigger) -> None:
    accept = FakeAccept()
    trigger = await make_trigger("/events", accept=accept, trigger_id="webhook-1")
    assert isinstance(trigger, PushTrigger)
    async with client_for(trigger) as client:
        response = await client.post(
            "/events?source=ci&n=1", json={"action": "opened", "n": [1, 2]},
            headers={"Authorization": "Bearer tok", "Cookie": "a=b", "X-Custom": "yes"})
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "accepted"
    [event] = accept.events
    assert body["event_id"] == event.event_id
    assert (event.trigger_id, event.trigger_type) == ("webhook-1", "webhook")
    assert event.payload == {"action": "opened", "n": [1, 2]}
    meta = event.metadata
    assert (meta["method"], meta["path"], meta["remote"]) == ("POST", "/events", "127.0.0.1")
    assert meta["query"] == {"source": "ci", "n": "1"}
    assert meta["signature_verified"] is False
    assert meta["headers"]["x-custom"] == "yes"
    assert "authorization" not in meta["headers"] and "cookie" not in meta["headers"]


async def test_text_body_becomes_a_string_payload(make_trigger: MakeTrigger) -> None:
    accept = FakeAccept()
    trigger = await make_trigger(accept=accept)
    async with client_for(trigger) as client:
        response = await client.post("/events", content="héllo {not json}".encode(),
                                     headers={"Content-Type": "text/plain"})
        bad = await client.post("/events", content=b"\xff\xfe",
                                headers={"Content-Type": "text/plain"})
    assert response.status_code == 202
    assert accept.events[0].payload == "héllo {not json}"
    assert bad.status_code == 400 and "UTF-8" in bad.json()["message"]
    assert len(accept.events) == 1


async def test_filtered_event_is_answered_200_ignored(make_trigger: MakeTrigger) -> None:
    accept = FakeAccept()
    accept.result, accept.reason = AcceptResult.FILTERED, "filtered"
    trigger = await make_trigger(accept=accept)
    async with client_for(trigger) as client:
        response = await client.post("/events", json={"action": "closed"})
    assert response.status_code == 200
    assert response.json() == {"status": "ignored", "event_id": accept.events[0].event_id}


@pytest.mark.parametrize(("result", "reason"), [
    (AcceptResult.QUEUE_FULL, "queue full"),
    (AcceptResult.UNAVAILABLE, "process failed"),
])
async def test_not_accepted_is_503_with_retry_after(
        make_trigger: MakeTrigger, result: AcceptResult, reason: str) -> None:
    accept = FakeAccept()
    accept.result, accept.reason = result, reason
    trigger = await make_trigger(accept=accept)
    async with client_for(trigger) as client:
        response = await client.post("/events", json={})
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "30"
    assert response.json() == {"status": "unavailable", "message": reason}


async def test_accept_raising_is_500_and_logged(
        make_trigger: MakeTrigger, caplog: pytest.LogCaptureFixture) -> None:
    accept = FakeAccept()
    accept.error = RuntimeError("journal exploded")
    trigger = await make_trigger(accept=accept)
    with caplog.at_level(logging.ERROR, logger="runtime_core.triggers.webhook.trigger"):
        async with client_for(trigger) as client:
            response = await client.post("/events", json={})
    assert response.status_code == 500
    assert response.json() == {"status": "error", "message": "internal error"}
    assert "journal exploded" in caplog.text  # in the log (traceback), not in the answer


# -- signatures -----------------------------------------------------------------------------------
async def test_good_signature_is_accepted_and_marked_verified(make_trigger: MakeTrigger) -> None:
    accept = FakeAccept()
    trigger = await make_trigger(accept=accept, hmac_secret=SECRET)
    body = json.dumps({"deploy": 7}).encode()
    async with client_for(trigger) as client:
        response = await client.post("/events", content=body, headers={
            **signed(body), "Content-Type": "application/json"})
    assert response.status_code == 202
    [event] = accept.events
    assert event.payload == {"deploy": 7}
    assert event.metadata["signature_verified"] is True
    assert "x-promptui-signature" not in event.metadata["headers"]


@pytest.mark.parametrize("headers", [
    pytest.param({}, id="missing"),
    pytest.param(signed(b'{"a": 1}', secret="wrong-secret"), id="wrong-secret"),
    pytest.param(signed(b'{"a": 2}'), id="other-body"),
    pytest.param({**signed(b'{"a": 1}'), "X-Promptui-Signature": "md5=abc"}, id="malformed"),
    pytest.param({**signed(b'{"a": 1}'), "X-Promptui-Timestamp": "12_3"}, id="bad-timestamp"),
    pytest.param({**signed(b'{"a": 1}'), "X-Promptui-Signature": b"sha256=\xe9\xe9"},
                 id="non-ascii"),
])
async def test_missing_or_wrong_signature_is_401(
        make_trigger: MakeTrigger, headers: dict[str, Any]) -> None:
    accept = FakeAccept()
    trigger = await make_trigger(accept=accept, hmac_secret=SECRET)
    async with client_for(trigger) as client:
        response = await client.post("/events", content=b'{"a": 1}', headers={
            **headers, "Content-Type": "application/json"})
    assert response.status_code == 401
    assert response.json()["status"] == "error"
    assert accept.events == []


@pytest.mark.parametrize("offset", [-1000, 1000])
async def test_stale_or_future_timestamp_is_401(make_trigger: MakeTrigger, offset: int) -> None:
    accept = FakeAccept()
    trigger = await make_trigger(accept=accept, hmac_secret=SECRET, signature_tolerance=300)
    body = b"ping"
    async with client_for(trigger) as client:
        response = await client.post("/events", content=body, headers=signed(
            body, timestamp=int(time.time()) + offset))
    assert response.status_code == 401
    assert response.json()["message"] == "stale or future timestamp"
    assert accept.events == []


async def test_replayed_request_is_a_duplicate_but_a_retry_after_503_is_not(
        make_trigger: MakeTrigger) -> None:
    accept = FakeAccept()
    trigger = await make_trigger(accept=accept, hmac_secret=SECRET)
    body = b'{"n": 1}'
    headers = {**signed(body), "Content-Type": "application/json"}
    async with client_for(trigger) as client:
        accept.result = AcceptResult.QUEUE_FULL
        busy = await client.post("/events", content=body, headers=headers)
        accept.result = AcceptResult.ACCEPTED
        retried = await client.post("/events", content=body, headers=headers)
        replayed = await client.post("/events", content=body, headers=headers)
    assert (busy.status_code, retried.status_code) == (503, 202)
    assert replayed.status_code == 200  # acknowledged, so the sender stops; nothing runs
    assert replayed.json() == {"status": "duplicate", "event_id": retried.json()["event_id"]}
    assert len(accept.events) == 2  # the 503 attempt and the retry; the replay never got in


# -- limits and parsing ---------------------------------------------------------------------------
async def test_oversize_body_by_content_length_is_413_without_reading_it(
        make_trigger: MakeTrigger) -> None:
    accept = FakeAccept()
    trigger = await make_trigger(accept=accept, max_body_bytes=1000)
    async with client_for(trigger) as client:
        response = await client.post("/events", content=b"x" * 5000)
        fits = await client.post("/events", content=b"x" * 1000)
    assert response.status_code == 413
    assert response.json()["status"] == "error"
    assert fits.status_code == 202
    # The answer comes before any of the promised 10 MB is sent.
    assert trigger.bound_port is not None
    line = await raw_status_line(trigger.bound_port, (
        b"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10000000\r\n\r\n"))
    assert line.startswith(b"HTTP/1.1 413")
    assert len(accept.events) == 1


async def test_oversize_chunked_body_is_413_while_streaming(make_trigger: MakeTrigger) -> None:
    accept = FakeAccept()
    trigger = await make_trigger(accept=accept, max_body_bytes=1000)

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b"y" * 400

    async with client_for(trigger) as client:
        response = await client.post("/events", content=chunks())
    assert response.status_code == 413
    # A stream that never ends is cut off once it passes the limit.
    assert trigger.bound_port is not None
    line = await raw_status_line(trigger.bound_port, (
        b"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"7d0\r\n" + b"z" * 2000 + b"\r\n"))
    assert line.startswith(b"HTTP/1.1 413")
    assert accept.events == []


async def test_invalid_json_is_400_naming_line_and_column(make_trigger: MakeTrigger) -> None:
    accept = FakeAccept()
    trigger = await make_trigger(accept=accept)
    async with client_for(trigger) as client:
        response = await client.post("/events", content=b'{"a": 1,\n "b": }',
                                     headers={"Content-Type": "application/json"})
        nan = await client.post("/events", content=b'{"a": NaN}',
                                headers={"Content-Type": "application/vnd.x+json"})
    assert response.status_code == 400
    message = response.json()["message"]
    assert message.startswith("invalid JSON") and "line 2 column 7" in message
    assert nan.status_code == 400
    assert accept.events == []


# -- routing --------------------------------------------------------------------------------------
async def test_unknown_path_404_other_method_405_and_health(make_trigger: MakeTrigger) -> None:
    trigger = await make_trigger("/events")
    async with client_for(trigger) as client:
        missing = await client.post("/nope", json={})
        wrong_method = await client.get("/events")
        health = await client.get("/health")
    assert missing.status_code == 404 and missing.json()["status"] == "error"
    assert wrong_method.status_code == 405 and wrong_method.headers["Allow"] == "POST"
    assert health.status_code == 200
    assert health.json() == {"status": "ok"}


async def test_two_triggers_share_one_server_until_both_stop() -> None:
    port = free_port()
    first_accept, second_accept = FakeAccept(), FakeAccept()
    first = WebhookTrigger("webhook-a", TriggerConfig(type="webhook", webhook_path="/a",
                                                      webhook_port=port))
    second = WebhookTrigger("webhook-b", TriggerConfig(type="webhook", webhook_path="/b",
                                                       webhook_port=port))
    await first.start(first_accept)
    try:
        await second.start(second_accept)
    except BaseException:
        await first.stop()
        raise
    try:
        assert first.bound_port == second.bound_port == port
        async with client_for(first) as client:
            assert (await client.post("/a", json={"to": "a"})).status_code == 202
            assert (await client.post("/b", json={"to": "b"})).status_code == 202
            assert (await client.get("/health")).json() == {"status": "ok"}
        assert [e.payload for e in first_accept.events] == [{"to": "a"}]
        assert [e.payload for e in second_accept.events] == [{"to": "b"}]

        await first.stop()
        async with client_for(second) as client:
            assert (await client.post("/a", json={})).status_code == 404
            assert (await client.post("/b", json={})).status_code == 202
    finally:
        await first.stop()
        await second.stop()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)

    # The port is free again: a new trigger on it starts a fresh server.
    again = WebhookTrigger("webhook-c", TriggerConfig(type="webhook", webhook_path="/c",
                                                      webhook_port=port))
    await again.start(FakeAccept())
    try:
        async with client_for(again) as client:
            assert (await client.post("/c", json={})).status_code == 202
    finally:
        await again.stop()


async def test_duplicate_path_on_one_address_is_refused_naming_both() -> None:
    port = free_port()
    config = TriggerConfig(type="webhook", webhook_path="/same", webhook_port=port)
    first, second = WebhookTrigger("webhook-one", config), WebhookTrigger("webhook-two", config)
    await first.start(FakeAccept())
    try:
        with pytest.raises(ValueError, match=r"webhook-one.*webhook-two") as caught:
            await second.start(FakeAccept())
        assert "/same" in str(caught.value)
        assert not second.running
        async with client_for(first) as client:  # the first is untouched
            assert (await client.post("/same", json={})).status_code == 202
    finally:
        await first.stop()


async def test_health_path_is_reserved() -> None:
    with pytest.raises(ValidationError, match="reserved"):
        TriggerConfig(type="webhook", webhook_path="/health")


# -- status and secrets ---------------------------------------------------------------------------
async def test_status_counts_and_never_shows_the_secret(
        make_trigger: MakeTrigger, caplog: pytest.LogCaptureFixture) -> None:
    accept = FakeAccept()
    caplog.set_level(logging.DEBUG, logger="runtime_core.triggers.webhook.trigger")
    trigger = await make_trigger("/events", accept=accept, hmac_secret=SECRET,
                                 trigger_id="webhook-s")
    body = b"hi"
    async with client_for(trigger) as client:
        ok = await client.post("/events", content=body, headers=signed(body))
        bad = await client.post("/events", content=body,
                                headers=signed(body, secret="nope"))
    assert (ok.status_code, bad.status_code) == (202, 401)
    status = trigger.status()
    assert status["port"] == trigger.bound_port and status["path"] == "/events"
    assert status["host"] == "127.0.0.1" and status["signature_required"] is True
    assert (status["requests"], status["accepted"], status["rejected"]) == (2, 1, 1)
    for text in (json.dumps(status), repr(trigger), caplog.text, bad.text):
        assert SECRET not in text
    await trigger.stop()
    assert trigger.status()["running"] is False and trigger.bound_port is None


async def test_address_in_use_is_an_oserror_and_leaves_nothing_behind() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        trigger = WebhookTrigger("webhook-busy", TriggerConfig(type="webhook",
                                                               webhook_port=port))
        with pytest.raises(OSError, match=f"127.0.0.1:{port}"):
            await trigger.start(FakeAccept())
        assert not trigger.running and trigger.bound_port is None
    await trigger.start(FakeAccept())  # the port is free now and nothing stale is in the way
    try:
        async with client_for(trigger) as client:
            assert (await client.post("/webhook", json={})).status_code == 202
    finally:
        await trigger.stop()
