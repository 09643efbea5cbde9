"""Escalation delivery: an event on the bus and/or a webhook POST under SSRF rules (resolve,
refuse non-public addresses unless allow_private, connect to the checked address, no
redirects, a timeout)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import ValidationError

from runtime_core import AgentProcess, EventBus, ProcessConfig, ProcessState, TriggerEvent, tool
from runtime_core.governance import escalation as escalation_module
from runtime_core.governance.escalation import (
    EscalationRefused,
    EscalationTarget,
    Escalator,
    check_public_address,
    ip_literal,
)
from tests.helpers.events import record
from tests.helpers.polling import wait_for


@dataclass
class Receiver:
    """A loopback HTTP server that records each request and answers with ``reply``."""

    port: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    reply: bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    hang: bool = False

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in
                   (line.partition(":") for line in lines[1:] if line)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append({"line": lines[0], "headers": headers, "body": body})
        if self.hang:
            await asyncio.sleep(30)
        writer.write(self.reply)
        await writer.drain()
        writer.close()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = Receiver()
    server = await asyncio.start_server(rec.handle, "127.0.0.1", 0)
    rec.port = server.sockets[0].getsockname()[1]
    async with server:
        yield rec
        server.close()


@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
    "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "fe80::1", "fc00::1", "ff02::1",
    "::ffff:127.0.0.1", "::ffff:10.0.0.1", "2002:7f00:1::1", "::",
    "192.0.0.1", "192.0.0.8", "192.0.0.9", "192.0.0.170", "192.0.0.255",  # 192.0.0.0/24
    "192.88.99.1", "3fff::1", "fec0::1", "64:ff9b::7f00:1",
])
def test_non_public_addresses_are_refused(address: str) -> None:
    with pytest.raises(EscalationRefused, match="allow_private"):
        check_public_address(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    check_public_address(address)


@pytest.mark.parametrize(("host", "address"), [
    ("0177.0.0.1", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("2130706433", "127.0.0.1"),
    ("127.1", "127.0.0.1"), ("0x7f000001", "127.0.0.1"), ("0x7F.0.0.0x1", "127.0.0.1"),
    ("012.0.0.1", "10.0.0.1"), ("10.1", "10.0.0.1"), ("169.254.43518", "169.254.169.254"),
    ("127.0.0.1.", "127.0.0.1"), ("1.0x10000", "1.1.0.0"), ("::ffff:127.0.0.1", "::ffff:7f00:1"),
])
def test_odd_ipv4_spellings_are_read_as_a_resolver_reads_them(host: str, address: str) -> None:
    assert str(ip_literal(host)) == address


@pytest.mark.parametrize("host", ["999.1.1.1", "1.2.3.4.5", "08.0.0.1", "256.0.0.1",
                                  "1.16777216", "example.123", "0xg.1"])
def test_a_number_that_is_no_ipv4_address_is_refused(host: str) -> None:
    with pytest.raises(EscalationRefused, match="not a valid IPv4 address"):
        ip_literal(host)


@pytest.mark.parametrize("host", ["example.com", "hooks.example.com.", "a1.example"])
def test_names_are_left_to_the_resolver(host: str) -> None:
    assert ip_literal(host) is None


@pytest.mark.parametrize(("url", "says"), [
    ("https://0177.0.0.1/alerts", "0177.0.0.1 is 127.0.0.1: 127.0.0.1 is not a public address"),
    ("https://0x7f.1/", "0x7f.1 is 127.0.0.1"),
    ("https://2130706433/", "2130706433 is 127.0.0.1"),
    ("https://127.1/", "127.1 is 127.0.0.1"),
    ("https://012.1/", "012.1 is 10.0.0.1"),
    ("https://192.0.0.8/", "192.0.0.8 is not a public address"),
    ("https://[::ffff:7f00:1]/", "127.0.0.1 is not a public address"),
    ("https://999.1.1.1/", "'999.1.1.1' is not a valid IPv4 address"),
    ("https://1.2.3.4.5/", "'1.2.3.4.5' is not a valid IPv4 address"),
    ("https://hooks.example:99999/", "cannot be parsed"),
    ("https://xn--/", "cannot be parsed"),
])
async def test_every_refused_url_is_an_outcome_and_a_log_line_never_an_exception(
        url: str, says: str, caplog: pytest.LogCaptureFixture) -> None:
    outcome = await Escalator(None, source="p").escalate(EscalationTarget(webhook_url=url),
                                                         {"type": "x"})
    assert not outcome.delivered and outcome.webhook_status is None
    assert outcome.error.startswith("webhook refused: ") and says in outcome.error, outcome
    [line] = [r for r in caplog.records if r.name == escalation_module.log.name]
    assert line.levelname == "ERROR" and says in line.getMessage()


def test_target_validation_names_the_fix() -> None:
    with pytest.raises(ValidationError, match="https:// or, for a receiver on your own"):
        EscalationTarget(webhook_url="http://hooks.example.com/x")
    assert EscalationTarget(webhook_url="http://10.0.0.5/x", allow_private=True).allow_private
    with pytest.raises(ValidationError, match="credentials"):
        EscalationTarget(webhook_url="https://user:pw@hooks.example.com/x")
    with pytest.raises(ValidationError, match="http:// or https://"):
        EscalationTarget(webhook_url="ftp://hooks.example.com/x")
    with pytest.raises(ValueError, match="unknown EscalationTarget key"):
        EscalationTarget.from_manifest({"webhok_url": "https://x.example"})


async def test_post_reaches_a_loopback_receiver_with_allow_private(receiver: Receiver) -> None:
    target = EscalationTarget(webhook_url=f"http://localhost:{receiver.port}/hook",
                              allow_private=True, headers={"Authorization": "Bearer t0k"})
    outcome = await Escalator(None, source="p").escalate(target, {"type": "health_anomaly",
                                                                  "n": 1})
    assert outcome.delivered and outcome.webhook_status == 200
    [request] = receiver.requests
    assert request["line"] == "POST /hook HTTP/1.1"
    # Sent to the checked address, with the name the operator wrote kept in Host.
    assert request["headers"]["host"] == f"localhost:{receiver.port}"
    assert request["headers"]["authorization"] == "Bearer t0k"
    assert request["headers"]["content-type"] == "application/json"
    assert json.loads(request["body"]) == {"type": "health_anomaly", "n": 1}


async def test_loopback_is_refused_without_allow_private(receiver: Receiver) -> None:
    target = EscalationTarget(webhook_url=f"https://localhost:{receiver.port}/hook")
    outcome = await Escalator(None, source="p").escalate(target, {"type": "x"})
    assert not outcome.delivered and outcome.webhook_status is None
    assert "not a public address" in outcome.error
    assert receiver.requests == []


async def test_every_resolved_address_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    async def two_answers(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.0.0.7"]  # one public, one internal: refused

    monkeypatch.setattr(escalation_module, "_resolve", two_answers)
    outcome = await Escalator(None, source="p").escalate(
        EscalationTarget(webhook_url="https://rebind.example/x"), {"type": "x"})
    assert "10.0.0.7 is not a public address" in outcome.error


async def test_unresolvable_host_is_reported() -> None:
    outcome = await Escalator(None, source="p").escalate(
        EscalationTarget(webhook_url="https://no-such-host.invalid/x"), {"type": "x"})
    assert "cannot resolve 'no-such-host.invalid'" in outcome.error


async def test_redirects_are_not_followed(receiver: Receiver) -> None:
    receiver.reply = (b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/latest\r\n"
                      b"Content-Length: 0\r\nConnection: close\r\n\r\n")
    target = EscalationTarget(webhook_url=f"http://127.0.0.1:{receiver.port}/",
                              allow_private=True)
    outcome = await Escalator(None, source="p").escalate(target, {"type": "x"})
    assert outcome.webhook_status == 302
    assert "redirects are not followed" in outcome.error
    assert len(receiver.requests) == 1


async def test_a_silent_receiver_times_out(receiver: Receiver) -> None:
    receiver.hang = True
    target = EscalationTarget(webhook_url=f"http://127.0.0.1:{receiver.port}/",
                              allow_private=True, timeout=0.3)
    outcome = await asyncio.wait_for(Escalator(None, source="p").escalate(target, {}), 5)
    assert "Timeout" in outcome.error


async def test_bus_and_webhook_together(receiver: Receiver) -> None:
    bus = EventBus()
    seen: list[dict[str, Any]] = []
    bus.subscribe("ops.alert", seen.append)
    target = EscalationTarget(webhook_url=f"http://127.0.0.1:{receiver.port}/",
                              allow_private=True, event_type="ops.alert")
    outcome = await Escalator(bus, source="p").escalate(target, {"type": "x"})
    assert outcome.delivered and outcome.event_emitted and len(receiver.requests) == 1
    assert seen[0]["data"] == {"type": "x"}


STUCK = {"provider": "scripted", "turns": [
    {"tool_calls": [{"name": "poll", "args": {"q": "jobs"}}], "repeat": 3},
    {"reply": "gave up"}]}


def poll_jobs(q: str) -> str:
    return "still busy"


POLL = tool(poll_jobs, name="poll")  # the tool the stuck model keeps calling


def stuck_process(escalation: dict[str, Any]) -> AgentProcess:
    return AgentProcess("watcher", ProcessConfig(model=STUCK, health={
        "enabled": True, "on_anomaly": "escalate", "stuck_threshold": 3,
        "escalation": escalation}), tools=[POLL])


async def test_health_escalation_posts_the_documented_json(receiver: Receiver) -> None:
    process = stuck_process({"webhook_url": f"http://127.0.0.1:{receiver.port}/alerts",
                             "allow_private": True})
    events = record(process)
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: any(e.kind == "escalation.sent" for e in events))
    assert process.state is ProcessState.SUSPENDED
    body = json.loads(receiver.requests[0]["body"])
    assert body == {"type": "health_anomaly", "process_id": process.process_id,
                    "process_name": "watcher", "anomaly_type": "stuck",
                    "details": body["details"]}
    assert body["details"]["tool_name"] == "poll" and body["details"]["consecutive_count"] == 3
    sent = next(e for e in events if e.kind == "escalation.sent").to_dict()
    assert sent["webhook_status"] == 200 and sent["error"] == ""
    assert sent["channels"] == "webhook" and sent["reason"] == "health_anomaly"
    await process.close()


async def test_a_refused_escalation_is_announced_and_the_process_still_pauses(
        receiver: Receiver) -> None:
    process = stuck_process({"webhook_url": f"https://127.0.0.1:{receiver.port}/alerts"})
    events = record(process)
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: any(e.kind == "escalation.sent" for e in events))
    assert process.state is ProcessState.SUSPENDED
    sent = next(e for e in events if e.kind == "escalation.sent").to_dict()
    assert "not a public address" in sent["error"] and sent["webhook_status"] is None
    assert receiver.requests == []
    await process.close()


async def test_an_odd_spelling_of_loopback_is_announced_as_refused(receiver: Receiver) -> None:
    """https://0177.0.0.1/ raised InvalidURL out of the escalation: no event was announced."""
    process = stuck_process({"webhook_url": f"https://0177.0.0.1:{receiver.port}/alerts"})
    events = record(process)
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: any(e.kind == "escalation.sent" for e in events))
    assert process.state is ProcessState.SUSPENDED
    sent = next(e for e in events if e.kind == "escalation.sent").to_dict()
    assert "0177.0.0.1 is 127.0.0.1" in sent["error"] and sent["webhook_status"] is None
    assert receiver.requests == []
    await process.close()
