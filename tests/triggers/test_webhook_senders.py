"""Real senders: GitHub, Stripe, Slack and Standard Webhooks requests, each signed in the test as
its documentation describes, against a webhook trigger served on 127.0.0.1 port 0."""

from __future__ import annotations

import asyncio
import json
import urllib.parse

import httpx
import pytest

from runtime_core.triggers.base import AcceptResult
from tests.helpers.webhooks import FakeAccept, github, now, serving, slack, standard, stripe

GH_SECRET = "gh-hook-secret"
STRIPE_SECRET = "whsec_stripe_endpoint_secret"  # Stripe's secrets are used as written
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
STANDARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = json.dumps({"action": "opened", "number": 7}).encode()


def message(response: httpx.Response) -> str:
    text: str = response.json()["message"]
    return text


# -- GitHub ---------------------------------------------------------------------------------------
async def test_github_documented_example_is_accepted() -> None:
    """The example from docs.github.com "Validating webhook deliveries", byte for byte."""
    accept = FakeAccept()
    async with serving(accept=accept, hmac_secret="It's a Secret to Everybody",
                       signature_scheme="github") as (_, client):
        response = await client.post("/hook", content=b"Hello, World!", headers={
            "X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f"
                                   "4379c8b043e17",
            "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
            "Content-Type": "text/plain"})
    assert response.status_code == 202, response.text
    [event] = accept.events
    assert event.payload == "Hello, World!"
    assert event.metadata["delivery_id"] == "72d3162e-cc78-11e3-81ab-4c9367dc0958"
    assert event.metadata["signature_scheme"] == "github"
    assert event.metadata["signature_verified"] is True
    assert "x-hub-signature-256" not in event.metadata["headers"]  # a replay token


async def test_github_redelivery_is_acknowledged_as_a_duplicate_and_not_handed_over() -> None:
    accept = FakeAccept()
    async with serving(accept=accept, hmac_secret=GH_SECRET,
                       signature_scheme="github") as (trigger, client):
        first = await client.post("/hook", content=BODY, headers=github(BODY, GH_SECRET, "d-1"))
        again = await client.post("/hook", content=BODY, headers=github(BODY, GH_SECRET, "d-1"))
        other = await client.post("/hook", content=BODY, headers=github(BODY, GH_SECRET, "d-2"))
        status = trigger.status()
    assert first.status_code == 202 and other.status_code == 202
    assert again.status_code == 200
    assert again.json() == {"status": "duplicate", "event_id": first.json()["event_id"]}
    assert [e.metadata["delivery_id"] for e in accept.events] == ["d-1", "d-2"]
    assert (status["accepted"], status["duplicates"]) == (2, 1)


async def test_github_concurrent_copies_of_one_delivery_run_once() -> None:
    accept = FakeAccept()
    async with serving(accept=accept, hmac_secret=GH_SECRET,
                       signature_scheme="github") as (_, client):
        answers = await asyncio.gather(*(
            client.post("/hook", content=BODY, headers=github(BODY, GH_SECRET, "same"))
            for _ in range(10)))
    assert sorted(a.status_code for a in answers) == [200] * 9 + [202]
    assert len({a.json()["event_id"] for a in answers}) == 1
    assert len(accept.events) == 1


async def test_github_delivery_not_taken_can_be_retried() -> None:
    """A 503 (queue full) leaves the delivery free: GitHub's redelivery is then accepted."""
    accept = FakeAccept()
    async with serving(accept=accept, hmac_secret=GH_SECRET,
                       signature_scheme="github") as (_, client):
        accept.result = AcceptResult.QUEUE_FULL
        busy = await client.post("/hook", content=BODY, headers=github(BODY, GH_SECRET, "d"))
        accept.result = AcceptResult.ACCEPTED
        retried = await client.post("/hook", content=BODY, headers=github(BODY, GH_SECRET, "d"))
    assert (busy.status_code, retried.status_code) == (503, 202)


async def test_github_duplicate_found_by_the_process_is_answered_with_its_event_id() -> None:
    accept = FakeAccept()
    accept.result, accept.reason = AcceptResult.DUPLICATE, "first-event-id"
    async with serving(accept=accept, hmac_secret=GH_SECRET,
                       signature_scheme="github") as (_, client):
        answer = await client.post("/hook", content=BODY, headers=github(BODY, GH_SECRET, "d"))
        again = await client.post("/hook", content=BODY, headers=github(BODY, GH_SECRET, "d"))
    assert answer.status_code == 200
    assert answer.json() == {"status": "duplicate", "event_id": "first-event-id"}
    assert again.json() == answer.json()
    assert len(accept.events) == 1  # the second one was answered from the trigger's memory


