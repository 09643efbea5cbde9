"""The webhook server's ``GET /health`` tells a load balancer whether the process behind it takes
events: 200 while it runs (or is suspended: events queue), 503 with the process state while it is
failed, and for one path with ``?path=``."""

from __future__ import annotations

import httpx

from runtime_core import AgentProcess, ProcessConfig
from runtime_core.lifecycle import ProcessState
from tests.helpers.polling import wait_for
from tests.helpers.ports import free_port


def _config(path: str, model: dict[str, object]) -> ProcessConfig:
    return ProcessConfig(model=model, max_consecutive_failures=1, triggers=[
        {"type": "webhook", "webhook_port": 0, "webhook_path": path}])


async def test_health_is_503_with_the_state_while_the_process_is_failed() -> None:
    process = AgentProcess("hooks", _config("/alerts", {"turns": [{"raise": "boom"}]}))
    await process.start()
    port = int(process.status()["triggers"][0]["port"])
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as client:
        healthy = await client.get("/health")
        assert (healthy.status_code, healthy.json()) == (200, {"status": "ok"})
        await process.suspend()  # suspended: events still queue, so still healthy
        assert (await client.get("/health")).status_code == 200
        await process.resume()
        assert (await client.post("/alerts", json={"n": 1})).status_code == 202
        await wait_for(lambda: process.state is ProcessState.FAILED, what="failed")
        failed = await client.get("/health")
        assert failed.status_code == 503
        assert failed.headers["retry-after"] == "30"
        assert failed.json() == {"status": "unavailable"}  # no path, state or reason
        one = await client.get("/health", params={"path": "/alerts"})
        assert one.status_code == 503
        assert (await client.get("/health", params={"path": "/nope"})).status_code == 404
        assert (await client.post("/alerts", json={"n": 2})).status_code == 503
    await process.start()  # a start from FAILED: healthy again (port 0: a new port)
    port = int(process.status()["triggers"][0]["port"])
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as client:
        assert (await client.get("/health")).status_code == 200
    await process.stop()


async def test_two_processes_on_one_server_each_path_reports_its_own() -> None:
    port = free_port()  # both processes share it
    good = AgentProcess("good", ProcessConfig(model="echo", triggers=[
        {"type": "webhook", "webhook_port": port, "webhook_path": "/good"}]))
    bad = AgentProcess("bad", ProcessConfig(
        model={"turns": [{"raise": "boom"}]}, max_consecutive_failures=1,
        triggers=[{"type": "webhook", "webhook_port": port, "webhook_path": "/bad"}]))
    await good.start()
    await bad.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                     trust_env=False) as client:
            assert (await client.post("/bad", json={})).status_code == 202
            await wait_for(lambda: bad.state is ProcessState.FAILED, what="failed")
            both = await client.get("/health")
            assert both.status_code == 503
            assert both.json() == {"status": "unavailable"}
            assert (await client.get("/health", params={"path": "/bad"})).status_code == 503
            assert (await client.get("/health", params={"path": "/good"})).status_code == 200
    finally:
        await bad.stop()
        await good.stop()
