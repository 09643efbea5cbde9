"""Tools used by the built-in demo processes. Offline and deterministic."""

from __future__ import annotations

from runtime_core import ToolContext

_ARTICLES = {
    "sqlite": "SQLite in WAL mode lets readers continue while one writer appends.",
    "backoff": "Exponential backoff doubles the wait after each failure, up to a cap.",
    "queues": "A bounded queue applies back-pressure instead of growing without limit.",
}


def lookup(topic: str) -> str:
    """Look a topic up in the local notes."""
    return _ARTICLES.get(topic.lower(), f"no notes on {topic!r}")


def record_finding(topic: str, ctx: ToolContext) -> int:
    """Remember that a topic was researched; returns how many findings are stored."""
    findings = list(ctx.get("findings", []))
    findings.append(topic)
    ctx.set("findings", findings[-20:])
    ctx.set("findings_total", int(ctx.get("findings_total", 0)) + 1)
    return int(ctx.get("findings_total"))


def check_service(name: str) -> dict[str, str]:
    """Report the state of a service (the demo's services are always up)."""
    return {"service": name, "state": "up"}
