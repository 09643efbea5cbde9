"""Hostile clients: a web page in the operator's browser (Origin, DNS rebinding), addresses not
in allowed_sources, bodies the journal could not hold, and a property test over anything a
client can send: never a 5xx other than 503 for backpressure."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime_core import AgentProcess, ProcessConfig
from runtime_core.agent.model import ModelRequest, ModelTurn
from runtime_core.http.origin import refusal
from runtime_core.journal import EntryType, ReadFilter, SQLiteJournal
from runtime_core.triggers.webhook.trigger import _source_allowed
from tests.helpers.polling import wait_for
from tests.helpers.ports import free_port
from tests.helpers.webhooks import FakeAccept, github, raw_status_line, serving, slack

T = TypeVar("T")


class QuickModel:
    name = "quick"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelTurn:
        self.calls += 1
        return ModelTurn(reply="done")


# -- a web page: Origin and Host ------------------------------------------------------------------
async def test_any_request_with_an_origin_is_403_even_on_an_unsigned_trigger() -> None:
    accept = FakeAccept()
    async with serving("/alerts", accept=accept) as (_, client):
        # what fetch(url, {method: "POST", mode: "no-cors", body}) sends from any page
        page = await client.post("/alerts", content=b'{"alert": "pwned"}', headers={
            "Origin": "https://evil.example", "Content-Type": "text/plain"})
        null_origin = await client.post("/alerts", content=b"{}", headers={"Origin": "null"})
        health = await client.get("/health", headers={"Origin": "https://evil.example"})
        unknown = await client.post("/nope", headers={"Origin": "https://evil.example"})
        plain = await client.post("/alerts", json={"alert": "real"})
    assert [r.status_code for r in (page, null_origin, health, unknown)] == [403] * 4
    assert "web page" in page.json()["message"]
    assert plain.status_code == 202
    assert [e.payload for e in accept.events] == [{"alert": "real"}]


@pytest.mark.parametrize(("host", "status"), [
    ("evil.example", 421),
    ("evil.example:8787", 421),
    ("127.0.0.1.nip.io", 421),
    ("localhost", 202),
    ("LOCALHOST:1", 202),
    ("127.0.0.1", 202),
    ("[::1]:9", 202),
])
async def test_a_foreign_host_on_a_loopback_bind_is_421(host: str, status: int) -> None:
    accept = FakeAccept()
    async with serving(accept=accept) as (_, client):
        response = await client.post("/hook", json={}, headers={"Host": host})
    assert response.status_code == status
    if status == 421:
        assert "loopback" in response.json()["message"] and accept.events == []


async def test_a_request_without_host_is_421_on_a_loopback_bind() -> None:
    async with serving() as (trigger, _):
        assert trigger.bound_port is not None
        line = await raw_status_line(trigger.bound_port,
                                     b"POST /hook HTTP/1.0\r\nContent-Length: 0\r\n\r\n")
    assert line.startswith(b"HTTP/1.1 421")


def test_a_public_bind_takes_any_host_but_never_an_origin() -> None:
    assert refusal({"host": "hooks.example.com"}, "0.0.0.0") is None
    assert refusal({"host": "hooks.example.com"}, "127.0.0.1") is not None
    refused = refusal({"host": "x", "origin": "https://a.example"}, "0.0.0.0")
    assert refused is not None and refused[0] == 403


async def test_a_page_cannot_start_a_run_through_an_unsigned_trigger() -> None:
    """The demo's bug: a no-cors POST from a page to /alerts started page_oncall."""
    model = QuickModel()
    process = AgentProcess("oncall", ProcessConfig(triggers=[
        {"type": "webhook", "webhook_port": 0, "webhook_path": "/alerts"}]), model=model)
    await process.start()
    try:
        port = int(process.status()["triggers"][0]["port"])
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                     trust_env=False) as client:
            page = await client.post("/alerts", content=b'{"severity": "critical"}', headers={
                "Origin": "http://localhost:3000", "Content-Type": "text/plain;charset=UTF-8"})
            rebound = await client.post("/alerts", json={}, headers={"Host": "attacker.test"})
            real = await client.post("/alerts", json={"severity": "low"})
        assert (page.status_code, rebound.status_code, real.status_code) == (403, 421, 202)
        await wait_for(lambda: model.calls == 1)
        assert process.invocation_count == 1
    finally:
        await process.close()


# -- allowed_sources ------------------------------------------------------------------------------
@pytest.mark.parametrize(("sources", "status"), [
    (["10.0.0.0/8", "192.30.252.0/22"], 403),
    (["2001:db8::/32"], 403),
    (["127.0.0.0/8"], 202),
    (["::1", "127.0.0.1"], 202),
])
async def test_allowed_sources(sources: list[str], status: int) -> None:
    accept = FakeAccept()
    async with serving(accept=accept, allowed_sources=sources) as (trigger, client):
        response = await client.post("/hook", json={"n": 1})
        assert trigger.status()["allowed_sources"] == sources
    assert response.status_code == status
    assert len(accept.events) == (status == 202)
    if status == 403:
        assert "allowed_sources" in response.json()["message"]


