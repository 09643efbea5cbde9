"""Accepted means it runs: a queue slot is reserved before an event is journaled and
acknowledged, so a burst against a small queue gets 202 only for events that will run (each
exactly once) and 503 for the rest, never 202 and then a "queue full" dead letter."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.agent.model import ModelRequest, ModelTurn
from runtime_core.journal import EntryType, ReadFilter, SQLiteJournal
from tests.helpers.polling import wait_for


class GatedModel:
    """Answers only once the gate opens, so the queue stays full during a burst."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelTurn:
        await self.gate.wait()
        return ModelTurn(reply="done")


def webhook_process(tmp_path: Path, model: GatedModel, *, queue_size: int
                    ) -> tuple[AgentProcess, SQLiteJournal]:
    journal = SQLiteJournal(tmp_path / "journal.db")
    config = ProcessConfig(
        triggers=[{"type": "webhook", "webhook_port": 0, "webhook_path": "/in"}],
        queue_size=queue_size, journal={"level": "checkpoint"})
    return AgentProcess("burst", config, model=model, journal=journal), journal


async def accepted_ids(journal: SQLiteJournal) -> list[str]:
    entries = await journal.read(ReadFilter(process="burst",
                                            entry_type=EntryType.EVENT_ACCEPTED))
    return [e.data["event_id"] for e in entries]


async def finished_ids(journal: SQLiteJournal) -> list[str]:
    entries = await journal.read(ReadFilter(process="burst",
                                            entry_type=EntryType.RUN_FINISHED))
    return [e.data["event_id"] for e in entries]


@pytest.mark.slow
async def test_a_burst_on_a_small_queue_runs_every_202_once_and_503s_the_rest(
        tmp_path: Path) -> None:
    model = GatedModel()
    process, journal = webhook_process(tmp_path, model, queue_size=20)
    await process.start()
    try:
        port = int(process.status()["triggers"][0]["port"])
        # 100 senders of 4 requests each, each on its own connection, as independent senders
        # would be. (One client pooling 100 connections for 400 queued requests spends its
        # time in httpcore's pool bookkeeping, which polls every connection for every request;
        # on a loaded box a connection it picked then idles past the server's 5 s keep-alive
        # before its request is written, and the close reads as a ReadError.)
        async def sender(numbers: range) -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30,
                                         trust_env=False) as client:
                return [await client.post("/in", json={"n": n}) for n in numbers]

        batches = await asyncio.gather(*(sender(range(k, 400, 100)) for k in range(100)))
        answers = [answer for batch in batches for answer in batch]
        by_status = Counter(a.status_code for a in answers)
        assert set(by_status) == {202, 503}, by_status
        # The queue holds 20 and one worker holds one more in its run.
        assert 20 <= by_status[202] <= 21, by_status
        assert all(a.headers["retry-after"] for a in answers if a.status_code == 503)
        acknowledged = [a.json()["event_id"] for a in answers if a.status_code == 202]
        assert process.dead_letters == []  # nothing acknowledged was pushed out
        assert sorted(await accepted_ids(journal)) == sorted(acknowledged)

        model.gate.set()
        await wait_for(lambda: process.invocation_count == len(acknowledged), timeout=30)
        await journal.flush()
        finished = await finished_ids(journal)
        assert sorted(finished) == sorted(acknowledged)  # each ran, exactly once
        assert process.dead_letters == []
    finally:
        await process.close()
        await journal.close()  # ours, not the process's: its threads end here


async def test_inject_into_a_full_queue_is_dead_lettered_and_never_journaled_as_accepted(
        tmp_path: Path) -> None:
    model = GatedModel()
    process, journal = webhook_process(tmp_path, model, queue_size=2)
    await process.start()
    try:
        results = [await process.inject(TriggerEvent("manual", "manual", {"n": n}))
                   for n in range(5)]
        # one taken by the worker, two queued; then the queue is really full
        assert results == [True, True, True, False, False]
        # listed once their entries are durable (the refusal itself was inject()'s answer)
        await wait_for(lambda: len(process.dead_letters) == 2, what="the two dead letters")
        assert [d["reason"] for d in process.dead_letters] == ["queue full", "queue full"]
        refused = {d["event"].event_id for d in process.dead_letters}
        assert refused.isdisjoint(await accepted_ids(journal))
        model.gate.set()
        await wait_for(lambda: process.invocation_count == 3)
    finally:
        await process.close()
        await journal.close()  # ours, not the process's: its threads end here


async def test_a_pulling_trigger_waits_for_room_and_loses_nothing(tmp_path: Path) -> None:
    model = GatedModel()
    journal = SQLiteJournal(tmp_path / "journal.db")
    process = AgentProcess("pull", ProcessConfig(
        triggers=[{"type": "message", "topic": "work"}], queue_size=3,
        journal={"level": "checkpoint"}), model=model, journal=journal)
    await process.start()
    try:
        for n in range(30):
            process.broker.publish("work", {"n": n})
        await wait_for(lambda: process.status()["queue_size"] == 3)
        assert process.dead_letters == []
        model.gate.set()
        await wait_for(lambda: process.invocation_count == 30, timeout=30)
        payloads: list[Any] = [run.event.payload["content"]["n"]
                               for run in process.recent_runs()]
        assert payloads == list(range(30))  # every one, in order
        assert process.dead_letters == []
    finally:
        await process.close()
        await journal.close()  # ours, not the process's: its threads end here
