"""The hosts' inject (issue 31): an Idempotency-Key makes a retry safe (one event, the first
answer, across a restart on the same journal), and a refused inject keeps nothing (409 for a
stopped process, 503 with Retry-After while it drains or its queue is full), where the spec's
``AgentProcess.inject`` still dead-letters what it refuses. The API is called in the test's loop
through its ASGI app (no server), the runtime driven directly."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime_core import AgentRuntime, ProcessConfig, TriggerEvent
from runtime_core.agent.model import ModelRequest, ModelTurn
from runtime_core.api.server import create_app
from runtime_core.control import ControlError, LocalControl
from runtime_core.journal import EntryType, ReadFilter, SQLiteJournal
from tests.helpers.polling import wait_for
from tests.helpers.serving import TOKEN


class GatedModel:
    """Replies once ``gate`` is set (so a run can be held in flight); counts its calls."""

    name = "gated"

    def __init__(self, *, open_gate: bool = True) -> None:
        self.calls = 0
        self.gate = asyncio.Event()
        if open_gate:
            self.gate.set()

    async def complete(self, request: ModelRequest) -> ModelTurn:
        self.calls += 1
        await self.gate.wait()
        return ModelTurn(reply="done")


def make_runtime(model: GatedModel, journal: Path | None = None, **config: Any
                 ) -> AgentRuntime:
    runtime = AgentRuntime()
    runtime.add_process("worker", ProcessConfig(
        journal={"level": "checkpoint", "backend": "sqlite", "path": str(journal)}
        if journal is not None else {"level": "none"}, **config), model=model)
    return runtime


@asynccontextmanager
async def api(runtime: AgentRuntime) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(LocalControl(runtime), token=TOKEN, start_processes=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1/api/v1",
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        yield client


def inject(client: httpx.AsyncClient, payload: dict[str, Any], key: str | None = None
           ) -> Any:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return client.post("/processes/worker/inject", json={"payload": payload}, headers=headers)


async def accepted_events(path: Path) -> list[str]:
    journal = SQLiteJournal(path)  # what is durable
    await journal.open()
    try:
        entries = await journal.read(ReadFilter(process="worker",
                                                entry_type=EntryType.EVENT_ACCEPTED))
        return [str(entry.data.get("event_id")) for entry in entries]
    finally:
        await journal.close()


# -- the idempotency key -----------------------------------------------------------------------
async def test_the_same_key_twice_queues_one_event_and_answers_200_with_the_first_id() -> None:
    model = GatedModel()
    runtime = make_runtime(model)
    await runtime.start_all()
    try:
        async with api(runtime) as client:
            first = await inject(client, {"order": 7}, key="order-7-try")
            again = await inject(client, {"order": 7}, key="order-7-try")
            other = await inject(client, {"order": 8}, key="order-8-try")
            plain = await inject(client, {"order": 9})
        assert first.status_code == 202, first.text
        assert first.json() == {"name": "worker", "event_id": first.json()["event_id"],
                                "replayed": False}
        assert again.status_code == 200, again.text
        assert again.json() == {"name": "worker", "event_id": first.json()["event_id"],
                                "replayed": True}
        assert other.status_code == plain.status_code == 202
        assert len({first.json()["event_id"], other.json()["event_id"],
                    plain.json()["event_id"]}) == 3
        await wait_for(lambda: model.calls == 3, what="three runs")
        assert runtime.get_process("worker").invocation_count == 3
    finally:
        await runtime.close()


async def test_a_key_repeated_after_a_restart_on_the_same_journal_runs_once(
        tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    model = GatedModel()
    runtime = make_runtime(model, path)
    await runtime.start_all()
    try:
        async with api(runtime) as client:
            first = await inject(client, {"order": 7}, key="0b9a3c1e-order-7")
        assert first.status_code == 202
        await wait_for(lambda: model.calls == 1, what="the run")
    finally:
        await runtime.close()
    restarted = make_runtime(model, path)  # a new program on the same journal
    await restarted.start_all()
    try:
        async with api(restarted) as client:
            again = await inject(client, {"order": 7}, key="0b9a3c1e-order-7")
        assert again.status_code == 200, again.text
        assert again.json()["event_id"] == first.json()["event_id"]
        assert again.json()["replayed"] is True
    finally:
        await restarted.close()
    assert await accepted_events(path) == [first.json()["event_id"]]
    assert model.calls == 1


async def test_the_same_key_at_the_same_moment_is_taken_once() -> None:
    model = GatedModel()
    runtime = make_runtime(model)
    await runtime.start_all()
    try:
        control = LocalControl(runtime)
        answers = await asyncio.gather(*(control.inject_once(
            "worker", {"n": 1}, idempotency_key="at-once") for _ in range(5)))
        assert len({a.event_id for a in answers}) == 1
        assert sorted(a.replayed for a in answers) == [False, True, True, True, True]
        # the in-process call takes the key too, and returns the first id
        assert await control.inject("worker", {"n": 1}, idempotency_key="at-once") == \
            answers[0].event_id
        await wait_for(lambda: model.calls == 1, what="the run")
        assert runtime.get_process("worker").invocation_count == 1
    finally:
        await runtime.close()


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "caf\u00e9", "a\"b"])
async def test_a_malformed_key_is_422_naming_the_rule(key: str) -> None:
    runtime = make_runtime(GatedModel())
    await runtime.start_all()
    try:
        async with api(runtime) as client:
            answer = await client.post("/processes/worker/inject", json={"payload": {}},
                                       headers={"Idempotency-Key": key.encode()})
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "INVALID_REQUEST"
        assert "Idempotency-Key" in answer.text or "idempotency key" in answer.text
        assert runtime.get_process("worker").status()["queue_size"] == 0
        with pytest.raises(ControlError, match="idempotency key") as refused:
            await LocalControl(runtime).inject("worker", {}, idempotency_key=key or " ")
        assert refused.value.code == "INVALID_REQUEST"
    finally:
        await runtime.close()


async def test_a_quoted_key_is_the_same_key() -> None:
    """The IETF draft writes the key as a quoted string; Stripe's clients write it bare."""
    runtime = make_runtime(GatedModel())
    await runtime.start_all()
    try:
        async with api(runtime) as client:
            bare = await inject(client, {}, key="k-1")
            quoted = await inject(client, {}, key='"k-1"')
        assert (bare.status_code, quoted.status_code) == (202, 200)
        assert quoted.json()["event_id"] == bare.json()["event_id"]
    finally:
        await runtime.close()