@pytest.mark.parametrize(("headers", "status", "says"), [
    pytest.param({"X-GitHub-Delivery": "d"}, 401, "X-Hub-Signature-256", id="missing"),
    pytest.param(github(BODY, "wrong-secret", "d"), 401, "X-Hub-Signature-256",
                 id="wrong-secret"),
    pytest.param(github(b'{"other": 1}', GH_SECRET, "d"), 401, "does not match",
                 id="other-body"),
    pytest.param({**github(BODY, GH_SECRET, "d"), "X-Hub-Signature-256": "sha1=abc"}, 401,
                 "invalid signature", id="malformed"),
    pytest.param({k: v for k, v in github(BODY, GH_SECRET, "d").items()
                  if k != "X-GitHub-Delivery"}, 400, "X-GitHub-Delivery", id="no-delivery"),
])
async def test_github_refusals(headers: dict[str, str], status: int, says: str) -> None:
    accept = FakeAccept()
    async with serving(accept=accept, hmac_secret=GH_SECRET,
                       signature_scheme="github") as (_, client):
        response = await client.post("/hook", content=BODY, headers=headers)
    assert response.status_code == status
    assert says in message(response)
    assert GH_SECRET not in response.text
    assert accept.events == []


async def test_github_rotated_secrets_both_verify_and_a_retired_one_does_not() -> None:
    accept = FakeAccept()
    async with serving(accept=accept, hmac_secret=["new-secret", "old-secret"],
                       signature_scheme="github") as (_, client):
        new = await client.post("/hook", content=BODY, headers=github(BODY, "new-secret", "1"))
        old = await client.post("/hook", content=BODY, headers=github(BODY, "old-secret", "2"))
        gone = await client.post("/hook", content=BODY,
                                 headers=github(BODY, "retired-secret", "3"))
    assert (new.status_code, old.status_code, gone.status_code) == (202, 202, 401)


async def test_signature_header_overrides_the_schemes_header() -> None:
    accept = FakeAccept()
    async with serving(accept=accept, hmac_secret=GH_SECRET, signature_scheme="github",
                       signature_header="X-Forwarded-Signature") as (_, client):
        headers = github(BODY, GH_SECRET, "d")
        moved = {**headers, "X-Forwarded-Signature": headers.pop("X-Hub-Signature-256")}
        default = await client.post("/hook", content=BODY, headers=github(BODY, GH_SECRET, "e"))
        ok = await client.post("/hook", content=BODY, headers=moved)
    assert default.status_code == 401 and "X-Forwarded-Signature" in message(default)
    assert ok.status_code == 202
    assert "x-forwarded-signature" not in accept.events[0].metadata["headers"]


# -- Stripe ---------------------------------------------------------------------------------------
async def test_stripe_signed_event_is_accepted_once_and_a_replay_is_a_duplicate() -> None:
    accept = FakeAccept()
    async with serving(accept=accept, hmac_secret=STRIPE_SECRET,
                       signature_scheme="stripe") as (_, client):
        headers = stripe(BODY, [STRIPE_SECRET])
        first = await client.post("/hook", content=BODY, headers=headers)
        replay = await client.post("/hook", content=BODY, headers=headers)
    assert first.status_code == 202
    assert replay.status_code == 200
    assert replay.json() == {"status": "duplicate", "event_id": first.json()["event_id"]}
    assert len(accept.events) == 1
    assert accept.events[0].payload == {"action": "opened", "number": 7}
    assert "stripe-signature" not in accept.events[0].metadata["headers"]


async def test_stripe_several_v1_values_any_one_may_match() -> None:
    """While Stripe rolls an endpoint secret it signs with each: one v1 per secret."""
    accept = FakeAccept()
    async with serving(accept=accept, hmac_secret=STRIPE_SECRET,
                       signature_scheme="stripe") as (_, client):
        response = await client.post("/hook", content=BODY, headers=stripe(
            BODY, ["whsec_some_other_endpoint", STRIPE_SECRET]))
    assert response.status_code == 202


@pytest.mark.parametrize(("age", "status"), [(290, 202), (330, 401), (-330, 401)])
async def test_stripe_default_tolerance_is_300_seconds(age: int, status: int) -> None:
    async with serving(hmac_secret=STRIPE_SECRET, signature_scheme="stripe") as (_, client):
        response = await client.post("/hook", content=BODY,
                                     headers=stripe(BODY, [STRIPE_SECRET], now() - age))
    assert response.status_code == status
    if status == 401:
        assert message(response) == "stale or future timestamp"


async def test_stripe_signature_tolerance_overrides_the_default() -> None:
    async with serving(hmac_secret=STRIPE_SECRET, signature_scheme="stripe",
                       signature_tolerance=30) as (_, client):
        response = await client.post("/hook", content=BODY,
                                     headers=stripe(BODY, [STRIPE_SECRET], now() - 60))
    assert response.status_code == 401


