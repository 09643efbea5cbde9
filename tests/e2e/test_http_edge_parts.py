"""The parts behind the HTTP servers' hostile edges, fast: strict Host parsing, the trusted
proxies setting, the body limits and the split connection budget."""

from __future__ import annotations

import asyncio

import pytest

from runtime_core.http.limits import (
    API,
    ENV_BODY_MIN_RATE,
    ENV_BODY_TIMEOUT,
    ENV_TRUSTED_PROXIES,
    WEBHOOK,
    ConnectionBudget,
    ServerLimits,
    parse_trusted_proxies,
)
from runtime_core.http.origin import host_name, is_loopback, refusal


@pytest.mark.parametrize(("header", "name"), [
    ("127.0.0.1", "127.0.0.1"), ("127.0.0.1:8765", "127.0.0.1"), ("localhost:9", "localhost"),
    ("[::1]:80", "::1"), ("[::1]", "::1"), ("hooks.example.com", "hooks.example.com"),
    ("127.0.0.1:8765@evil.com", ""), ("user@127.0.0.1", ""), ("127.0.0.1/x", ""),
    ("127.0.0.1:80:90", ""), ("127.0.0.1 evil.com", ""), ("127.0.0.1:", ""), ("", "")])
def test_host_is_parsed_strictly(header: str, name: str) -> None:
    assert host_name(header) == name


def test_a_host_with_userinfo_is_refused_on_a_loopback_bind() -> None:
    assert refusal({"host": "127.0.0.1:8765@evil.com"}, "127.0.0.1") is not None
    assert refusal({"host": "127.0.0.1:8765"}, "127.0.0.1") is None
    assert not is_loopback(host_name("localhost@evil.com"))


def test_trusted_proxies_are_named_or_none() -> None:
    assert ServerLimits.from_env({}).proxy_options() == {"proxy_headers": False}
    named = ServerLimits.from_env({ENV_TRUSTED_PROXIES: "10.0.0.5, 10.1.0.0/16"})
    assert named.proxy_options() == {"proxy_headers": True,
                                     "forwarded_allow_ips": ["10.0.0.5/32", "10.1.0.0/16"]}
    bad = ServerLimits.from_env({ENV_TRUSTED_PROXIES: "10.0.0.5,proxy.lan"})
    assert bad.proxy_options() == {"proxy_headers": False}  # a bad list trusts nobody
    with pytest.raises(ValueError, match=r"'proxy\.lan' is not an IP address"):
        parse_trusted_proxies("proxy.lan")


def test_body_limits_come_from_the_environment() -> None:
    limits = ServerLimits.from_env({ENV_BODY_TIMEOUT: "2.5", ENV_BODY_MIN_RATE: "0"})
    assert (limits.body_timeout, limits.body_min_rate) == (2.5, 1024)


def test_the_api_and_each_webhook_server_have_their_own_budget() -> None:
    limits = ServerLimits(max_connections=40)
    assert (limits.api_budget, limits.webhook_budget) == (10, 30)
    budget = ConnectionBudget()
    loop = asyncio.new_event_loop()
    try:
        budget.register(loop, "api", API)
        budget.register(loop, "hook-a", WEBHOOK)
        budget.register(loop, "hook-b", WEBHOOK)
        assert sum(budget.take(loop, "api", API, limits) for _ in range(50)) == 10
        assert sum(budget.take(loop, "hook-a", WEBHOOK, limits) for _ in range(50)) == 15
        assert sum(budget.take(loop, "hook-b", WEBHOOK, limits) for _ in range(50)) == 15
        budget.unregister(loop, "hook-b")  # one server stopped: the other may grow
        budget.give_back(loop, "api", API)
        assert budget.take(loop, "api", API, limits)
        assert budget.open_count() == 40
    finally:
        loop.close()