# -- a refused inject keeps nothing ------------------------------------------------------------
async def test_an_inject_for_a_stopped_process_is_409_and_keeps_no_dead_letter(
        tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    runtime = make_runtime(GatedModel(), path)
    await runtime.start_all()
    process = runtime.get_process("worker")
    try:
        await process.stop()
        async with api(runtime) as client:
            refused = await inject(client, {"order": 7})
            keyed = await inject(client, {"order": 7}, key="k-stopped")
        for answer in (refused, keyed):
            assert answer.status_code == 409, answer.text
            assert answer.json()["error"]["code"] == "NOT_RUNNING"
            assert "nothing was accepted" in answer.text and "promptui start" in answer.text
        assert process.dead_letters == []
        await process.start()  # the key was not spent: the client's retry is taken now
        async with api(runtime) as client:
            retried = await inject(client, {"order": 7}, key="k-stopped")
        assert retried.status_code == 202
    finally:
        await runtime.close()
    reader = SQLiteJournal(path)
    await reader.open()
    try:
        assert await reader.dead_letters("worker") == []
    finally:
        await reader.close()


async def test_an_inject_during_a_drain_is_503_with_retry_after_and_keeps_nothing() -> None:
    model = GatedModel(open_gate=False)
    runtime = make_runtime(model)
    await runtime.start_all()
    process = runtime.get_process("worker")
    try:
        async with api(runtime) as client:
            assert (await inject(client, {"n": 1})).status_code == 202
            await wait_for(lambda: model.calls == 1, what="the run in flight")
            stopping = asyncio.create_task(process.stop(30))  # drains: the run may finish
            await wait_for(lambda: process.status().get("draining"), what="the drain")
            refused = await inject(client, {"n": 2})
            keyed = await inject(client, {"n": 2}, key="k-drain")
            model.gate.set()
            await stopping
        for answer in (refused, keyed):
            assert answer.status_code == 503, answer.text
            assert answer.headers["Retry-After"]
            assert answer.json()["error"]["code"] == "NOT_ACCEPTING"
            assert "draining" in answer.text
        assert process.dead_letters == []
        assert model.calls == 1
    finally:
        await runtime.close()


async def test_an_inject_into_a_full_queue_is_503_and_keeps_nothing() -> None:
    model = GatedModel(open_gate=False)
    runtime = make_runtime(model, queue_size=1)
    await runtime.start_all()
    process = runtime.get_process("worker")
    try:
        async with api(runtime) as client:
            assert (await inject(client, {"n": 1})).status_code == 202
            await wait_for(lambda: model.calls == 1, what="the first run")
            assert (await inject(client, {"n": 2})).status_code == 202  # the one slot
            full = await inject(client, {"n": 3}, key="k-full")
        assert full.status_code == 503, full.text
        assert full.headers["Retry-After"]
        assert full.json()["error"]["code"] == "QUEUE_FULL"
        assert process.dead_letters == []
        model.gate.set()
        await wait_for(lambda: model.calls == 2 and not process.active_runs(), what="runs")
        async with api(runtime) as client:
            assert (await inject(client, {"n": 3}, key="k-full")).status_code == 202
    finally:
        await runtime.close()


async def test_code_calling_agent_process_inject_still_gets_a_dead_letter() -> None:
    """The spec's inject() is unchanged: refused, it returns False and dead-letters."""
    runtime = make_runtime(GatedModel())
    await runtime.start_all()
    process = runtime.get_process("worker")
    try:
        await process.stop()
        assert await process.inject(TriggerEvent("t", "manual", {"n": 1})) is False
        assert [d["reason"] for d in process.dead_letters] == ["process stopped"]
    finally:
        await runtime.close()
