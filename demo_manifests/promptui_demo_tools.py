"""Tools of the bundled demo. Offline and deterministic; files go under PROMPTUI_DEMO_DIR
(default .promptui/demo in the folder promptui runs in)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from runtime_core import ToolContext


def demo_dir() -> Path:
    return Path(os.environ.get("PROMPTUI_DEMO_DIR", ".promptui/demo"))


def check_health(service: str) -> dict[str, str]:
    """Check a service's health endpoint (the demo's services are always up)."""
    return {"service": service, "state": "up"}


def count_check(ctx: ToolContext) -> int:
    """Count one more completed health check in the context."""
    checks = int(ctx.get("checks", 0)) + 1
    ctx.set("checks", checks)
    return checks


def page_oncall(summary: str, severity: str, ctx: ToolContext) -> str:
    """Page the on-call engineer (writes to the demo's pager log)."""
    log = demo_dir() / "pager.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"{ctx.idempotency_key} {severity} {summary}\n")
    ctx.set("pages", int(ctx.get("pages", 0)) + 1)
    return f"paged on-call about: {summary}"


def drop_invoice(ctx: ToolContext) -> str:
    """Drop a new invoice file into the demo inbox (the invoice watcher picks it up)."""
    number = int(ctx.get("invoices_dropped", 0)) + 1
    inbox = demo_dir() / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    target = inbox / f"invoice-{number:04d}.json"
    target.write_text(json.dumps({"number": number, "amount": 100 + 7 * number,
                                  "currency": "EUR"}), encoding="utf-8")
    ctx.set("invoices_dropped", number)
    return target.name


def request_deploy(ctx: ToolContext) -> str:
    """Ask the deployer for a deploy; every other build is broken in this demo."""
    build = int(ctx.get("builds", 0)) + 1
    ctx.set("builds", build)
    ctx.emit("deploy.requested", {"build": build, "script": "broken" if build % 2 else "ok"})
    return f"requested deploy of build {build}"


def read_invoice(path: str) -> dict[str, object]:
    """Read an invoice file from the inbox."""
    file = demo_dir() / "inbox" / path
    try:
        return dict(json.loads(file.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        return {"error": f"cannot read {path}: {exc}"}


def record_invoice(path: str, ctx: ToolContext) -> str:
    """Book an invoice in the ledger. Slow on purpose: kill the runtime during it and the run
    waits for an operator to reconcile (the write may or may not have happened)."""
    time.sleep(1.5)
    ledger = demo_dir() / "ledger.txt"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with ledger.open("a", encoding="utf-8") as fh:
        fh.write(f"{ctx.idempotency_key} {path}\n")
    ctx.set("invoices_booked", int(ctx.get("invoices_booked", 0)) + 1)
    return f"booked {path}"