async def test_allowed_sources_is_checked_before_the_signature_and_the_body() -> None:
    accept = FakeAccept()
    async with serving(accept=accept, allowed_sources=["10.0.0.0/8"], hmac_secret="s",
                       signature_scheme="github", max_body_bytes=10) as (_, client):
        response = await client.post("/hook", content=b"x" * 100)  # unsigned and too big
    assert response.status_code == 403


def test_an_ipv4_mapped_peer_matches_its_ipv4_network() -> None:
    import ipaddress

    networks = (ipaddress.ip_network("192.30.252.0/22"),)
    assert _source_allowed("::ffff:192.30.252.17", networks)
    assert not _source_allowed("::ffff:10.0.0.1", networks)
    assert not _source_allowed(None, networks)
    assert not _source_allowed("not-an-address", networks)


# -- bodies the journal could not hold ------------------------------------------------------------
UNHOLDABLE = {
    "1e400": b'{"x": 1e400}',
    "-1e400": b'{"x": [1, -1e400]}',
    "NaN": b'{"x": NaN}',
    "Infinity": b'{"x": Infinity}',
    "-Infinity": b"-Infinity",
    "huge-int": b'{"x": ' + b"9" * 5000 + b"}",
    "too-deep": b"[" * 100 + b"]" * 100,
    "very-deep": b'{"a":' * 5000 + b"1" + b"}" * 5000,
}


@pytest.mark.parametrize("name", list(UNHOLDABLE))
async def test_a_body_json_cannot_hold_is_400_not_503(name: str) -> None:
    accept = FakeAccept()
    async with serving(accept=accept) as (_, client):
        response = await client.post("/hook", content=UNHOLDABLE[name],
                                     headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["message"].startswith("invalid JSON")
    assert "retry-after" not in response.headers
    assert accept.events == []


@pytest.mark.parametrize("body", [
    b"payload=%7B%22x%22%3A%201e400%7D",  # payload={"x": 1e400}
    b"payload=%7B%22x%22%3A%20NaN%7D",
    b"a=%FF%FE",  # not UTF-8 once unescaped
])
async def test_a_form_body_the_journal_could_not_hold_is_400(body: bytes) -> None:
    async with serving() as (_, client):
        response = await client.post("/hook", content=body, headers={
            "Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code == 400


async def test_1e400_through_a_real_process_is_400_and_nothing_is_journaled(
        tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "journal.db")
    model = QuickModel()
    process = AgentProcess("alerts", ProcessConfig(
        triggers=[{"type": "webhook", "webhook_port": 0, "webhook_path": "/in"}],
        journal={"level": "checkpoint"}), model=model, journal=journal)
    await process.start()
    try:
        port = int(process.status()["triggers"][0]["port"])
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                     trust_env=False) as client:
            bad = await client.post("/in", content=b'{"x": 1e400}',
                                    headers={"Content-Type": "application/json"})
            good = await client.post("/in", json={"x": 1e300})
        assert (bad.status_code, good.status_code) == (400, 202)
        await wait_for(lambda: model.calls == 1)
        accepted = await journal.read(ReadFilter(process="alerts",
                                                 entry_type=EntryType.EVENT_ACCEPTED))
        assert [e.data["event_id"] for e in accepted] == [good.json()["event_id"]]
        assert journal.fault is None
    finally:
        await process.close()
        await journal.close()


# -- property: whatever a client sends, never a 5xx but backpressure ------------------------------
GH_SECRET, SLACK_SECRET = "fuzz-gh", "fuzz-slack"
SERVED = ("/in", "/gh", "/slack")
BACKPRESSURE = ("queue full", "too many signed requests; try again later")


class Served:
    """A process with three webhooks on one port, running on its own loop in a thread, so the
    property test (synchronous) can post to it with a plain client."""

    def __init__(self, tmp: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.port = free_port()
        self.journal = SQLiteJournal(tmp / "journal.db")
        self.model = QuickModel()
        hooks: list[dict[str, Any]] = [
            {"type": "webhook", "webhook_port": self.port, "webhook_path": "/in"},
            {"type": "webhook", "webhook_port": self.port, "webhook_path": "/gh",
             "hmac_secret": GH_SECRET, "signature_scheme": "github"},
            {"type": "webhook", "webhook_port": self.port, "webhook_path": "/slack",
             "hmac_secret": SLACK_SECRET, "signature_scheme": "slack"},
        ]
        self.process = self.call(self._start(hooks))

    async def _start(self, hooks: list[dict[str, Any]]) -> AgentProcess:
        process = AgentProcess("fuzz", ProcessConfig(
            triggers=hooks, queue_size=10_000, journal={"level": "checkpoint"}),
            model=self.model, journal=self.journal)
        await process.start()
        return process

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def close(self) -> None:
        try:
            self.call(self.process.close())
            self.call(self.journal.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    live = Served(tmp_path_factory.mktemp("fuzz"))
    try:
        yield live
    finally:
        live.close()


def mostly(usual: st.SearchStrategy[T], odd: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """``usual`` four times in five, so most requests get as far as the body and the process
    (hypothesis's own choice between strategies is not even)."""
    return st.integers(0, 4).flatmap(lambda n: usual if n else odd)


header_bytes = st.text(st.characters(min_codepoint=0x21, max_codepoint=0xFF,
                                     blacklist_characters="\x7f"), min_size=1, max_size=40)
header_names = st.one_of(
    st.sampled_from(["content-type", "origin", "host", "x-hub-signature-256",
                     "x-github-delivery", "x-slack-signature", "x-slack-request-timestamp",
                     "stripe-signature", "webhook-id", "content-encoding", "expect"]),
    st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,20}", fullmatch=True))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20)
number_literals = st.from_regex(r"-?[0-9]{1,3}(\.[0-9]{1,3})?[eE][+-]?[0-9]{1,4}",
                                fullmatch=True)  # 1e400 is a literal json.dumps never writes
bodies = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),  # floats give NaN and Infinity too
    number_literals.map(lambda n: f'{{"x": [{n}]}}'.encode()),
    st.sampled_from([b'{"x": 1e400}', b"[" * 300, b'{"type": "url_verification", '
                     b'"challenge": "c"}', b"\xef\xbb\xbf{}", b'"\\ud800"']),
    json_values.map(lambda v: b"payload=" + quote(json.dumps(v)).encode()),
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4).map(
        lambda d: "&".join(f"{quote(k)}={quote(v)}" for k, v in d.items()).encode()),
)
content_types = st.sampled_from([  # weighted towards what gets parsed
    "application/json", "application/json", "application/json",
    "application/x-www-form-urlencoded", "text/plain", "",
    "application/vnd.x+json", "application/json; charset=latin-1", "multipart/form-data"])
odd_paths = st.one_of(st.sampled_from(["/health", "/", "/in/", "//in", "/%2e%2e/in"]),
                      st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E,
                                            blacklist_characters="#?%"), max_size=30).map(
                          lambda s: "/" + s))