@pytest.mark.parametrize(("header", "says"), [
    pytest.param(None, "Stripe-Signature", id="missing"),
    pytest.param("t=12,v0=abc", "invalid signature", id="no-v1"),
    pytest.param("v1=" + "a" * 64, "invalid signature", id="no-t"),
])
async def test_stripe_malformed_headers_are_401(header: str | None, says: str) -> None:
    async with serving(hmac_secret=STRIPE_SECRET, signature_scheme="stripe") as (_, client):
        headers = {} if header is None else {"Stripe-Signature": header}
        response = await client.post("/hook", content=BODY, headers=headers)
    assert response.status_code == 401 and says in message(response)


async def test_stripe_wrong_secret_and_rotation() -> None:
    async with serving(hmac_secret=["whsec_new", "whsec_old"],
                       signature_scheme="stripe") as (_, client):
        wrong = await client.post("/hook", content=BODY, headers=stripe(BODY, ["whsec_x"]))
        old = await client.post("/hook", content=BODY, headers=stripe(BODY, ["whsec_old"]))
    assert (wrong.status_code, old.status_code) == (401, 202)


# -- Slack ----------------------------------------------------------------------------------------
async def test_slack_url_verification_echoes_the_challenge_and_hands_nothing_over() -> None:
    accept = FakeAccept()
    body = json.dumps({"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "type": "url_verification",
                       "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}
                      ).encode()
    async with serving(accept=accept, hmac_secret=SLACK_SECRET,
                       signature_scheme="slack") as (_, client):
        response = await client.post("/hook", content=body, headers=slack(body, SLACK_SECRET))
    assert response.status_code == 200
    assert response.json() == {
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}
    assert accept.events == []


async def test_slack_url_verification_must_be_signed_too() -> None:
    body = b'{"type": "url_verification", "challenge": "abc"}'
    async with serving(hmac_secret=SLACK_SECRET, signature_scheme="slack") as (_, client):
        response = await client.post("/hook", content=body, headers=slack(body, "not-it"))
    assert response.status_code == 401


async def test_slack_event_callback_is_accepted_and_a_replay_is_a_duplicate() -> None:
    accept = FakeAccept()
    body = json.dumps({"type": "event_callback", "event": {"type": "app_mention"}}).encode()
    async with serving(accept=accept, hmac_secret=SLACK_SECRET,
                       signature_scheme="slack") as (_, client):
        headers = slack(body, SLACK_SECRET)
        first = await client.post("/hook", content=body, headers=headers)
        replay = await client.post("/hook", content=body, headers=headers)
    assert first.status_code == 202 and replay.status_code == 200
    assert replay.json() == {"status": "duplicate", "event_id": first.json()["event_id"]}
    assert len(accept.events) == 1
    assert accept.events[0].payload["event"] == {"type": "app_mention"}


@pytest.mark.parametrize(("age", "status"), [(4 * 60, 202), (6 * 60, 401)])
async def test_slack_timestamp_within_five_minutes(age: int, status: int) -> None:
    async with serving(hmac_secret=SLACK_SECRET, signature_scheme="slack") as (_, client):
        response = await client.post("/hook", content=BODY,
                                     headers=slack(BODY, SLACK_SECRET, now() - age))
    assert response.status_code == status


async def test_slack_interactive_payload_form_becomes_the_payload_dict() -> None:
    accept = FakeAccept()
    interaction = {"type": "block_actions", "user": {"id": "U1"}, "actions": [{"value": "ok"}]}
    body = urllib.parse.urlencode({"payload": json.dumps(interaction)}).encode()
    async with serving(accept=accept, hmac_secret=SLACK_SECRET,
                       signature_scheme="slack") as (_, client):
        response = await client.post("/hook", content=body, headers=slack(
            body, SLACK_SECRET, content_type="application/x-www-form-urlencoded"))
    assert response.status_code == 202, response.text
    assert accept.events[0].payload == interaction


async def test_slack_slash_command_form_fields_become_a_dict() -> None:
    accept = FakeAccept()
    body = b"token=gIkuvaNzQIHg97ATvDxqgjtO&command=%2Fweather&text=94070&team_id=T0001"
    async with serving(accept=accept, hmac_secret=SLACK_SECRET,
                       signature_scheme="slack") as (_, client):
        response = await client.post("/hook", content=body, headers=slack(
            body, SLACK_SECRET, content_type="application/x-www-form-urlencoded"))
    assert response.status_code == 202
    assert accept.events[0].payload == {"token": "gIkuvaNzQIHg97ATvDxqgjtO",
                                        "command": "/weather", "text": "94070",
                                        "team_id": "T0001"}


async def test_slack_missing_headers_and_wrong_secret_are_401() -> None:
    async with serving(hmac_secret=["new", SLACK_SECRET], signature_scheme="slack") as (_, c):
        missing = await c.post("/hook", content=BODY, headers={"X-Slack-Signature": "v0=00"})
        wrong = await c.post("/hook", content=BODY, headers=slack(BODY, "nope"))
        rotated = await c.post("/hook", content=BODY, headers=slack(BODY, SLACK_SECRET))
    assert missing.status_code == 401 and "X-Slack-Request-Timestamp" in message(missing)
    assert wrong.status_code == 401
    assert rotated.status_code == 202


# -- Standard Webhooks ----------------------------------------------------------------------------
async def test_standard_webhooks_specification_example_is_accepted() -> None:
    """The example of the Standard Webhooks reference libraries (fixed id, timestamp and body);
    its 2021 timestamp passes against a clock set to that moment."""
    accept = FakeAccept()
    body = b'{"test": 2432232314}'
    async with serving(accept=accept, hmac_secret=STANDARD_SECRET, signature_scheme="standard",
                       clock=lambda: 1614265330 + 60) as (_, client):
        response = await client.post("/hook", content=body, headers={
            "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "webhook-timestamp": "1614265330",
            "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            "Content-Type": "application/json"})
    assert response.status_code == 202, response.text
    assert accept.events[0].metadata["delivery_id"] == "msg_p5jXN8AQM9LWM0D4loKWxJek"


async def test_standard_webhooks_retry_with_the_same_id_is_a_duplicate() -> None:
    accept = FakeAccept()
    async with serving(accept=accept, hmac_secret=STANDARD_SECRET,
                       signature_scheme="standard") as (_, client):
        first = await client.post("/hook", content=BODY,
                                  headers=standard(BODY, STANDARD_SECRET, "msg_1"))
        # a retry: same id, a new timestamp and signature
        retry = await client.post("/hook", content=BODY,
                                  headers=standard(BODY, STANDARD_SECRET, "msg_1", now() + 1))
    assert first.status_code == 202
    assert retry.json() == {"status": "duplicate", "event_id": first.json()["event_id"]}
    assert len(accept.events) == 1


async def test_standard_webhooks_several_signatures_and_refusals() -> None:
    async with serving(hmac_secret=STANDARD_SECRET, signature_scheme="standard") as (_, c):
        good = standard(BODY, STANDARD_SECRET, "msg_2")
        several = {**good, "webhook-signature": "v1,bm90LWl0 v1a,xyz "
                   + good["webhook-signature"]}
        ok = await c.post("/hook", content=BODY, headers=several)
        other = "whsec_" + "QUJDREVGR0hJSktMTU5PUA=="
        wrong = await c.post("/hook", content=BODY, headers=standard(BODY, other, "msg_3"))
        old = await c.post("/hook", content=BODY,
                           headers=standard(BODY, STANDARD_SECRET, "msg_4", now() - 600))
        swapped_id = await c.post("/hook", content=BODY,
                                  headers={**standard(BODY, STANDARD_SECRET, "msg_5"),
                                           "webhook-id": "msg_6"})
        missing = await c.post("/hook", content=BODY, headers={"webhook-id": "msg_7"})
    assert ok.status_code == 202
    assert wrong.status_code == 401
    assert old.status_code == 401 and message(old) == "stale or future timestamp"
    assert swapped_id.status_code == 401  # the id is signed
    assert missing.status_code == 401 and "webhook-signature" in message(missing)


# -- promptui's own scheme, unchanged, now with rotation ------------------------------------------
async def test_promptui_scheme_accepts_any_of_several_secrets() -> None:
    from tests.helpers.webhooks import signed

    async with serving(hmac_secret=["next", "current"]) as (trigger, client):
        a = await client.post("/hook", content=b"x", headers=signed(b"x", secret="current"))
        b = await client.post("/hook", content=b"y", headers=signed(b"y", secret="next"))
        c = await client.post("/hook", content=b"z", headers=signed(b"z", secret="gone"))
        status = trigger.status()
    assert (a.status_code, b.status_code, c.status_code) == (202, 202, 401)
    assert status["signature_scheme"] == "promptui" and status["signature_required"] is True


async def test_standard_webhooks_rotated_secrets_in_the_config() -> None:
    old = "whsec_" + "b2xkLXNlY3JldC1rZXktYnl0ZXM="
    async with serving(hmac_secret=[STANDARD_SECRET, old],
                       signature_scheme="standard") as (_, client):
        by_old = await client.post("/hook", content=BODY, headers=standard(BODY, old, "m1"))
        by_new = await client.post("/hook", content=BODY,
                                   headers=standard(BODY, STANDARD_SECRET, "m2"))
    assert (by_old.status_code, by_new.status_code) == (202, 202)
