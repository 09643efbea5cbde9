"""Webhook triggers under test: a recording accept function, a trigger served on 127.0.0.1 port 0,
raw bytes sent to one, and each sender's signature computed as its documentation describes (the
HMAC is computed here, never by the code under test)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx

from runtime_core.config import TriggerConfig
from runtime_core.triggers.base import AcceptResult, TriggerEvent
from runtime_core.triggers.webhook.trigger import WebhookTrigger

SECRET = "s3cr3t-webhook-key"  # promptui's own scheme, in signed()


class FakeAccept:
    """Records every event and answers with a configurable result (or raises)."""

    def __init__(self) -> None:
        self.events: list[TriggerEvent] = []
        self.result = AcceptResult.ACCEPTED
        self.reason = "accepted"
        self.error: Exception | None = None

    async def __call__(self, event: TriggerEvent) -> tuple[AcceptResult, str]:
        self.events.append(event)
        if self.error is not None:
            raise self.error
        return self.result, self.reason


@asynccontextmanager
async def serving(path: str = "/hook", *, accept: FakeAccept | None = None,
                  clock: Callable[[], float] = time.time,
                  **fields: Any) -> AsyncIterator[tuple[WebhookTrigger, httpx.AsyncClient]]:
    """A started webhook trigger on 127.0.0.1 port 0 and a client for it; stopped after.
    ``clock``: the wall clock its signature timestamps are checked against."""
    config = TriggerConfig(type="webhook", webhook_path=path, webhook_port=0, **fields)
    trigger = WebhookTrigger(f"webhook-{path.strip('/')}", config, clock=clock)
    await trigger.start(accept or FakeAccept())
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{trigger.bound_port}",
                                     trust_env=False) as client:
            yield trigger, client
    finally:
        await trigger.stop()


def now() -> int:
    return int(time.time())


def hex_hmac(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


async def raw_status_line(port: int, request: bytes) -> bytes:
    """Send raw bytes (e.g. headers without the promised body) and read the status line."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.readline(), 5)
    finally:
        writer.close()


# -- each sender, as its documentation describes it ------------------------------------------------
def github(body: bytes, secret: str, delivery: str) -> dict[str, str]:
    """docs.github.com "Validating webhook deliveries": HMAC-SHA256 hex of the payload body."""
    return {"X-Hub-Signature-256": "sha256=" + hex_hmac(secret, body),
            "X-GitHub-Delivery": delivery, "X-GitHub-Event": "push",
            "Content-Type": "application/json"}


def stripe(body: bytes, secrets: list[str], timestamp: int | None = None) -> dict[str, str]:
    """docs.stripe.com "Verify webhook signatures manually": signed_payload = "{t}.{body}",
    one v1 per active secret."""
    t = now() if timestamp is None else timestamp
    v1 = ",".join(f"v1={hex_hmac(s, f'{t}.'.encode() + body)}" for s in secrets)
    return {"Stripe-Signature": f"t={t},{v1}", "Content-Type": "application/json"}


def slack(body: bytes, secret: str, timestamp: int | None = None,
          content_type: str = "application/json") -> dict[str, str]:
    """api.slack.com "Verifying requests from Slack": v0=hex HMAC of "v0:{ts}:{body}"."""
    ts = str(now() if timestamp is None else timestamp)
    return {"X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": "v0=" + hex_hmac(secret, f"v0:{ts}:".encode() + body),
            "Content-Type": content_type}


def standard(body: bytes, secret: str, msg_id: str, timestamp: int | None = None
             ) -> dict[str, str]:
    """standardwebhooks.com spec: base64 HMAC-SHA256 of "{id}.{timestamp}.{body}" with the
    base64-decoded part of the whsec_ secret."""
    ts = str(now() if timestamp is None else timestamp)
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return {"webhook-id": msg_id, "webhook-timestamp": ts,
            "webhook-signature": "v1," + base64.b64encode(digest).decode(),
            "Content-Type": "application/json"}


def signed(body: bytes, *, secret: str = SECRET, timestamp: int | None = None) -> dict[str, str]:
    """promptui's own scheme: HMAC-SHA256 hex of "{timestamp}.{body}"."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Promptui-Timestamp": ts, "X-Promptui-Signature": f"sha256={digest}"}
