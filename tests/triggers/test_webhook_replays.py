"""A signed request is taken once, across restarts (issue 31): through a real process on a SQLite
journal, a replay of a promptui-, Stripe- or Slack-signed request inside its timestamp window
is a duplicate after a restart too (the signature's delivery key is in the journal's delivery
index); a Stripe retry (a new signature, the same event ``id``) and a Slack retry (the same
``event_id``, ``X-Slack-Retry-Num``) are duplicates, as GitHub's and Standard Webhooks' are."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime_core import AgentProcess, ProcessConfig
from runtime_core.config import TriggerConfig
from runtime_core.journal import EntryType, ReadFilter, SQLiteJournal
from runtime_core.journal.provider import DELIVERY_KEEP_SECONDS
from runtime_core.triggers.signing import MAX_SIGNATURE_TOLERANCE
from tests.helpers.models import CountingModel
from tests.helpers.polling import wait_for
from tests.helpers.webhooks import FakeAccept, now, serving, signed, slack, stripe

SECRETS = {"promptui": "pu-secret", "stripe": "whsec_stripe_endpoint", "slack": "slack-secret"}
ORDER = json.dumps({"order": 7, "total": "12.50"}).encode()
STRIPE_EVENT = json.dumps({"id": "evt_1PqXyZ2eZvKYlo2C", "object": "event",
                           "type": "charge.succeeded", "data": {"object": {"id": "ch_1"}}}
                          ).encode()
SLACK_EVENT = json.dumps({"type": "event_callback", "event_id": "Ev08MFMKH6",
                          "event": {"type": "app_mention", "text": "deploy"}}).encode()
SLASH = urllib.parse.urlencode({"command": "/deploy", "text": "prod",
                                "user_id": "U1"}).encode()
FORM = "application/x-www-form-urlencoded"


def make(model: CountingModel, journal: SQLiteJournal) -> AgentProcess:
    triggers: list[dict[str, Any]] = [
        {"type": "webhook", "webhook_port": 0, "webhook_path": f"/{scheme}",
         "hmac_secret": secret, "signature_scheme": scheme}
        for scheme, secret in SECRETS.items()]
    return AgentProcess("hooks", ProcessConfig(triggers=triggers,
                                               journal={"level": "checkpoint"}),
                        model=model, journal=journal)


def headers_for(scheme: str, body: bytes, timestamp: int, content_type: str
                ) -> dict[str, str]:
    secret = SECRETS[scheme]
    if scheme == "promptui":
        return {**signed(body, secret=secret, timestamp=timestamp),
                "Content-Type": content_type}
    if scheme == "stripe":
        return {**stripe(body, [secret], timestamp), "Content-Type": content_type}
    return slack(body, secret, timestamp, content_type=content_type)


async def post(process: AgentProcess, scheme: str, body: bytes, headers: dict[str, str]
               ) -> httpx.Response:
    index = list(SECRETS).index(scheme)
    port = int(process.status()["triggers"][index]["port"])
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as http:
        return await http.post(f"/{scheme}", content=body, headers=headers)


async def runs(journal: SQLiteJournal) -> int:
    await journal.flush()
    return len(await journal.read(ReadFilter(process="hooks",
                                             entry_type=EntryType.RUN_FINISHED)))


async def across_a_restart(tmp_path: Path, scheme: str, first: tuple[bytes, dict[str, str]],
                           repeats: list[tuple[bytes, dict[str, str]]]
                           ) -> tuple[httpx.Response, list[httpx.Response], int]:
    """``first`` sent to a process, then each of ``repeats`` to a new process on the same
    journal (a restart); the answers, and how many runs the journal holds."""
    path = tmp_path / "journal.db"
    model = CountingModel()
    journal = SQLiteJournal(path)
    process = make(model, journal)
    await process.start()
    try:
        answer = await post(process, scheme, *first)
        assert answer.status_code == 202, answer.text
        await wait_for(lambda: model.calls == 1, timeout=10, what="the first run")
    finally:
        await process.close()
        await journal.close()
    journal = SQLiteJournal(path)
    restarted = make(model, journal)
    await restarted.start()
    try:
        again = [await post(restarted, scheme, *repeat) for repeat in repeats]
        count = await runs(journal)
    finally:
        await restarted.close()
        await journal.close()
    return answer, again, count


def duplicate_of(answer: httpx.Response) -> dict[str, str]:
    return {"status": "duplicate", "event_id": answer.json()["event_id"]}


@pytest.mark.slow  # two processes with three webhook servers each, one after the other
@pytest.mark.parametrize(("scheme", "body", "content_type"), [
    ("promptui", ORDER, "application/json"),
    ("stripe", ORDER, "application/json"),  # a body with no event id: the signature is the key
    ("slack", SLASH, FORM),  # a slash command has no event_id: the signature is the key
], ids=["promptui", "stripe-without-event-id", "slack-slash-command"])
async def test_a_signed_request_replayed_after_a_restart_in_its_window_runs_once(
        tmp_path: Path, scheme: str, body: bytes, content_type: str) -> None:
    request = (body, headers_for(scheme, body, now() - 5, content_type))
    first, [replayed], count = await across_a_restart(tmp_path, scheme, request, [request])
    assert replayed.status_code == 200, replayed.text
    assert replayed.json() == duplicate_of(first)
    assert count == 1


@pytest.mark.slow
async def test_a_stripe_retry_with_a_new_signature_and_the_same_event_id_runs_once(
        tmp_path: Path) -> None:
    sent = now() - 60
    first = (STRIPE_EVENT, headers_for("stripe", STRIPE_EVENT, sent, "application/json"))
    retries = [(STRIPE_EVENT, headers_for("stripe", STRIPE_EVENT, sent + 30 * n,
                                          "application/json")) for n in (1, 2)]
    answer, again, count = await across_a_restart(tmp_path, "stripe", first, retries)
    assert [r.json() for r in again] == [duplicate_of(answer)] * 2
    assert count == 1


async def test_a_stripe_retry_before_a_restart_is_a_duplicate_and_names_the_event() -> None:
    accept = FakeAccept()
    async with serving(accept=accept, hmac_secret=SECRETS["stripe"],
                       signature_scheme="stripe") as (_, client):
        first = await client.post("/hook", content=STRIPE_EVENT, headers=headers_for(
            "stripe", STRIPE_EVENT, now() - 40, "application/json"))
        retry = await client.post("/hook", content=STRIPE_EVENT, headers=headers_for(
            "stripe", STRIPE_EVENT, now(), "application/json"))
    assert first.status_code == 202 and retry.json() == duplicate_of(first)
    [event] = accept.events
    assert event.metadata["delivery_id"] == "evt_1PqXyZ2eZvKYlo2C"
    assert event.metadata["delivery_key"] == "/hook#evt_1PqXyZ2eZvKYlo2C"


@pytest.mark.slow
async def test_a_slack_retry_with_the_same_event_id_runs_once(tmp_path: Path) -> None:
    sent = now() - 10
    first = (SLACK_EVENT, headers_for("slack", SLACK_EVENT, sent, "application/json"))
    retry = (SLACK_EVENT, {**headers_for("slack", SLACK_EVENT, sent + 3, "application/json"),
                           "X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
    answer, [again], count = await across_a_restart(tmp_path, "slack", first, [retry])
    assert again.status_code == 200 and again.json() == duplicate_of(answer)
    assert count == 1


async def test_a_slack_retry_while_the_process_runs_is_a_duplicate() -> None:
    accept = FakeAccept()
    async with serving(accept=accept, hmac_secret=SECRETS["slack"],
                       signature_scheme="slack") as (_, client):
        first = await client.post("/hook", content=SLACK_EVENT, headers=headers_for(
            "slack", SLACK_EVENT, now() - 4, "application/json"))
        retry = await client.post("/hook", content=SLACK_EVENT, headers={**headers_for(
            "slack", SLACK_EVENT, now(), "application/json"), "X-Slack-Retry-Num": "1"})
        other = SLACK_EVENT.replace(b"Ev08MFMKH6", b"Ev08MFMKH7")
        fresh = await client.post("/hook", content=other, headers=headers_for(
            "slack", other, now(), "application/json"))
    assert retry.json() == duplicate_of(first)
    assert fresh.status_code == 202
    assert [e.metadata["delivery_id"] for e in accept.events] == ["Ev08MFMKH6", "Ev08MFMKH7"]


async def test_a_fresh_signature_over_the_same_body_is_a_new_request() -> None:
    """promptui's scheme has no delivery id: the same body signed at another moment is another
    request (a sender's second order), not a replay."""
    accept = FakeAccept()
    async with serving(accept=accept, hmac_secret=SECRETS["promptui"]) as (_, client):
        one = await client.post("/hook", content=ORDER, headers=headers_for(
            "promptui", ORDER, now() - 1, "application/json"))
        two = await client.post("/hook", content=ORDER, headers=headers_for(
            "promptui", ORDER, now(), "application/json"))
    assert (one.status_code, two.status_code) == (202, 202)
    assert len(accept.events) == 2


def test_the_delivery_index_outlasts_every_signature_window() -> None:
    """A signature passes for a tolerance either side of its timestamp: the journal keeps its
    key at least twice that from when it was taken, and a longer tolerance is refused."""
    assert DELIVERY_KEEP_SECONDS >= 2 * MAX_SIGNATURE_TOLERANCE
    with pytest.raises(ValueError, match="signature_tolerance"):
        TriggerConfig(type="webhook", hmac_secret="s",
                      signature_tolerance=MAX_SIGNATURE_TOLERANCE + 1)
