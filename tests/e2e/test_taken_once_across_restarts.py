"""Issue 31 against the real thing: ``promptui serve`` with a signed webhook and the CLI's
inject, stopped with SIGTERM and started again on the same journal. A signed request replayed,
a Stripe retry (a new signature, the same event id) and ``promptui inject --idempotency-key``
repeated after the restart are each acknowledged with the first event's id, and the write
tool ran once for each."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers.cli import run_promptui_async
from tests.helpers.polling import poll
from tests.helpers.ports import free_port
from tests.helpers.serving import WRITER_TOOLS, start_serve
from tests.helpers.webhooks import signed, stripe

pytestmark = pytest.mark.slow

SECRET = "hook-secret-0123"
STRIPE_SECRET = "whsec_e2e_stripe"
HOOKS = """\
version: "1.0"
name: hooks
instructions: Book the payment.
model:
  provider: scripted
  turns:
    - tool_calls: [{{name: book_payment, args: {{ref: $payload.ref}}}}]
    - reply: Booked.
tools:
  - {{path: "ledger_tools:book_payment", effect: write}}
triggers:
  - type: webhook
    webhook_port: {port}
    webhook_path: /orders
    hmac_secret: "${{HOOK_SECRET}}"
  - type: webhook
    webhook_port: {port}
    webhook_path: /stripe
    signature_scheme: stripe
    hmac_secret: "${{STRIPE_SECRET}}"
journal: {{level: checkpoint}}
"""


def ledger(folder: Path) -> list[str]:
    path = folder / "ledger.txt"
    return path.read_text().split() if path.exists() else []


async def cli_inject(folder: Path, url: str, token: str, ref: str, key: str
                     ) -> tuple[int, str, str]:
    return await run_promptui_async(
        "inject", "hooks", json.dumps({"ref": ref}), "--idempotency-key", key, "--json",
        "--url", url, "--token", token, cwd=folder)


async def test_signed_requests_retries_and_keyed_injects_run_once_across_a_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    monkeypatch.setenv("STRIPE_SECRET", STRIPE_SECRET)
    port = free_port()
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "hooks.agent").write_text(HOOKS.format(port=port))
    (agents / "ledger_tools.py").write_text(WRITER_TOOLS)
    order = json.dumps({"ref": "ORDER-1"}).encode()
    order_headers = {**signed(order, secret=SECRET), "Content-Type": "application/json"}
    charge = json.dumps({"id": "evt_e2e_1", "object": "event", "ref": "CHARGE-1"}).encode()
    sent = int(time.time()) - 30
    hooks = httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=15)

    server = start_serve(tmp_path, str(agents))
    try:
        first_order = hooks.post("/orders", content=order, headers=order_headers)
        first_charge = hooks.post("/stripe", content=charge, headers={
            **stripe(charge, [STRIPE_SECRET], sent), "Content-Type": "application/json"})
        code, out, err = await cli_inject(tmp_path, server.url, server.token, "INJECT-1",
                                          "key-inject-1")
        assert (first_order.status_code, first_charge.status_code, code) == (202, 202, 0), err
        first_inject = json.loads(out)
        assert first_inject["replayed"] is False
        poll(lambda: sorted(ledger(tmp_path)) == ["CHARGE-1", "INJECT-1", "ORDER-1"],
             what="the three bookings")
    finally:
        assert server.stop() == 0, server.stderr()

    server = start_serve(tmp_path, str(agents))  # a restart on the same journal
    try:
        order_again = hooks.post("/orders", content=order, headers=order_headers)
        charge_retry = hooks.post("/stripe", content=charge, headers={
            **stripe(charge, [STRIPE_SECRET], sent + 60), "Content-Type": "application/json"})
        code, out, err = await cli_inject(tmp_path, server.url, server.token, "INJECT-1",
                                          "key-inject-1")
        assert code == 0, err
        assert order_again.status_code == 200, order_again.text
        assert order_again.json() == {"status": "duplicate",
                                      "event_id": first_order.json()["event_id"]}
        assert charge_retry.json() == {"status": "duplicate",
                                       "event_id": first_charge.json()["event_id"]}
        assert json.loads(out) == {**first_inject, "replayed": True}
        fresh = await cli_inject(tmp_path, server.url, server.token, "INJECT-2", "key-inject-2")
        assert fresh[0] == 0, fresh[2]
        poll(lambda: "INJECT-2" in ledger(tmp_path), what="the new inject's booking")
        assert sorted(ledger(tmp_path)) == ["CHARGE-1", "INJECT-1", "INJECT-2", "ORDER-1"]
    finally:
        hooks.close()
        assert server.stop() == 0, server.stderr()
