"""A sender's redelivery through a real process: acknowledged as a duplicate and never run
twice, across a restart on the same SQLite journal (the journal's delivery index); without a
journal, only while the process lives (the trigger's memory)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from runtime_core import AgentProcess, ProcessConfig
from runtime_core.journal import EntryType, ReadFilter, SQLiteJournal
from tests.helpers.models import CountingModel
from tests.helpers.polling import wait_for
from tests.helpers.webhooks import github, standard

SECRET = "gh-secret"
STANDARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = json.dumps({"action": "opened", "pull_request": {"number": 42}}).encode()


TRIGGERS: list[dict[str, Any]] = [
    {"type": "webhook", "webhook_port": 0, "webhook_path": "/github", "hmac_secret": SECRET,
     "signature_scheme": "github"},
    {"type": "webhook", "webhook_port": 0, "webhook_path": "/std",
     "hmac_secret": STANDARD_SECRET, "signature_scheme": "standard"},
]


def make(model: CountingModel, journal: SQLiteJournal | None) -> AgentProcess:
    config = ProcessConfig(triggers=TRIGGERS, **(
        {"journal": {"level": "checkpoint"}} if journal is not None else {}))
    return AgentProcess("hooks", config, model=model, journal=journal)


def client(process: AgentProcess, index: int) -> httpx.AsyncClient:
    port = int(process.status()["triggers"][index]["port"])
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False)


async def post_github(process: AgentProcess, delivery: str) -> httpx.Response:
    async with client(process, 0) as http:
        return await http.post("/github", content=BODY,
                               headers=github(BODY, SECRET, delivery))


async def runs_started(journal: SQLiteJournal) -> int:
    await journal.flush()
    return len(await journal.read(ReadFilter(process="hooks",
                                             entry_type=EntryType.RUN_FINISHED)))


async def test_a_github_redelivery_after_a_restart_is_a_duplicate_and_does_not_run(
        tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    model = CountingModel()
    journal = SQLiteJournal(path)
    process = make(model, journal)
    await process.start()
    try:
        first = await post_github(process, "0f1e2d3c-delivery-1")
        assert first.status_code == 202, first.text
        await wait_for(lambda: model.calls == 1, timeout=10)
        again = await post_github(process, "0f1e2d3c-delivery-1")  # the same process
        assert again.json() == {"status": "duplicate", "event_id": first.json()["event_id"]}
    finally:
        await process.close()
        await journal.close()

    journal = SQLiteJournal(path)  # a restart: a new process object on the same file
    restarted = make(model, journal)
    await restarted.start()
    try:
        redelivered = await post_github(restarted, "0f1e2d3c-delivery-1")
        assert redelivered.status_code == 200
        assert redelivered.json() == {"status": "duplicate",
                                      "event_id": first.json()["event_id"]}
        fresh = await post_github(restarted, "0f1e2d3c-delivery-2")
        assert fresh.status_code == 202
        await wait_for(lambda: model.calls == 2, timeout=10)
        assert await runs_started(journal) == 2  # delivery 1 once, delivery 2 once
        assert restarted.dead_letters == []
        status = restarted.status()["triggers"][0]
        assert (status["duplicates"], status["accepted"]) == (1, 1)
    finally:
        await restarted.close()
        await journal.close()


async def test_a_standard_webhooks_retry_after_a_restart_is_a_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    model = CountingModel()
    journal = SQLiteJournal(path)
    process = make(model, journal)
    await process.start()
    try:
        async with client(process, 1) as http:
            first = await http.post("/std", content=BODY,
                                    headers=standard(BODY, STANDARD_SECRET, "msg_retry"))
        assert first.status_code == 202
        await wait_for(lambda: model.calls == 1, timeout=10)
    finally:
        await process.close()
        await journal.close()
    journal = SQLiteJournal(path)
    restarted = make(model, journal)
    await restarted.start()
    try:
        async with client(restarted, 1) as http:  # the retry: a new timestamp and signature
            retry = await http.post("/std", content=BODY,
                                    headers=standard(BODY, STANDARD_SECRET, "msg_retry"))
        assert retry.json() == {"status": "duplicate", "event_id": first.json()["event_id"]}
        assert await runs_started(journal) == 1
    finally:
        await restarted.close()
        await journal.close()


async def test_without_a_journal_the_trigger_remembers_deliveries_while_it_lives() -> None:
    model = CountingModel()
    process = make(model, None)
    await process.start()
    try:
        first = await post_github(process, "d-1")
        again = await post_github(process, "d-1")
        assert (first.status_code, again.status_code) == (202, 200)
        await wait_for(lambda: model.calls == 1, timeout=10)
    finally:
        await process.close()
    restarted = make(model, None)  # nothing durable: a restart forgets (documented)
    await restarted.start()
    try:
        assert (await post_github(restarted, "d-1")).status_code == 202
        await wait_for(lambda: model.calls == 2, timeout=10)
    finally:
        await restarted.close()