paths = mostly(st.sampled_from(SERVED), odd_paths)


@pytest.mark.slow
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(method=mostly(st.just("POST"), st.sampled_from(["GET", "PUT", "DELETE", "PATCH",
                                                      "OPTIONS", "HEAD", "PROPFIND"])),
       path=paths, body=bodies, content_type=content_types,
       extra=st.lists(st.tuples(header_names, header_bytes), max_size=4),
       sign=mostly(st.just(True), st.just(False)), delivery=st.sampled_from(["d1", "d2", "d3"]))
def test_no_request_gets_a_5xx_other_than_backpressure(
        served: Served, method: str, path: str, body: bytes, content_type: str,
        extra: list[tuple[str, str]], sign: bool, delivery: str) -> None:
    headers: list[tuple[bytes, bytes]] = []
    if content_type:
        headers.append((b"content-type", content_type.encode()))
    if sign and path == "/gh":
        headers += [(k.encode(), v.encode()) for k, v in github(body, GH_SECRET, delivery)
                    .items() if k != "Content-Type"]
    if sign and path == "/slack":
        headers += [(k.encode(), v.encode()) for k, v in slack(body, SLACK_SECRET).items()
                    if k != "Content-Type"]
    headers += [(name.encode(), value.encode("latin-1")) for name, value in extra]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{served.port}", trust_env=False,
                          timeout=30) as client:
            response = client.request(method, path, content=body, headers=headers)
    except (httpx.LocalProtocolError, httpx.UnsupportedProtocol, httpx.InvalidURL):
        return  # the client refused to send it: nothing reached the server
    if response.status_code >= 500:
        assert response.status_code == 503, (response.status_code, response.text)
        assert response.headers.get("retry-after")
        if method != "HEAD":
            assert response.json()["message"] in BACKPRESSURE, response.text


@pytest.mark.slow
def test_the_fuzzed_process_is_still_running_with_a_healthy_journal(served: Served) -> None:
    assert served.process.status()["state"] == "running"
    assert served.journal.fault is None
    with httpx.Client(base_url=f"http://127.0.0.1:{served.port}", trust_env=False) as client:
        assert client.post("/in", json={"after": "fuzz"}).status_code == 202
