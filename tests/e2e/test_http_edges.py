"""Hostile edges of both HTTP servers of a real ``promptui serve`` (the control API and a
webhook), sent as an attacker would on a loopback socket: a Host with userinfo, a spoofed
X-Forwarded-For against ``allowed_sources``, a body trickled byte by byte, and a webhook
``/health`` asked without a token."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from runtime_core.http.limits import ENV_BODY_TIMEOUT, ENV_MAX_CONNECTIONS, ENV_TRUSTED_PROXIES
from tests.helpers.cli import finish_promptui
from tests.helpers.serving import Served, hook_agent, start_serve

pytestmark = pytest.mark.slow

BODY_TIMEOUT = 1.0
HOOK = hook_agent("""\
  - {type: webhook, webhook_host: 127.0.0.1, webhook_port: 0, webhook_path: /office,
     allowed_sources: [10.0.0.0/8]}
""")


def _serve(folder: Path, *args: str) -> Served:
    (folder / "agents").mkdir(parents=True, exist_ok=True)
    (folder / "agents" / "hook.agent").write_text(HOOK)
    return start_serve(folder, "agents", *args)


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    monkeypatch.setenv(ENV_BODY_TIMEOUT, str(BODY_TIMEOUT))
    monkeypatch.delenv(ENV_TRUSTED_PROXIES, raising=False)
    server = _serve(tmp_path)
    yield server
    assert server.stop() == 0, server.stderr()[-3000:]


def _ports(server: Served) -> dict[str, int]:
    """The API's port and each webhook path's."""
    triggers = server.client().get("/processes/hook/triggers").json()
    ports = {t["path"]: int(t["port"]) for t in triggers}
    return {"api": int(server.url.rsplit(":", 1)[1]), **ports}


def _exchange(port: int, request: bytes, timeout: float = 10) -> bytes:
    """Send raw bytes; everything the server answers until it closes (or ``timeout``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        return _read_all(sock)


def _read_all(sock: socket.socket) -> bytes:
    answer = b""
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except ConnectionResetError:
        pass
    return answer


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def test_a_host_with_userinfo_is_misdirected_on_both_servers(served: Served) -> None:
    ports = _ports(served)
    for port, request in (
            (ports["api"], b"GET /api/v1/processes HTTP/1.1\r\nHost: 127.0.0.1:%d@evil.com\r\n"
             b"Authorization: Bearer " + served.token.encode() + b"\r\n\r\n"),
            (ports["/hook"], b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1:%d@evil.com\r\n"
             b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")):
        answer = _exchange(port, request.replace(b"%d", str(port).encode()))
        assert _status(answer) == 421, answer
    # The same requests with a plain Host are taken.
    api = served.client()
    assert api.get("/processes").status_code == 200
    hook = httpx.post(f"http://127.0.0.1:{ports['/hook']}/hook", json={}, trust_env=False)
    assert hook.status_code == 202


def test_webhook_health_says_ok_and_nothing_more(served: Served) -> None:
    port = _ports(served)["/hook"]
    health = httpx.get(f"http://127.0.0.1:{port}/health", trust_env=False)
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert "/hook" not in health.text


def test_a_spoofed_forwarded_for_does_not_pass_allowed_sources(served: Served) -> None:
    port = _ports(served)["/office"]
    spoofed = httpx.post(f"http://127.0.0.1:{port}/office", json={"n": 1}, trust_env=False,
                         headers={"X-Forwarded-For": "10.1.2.3"})
    assert spoofed.status_code == 403, spoofed.text
    assert "allowed_sources" in spoofed.text


def test_named_proxies_are_trusted_for_allowed_sources(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_TRUSTED_PROXIES, raising=False)
    server = _serve(tmp_path, "--trusted-proxies", "127.0.0.1/32")
    try:
        port = _ports(server)["/office"]
        url = f"http://127.0.0.1:{port}/office"
        forwarded = httpx.post(url, json={"n": 1}, trust_env=False,
                               headers={"X-Forwarded-For": "10.1.2.3"})
        assert forwarded.status_code == 202, forwarded.text
        outside = httpx.post(url, json={"n": 2}, trust_env=False,
                             headers={"X-Forwarded-For": "192.0.2.7"})
        assert outside.status_code == 403, outside.text
    finally:
        assert server.stop() == 0, server.stderr()[-3000:]


def test_a_bad_trusted_proxy_is_refused_at_start(tmp_path: Path) -> None:
    result, _took = finish_promptui(
        ["serve", "--port", "0", "--trusted-proxies", "10.0.0.0/8,proxy.lan"], tmp_path)
    assert result.returncode == 2, result.stderr
    assert "--trusted-proxies" in result.stderr and "not an IP address" in result.stderr


def _trickle(port: int, head: bytes, seconds: float) -> tuple[bytes, float]:
    """Headers promising 1000 bytes, then one byte every 0.2 s: the answer and how long the
    connection stayed open."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=seconds + 10) as sock:
        sock.sendall(head)
        sock.setblocking(False)
        answer = b""
        while time.monotonic() - started < seconds:
            try:
                sock.send(b" ")
                chunk = sock.recv(65536)
            except BlockingIOError:
                time.sleep(0.2)  # the attack's pace, not a wait for a condition
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
            if not chunk:
                break
            answer += chunk
        sock.setblocking(True)
        if time.monotonic() - started < seconds:
            answer += _read_all(sock)
    return answer, time.monotonic() - started


def test_a_trickled_body_is_answered_408_and_closed_on_both_servers(served: Served) -> None:
    ports = _ports(served)
    hook, took = _trickle(ports["/hook"], b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n", 8)
    assert _status(hook) == 408, hook
    assert json.loads(hook.split(b"\r\n\r\n", 1)[1])["status"] == "error"
    assert took < BODY_TIMEOUT + 4
    api, took = _trickle(ports["api"], b"POST /api/v1/processes/hook/inject HTTP/1.1\r\n"
                         b"Host: 127.0.0.1\r\nAuthorization: Bearer " + served.token.encode()
                         + b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
                         8)
    assert _status(api) == 408, api
    assert json.loads(api.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "REQUEST_TIMEOUT"
    assert took < BODY_TIMEOUT + 4
    # Nothing half-sent became an event; a whole body still does, at any ordinary pace.
    assert httpx.post(f"http://127.0.0.1:{ports['/hook']}/hook", json={"n": 1},
                      trust_env=False).status_code == 202
    assert "did not arrive in time" in served.stderr()


def test_unauthenticated_clients_cannot_take_the_connection_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MAX_CONNECTIONS, "40")  # the API 10, the two webhook servers 15 each
    monkeypatch.setenv(ENV_BODY_TIMEOUT, "60")  # the attack is not cut short by the 408 here
    server = _serve(tmp_path)
    held: list[socket.socket] = []
    try:
        ports = _ports(server)
        for _ in range(60):  # unauthenticated, holding: half-sent headers, half-sent bodies
            api = socket.create_connection(("127.0.0.1", ports["api"]), timeout=10)
            api.sendall(b"GET /api/v1/processes HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            hook = socket.create_connection(("127.0.0.1", ports["/hook"]), timeout=10)
            hook.sendall(b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n"
                         b"Content-Type: application/json\r\n\r\n{")
            held += [api, hook]
        for n in range(5):  # each on a new connection, as a sender or an operator comes
            with httpx.Client(trust_env=False, timeout=10) as fresh:
                answer = fresh.get(f"{server.url}/api/v1/processes",
                                   headers={"Authorization": f"Bearer {server.token}"})
                assert answer.status_code == 200, answer.text
                hook = fresh.post(f"http://127.0.0.1:{ports['/hook']}/hook", json={"n": n})
                assert hook.status_code == 202, hook.text
        assert "closed the oldest unauthenticated connection" in server.stderr()
    finally:
        for sock in held:
            sock.close()
        assert server.stop() == 0, server.stderr()[-3000:]
