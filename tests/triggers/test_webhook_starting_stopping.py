"""While a runtime starts or stops, a webhook path answers 503 with Retry-After, never 404
(issue 31: a sender that takes 404 as final drops the event). Processes of one runtime share a
webhook server per port; the server listens once the first of them starts and until the last
stops, so a path whose process is not serving yet, or any more, used to get 404."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import pytest

from runtime_core import AgentRuntime, ProcessConfig
from tests.helpers.polling import wait_for
from tests.helpers.ports import free_port


def make_runtime(port: int, paths: tuple[str, ...] = ("/a", "/b")) -> AgentRuntime:
    runtime = AgentRuntime()
    for path in paths:
        runtime.add_process(path.strip("/"), ProcessConfig(model="echo", triggers=[
            {"type": "webhook", "webhook_port": port, "webhook_path": path}]))
    return runtime


def client(port: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False,
                             timeout=5)


def not_now(answer: httpx.Response) -> bool:
    """503 with Retry-After and a reason: the sender tries again."""
    return answer.status_code == 503 and bool(answer.headers.get("Retry-After")) and \
        answer.json()["status"] == "unavailable"


async def test_a_path_whose_process_is_not_serving_yet_or_any_more_is_503_not_404() -> None:
    port = free_port()
    runtime = make_runtime(port)
    a, b = runtime.get_process("a"), runtime.get_process("b")
    try:
        await a.start()  # the shared server listens; b has not started
        async with client(port) as http:
            before = await http.post("/b", json={"n": 1})
            health = await http.get("/health", params={"path": "/b"})
            nowhere = await http.post("/nowhere", json={})
            await b.start()
            served = await http.post("/b", json={"n": 2})
            await b.stop()  # a still holds the port
            after = await http.post("/b", json={"n": 3})
            await b.remove_trigger(b.status()["triggers"][0]["id"])
            removed = await http.post("/b", json={"n": 4})
        assert not_now(before), before.text
        assert "starting or stopping" in before.json()["message"]
        assert health.status_code == 503 and health.headers["Retry-After"]
        assert nowhere.status_code == 404  # no process here serves it: still 404
        assert served.status_code == 202, served.text
        assert not_now(after), after.text
        assert removed.status_code == 404  # its trigger is gone: nothing will serve it
    finally:
        await runtime.close()


@pytest.mark.slow  # three runtime starts and stops under a stream of requests
async def test_a_sender_hammering_through_a_runtime_start_and_stop_never_gets_404() -> None:
    port = free_port()
    runtime = make_runtime(port, ("/a", "/b", "/c"))
    answers: list[tuple[str, int, dict[str, Any], str]] = []
    stop = asyncio.Event()

    async def hammer(path: str) -> None:
        async with client(port) as http:
            while not stop.is_set():
                try:
                    answer = await http.post(path, json={"n": len(answers)})
                except httpx.TransportError:  # not listening (yet, or any more): retried
                    await asyncio.sleep(0.001)
                    continue
                answers.append((path, answer.status_code, dict(answer.headers),
                                answer.text))

    senders = [asyncio.create_task(hammer(path)) for path in ("/a", "/b", "/c")]
    try:
        for _ in range(3):  # start, stop; start, stop; ...
            await runtime.start_all()
            seen = len(answers)
            await wait_for(lambda seen=seen: len(answers) > seen + 6,
                           what="answers while running")
            await runtime.stop_all()
    finally:
        stop.set()
        for sender in senders:
            with contextlib.suppress(Exception):
                await sender
        await runtime.close()
    statuses = {status for _, status, _, _ in answers}
    assert 404 not in statuses, [a for a in answers if a[1] == 404][:3]
    assert 202 in statuses
    assert statuses <= {202, 503}, statuses
    assert all(headers.get("retry-after") for _, status, headers, _ in answers
               if status == 503)
