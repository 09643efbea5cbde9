"""A process with a planted secret in every place a secret can go, the runs that carry it
through a tool call, the context, the conversation, an incident, a dead letter and a waiting
run, and the search for it in anything shown. For tests/governance/test_no_secret_anywhere.py's
in-process, HTTP, CLI and screen tests."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from runtime_core.control import ControlPlane
from tests.helpers.polling import wait_for
from tests.helpers.workers import LEDGER_SERVER

MARKER = "PLANTED-4f2a9c"  # in every planted value: a partial leak is found too
PLANTED = f"sk-{MARKER}"
#: Environment variable -> value: one per place, so a finding names where it came from.
VALUES = {
    "PLANTED_SCOPE": f"{PLANTED}-scope",  # the secret scope (tools get it)
    "PLANTED_ESCALATION": f"{PLANTED}-escalation",  # escalation headers and URL
    "PLANTED_MCP": f"{PLANTED}-mcp",  # an MCP server's environment
    "PLANTED_HMAC": f"{PLANTED}-hmac",  # a webhook trigger's signing secret
}
SCOPE = VALUES["PLANTED_SCOPE"]
#: Views and events cut long texts to 200 characters: the reply is padded so the cut falls
#: inside the secret, 10 characters of it before the cut.
REPLY_PADDING = "." * 176
REPLY = f"{REPLY_PADDING} used the key [secret:api_key]"  # as shown

TOOLS = '''\
"""Tools of the planted-secret process (tests/helpers/planted.py)."""

from __future__ import annotations

from runtime_core import ToolContext


def use_key(ctx: ToolContext) -> str:
    """Call the vault with the key: the key goes into the result and into the context."""
    key = ctx.secret("api_key")
    ctx.set("last_key", key)
    return f"called the vault with {key}"


def echo_text(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"
'''

VAULT = """\
version: "1.0"
name: vault
instructions: Use the vault key when asked.
model:
  provider: scripted
  select: {{by_payload_field: script}}
  scripts:
    use:
      - tool_calls: [{{name: use_key}}]
      - tool_calls: [{{name: echo_text, args: {{text: "${{PLANTED_SCOPE}}"}}}}]
      - reply: "{padding} used the key ${{PLANTED_SCOPE}}"
    fail:
      - raise: "the vault refused ${{PLANTED_SCOPE}}"
    quiet:
      - reply: ""
tools:
  - {{path: "planted_vault_tools:use_key", effect: write}}
  - {{path: "planted_vault_tools:echo_text", effect: read}}
secrets:
  enabled: true
  secrets: {{api_key: "${{PLANTED_SCOPE}}"}}
servers:
  ledger:
    type: stdio
    command: python
    args: ["{ledger_server}"]
    env: {{LEDGER: "{ledger}", LEDGER_TOKEN: "${{PLANTED_MCP}}"}}
triggers:
  - type: webhook
    webhook_port: 0
    webhook_path: /vault
    hmac_secret: "${{PLANTED_HMAC}}"
health:
  enabled: true
  on_anomaly: log
  escalation:
    webhook_url: https://escalation.invalid/health
    headers: {{Authorization: "Bearer ${{PLANTED_ESCALATION}}", X-Team: ops}}
budget:
  enabled: true
  max_runs_per_day: 1000
  escalation:
    webhook_url: "https://escalation.invalid/budget?team=ops&token=${{PLANTED_ESCALATION}}"
    headers: {{X-Api-Key: "${{PLANTED_ESCALATION}}"}}
incidents:
  fingerprint: payload.alert
  triggers: [event]
profile:
  name: vault
  version: "1"
  completion: {{evaluator: solution}}
journal: {{level: full}}
config:
  trigger_delivery: {{max_retries: 0}}
  max_consecutive_failures: 1000
"""


def plant_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in VALUES.items():
        monkeypatch.setenv(name, value)


def write_agents(folder: Path) -> Path:
    """The manifests folder: the vault process and its tools module."""
    agents = folder / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "planted_vault_tools.py").write_text(TOOLS)
    (agents / "vault.agent").write_text(VAULT.format(ledger_server=LEDGER_SERVER,
                                                     ledger=folder / "ledger.txt",
                                                     padding=REPLY_PADDING))
    return agents


def _encodings(value: str) -> set[str]:
    raw = value.encode()
    return {value, quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1],
            base64.b64encode(raw).decode().rstrip("="),
            base64.urlsafe_b64encode(raw).decode().rstrip("="), raw.hex()}


#: A secret's first 8 characters are a leak too (a text cut inside a secret).
FORMS = sorted({MARKER, MARKER.lower(), PLANTED[:8]}
               | {f for v in VALUES.values() for f in _encodings(v)})


def leaks(text: str | bytes) -> list[str]:
    """The planted forms found in ``text`` (raw, URL-encoded, JSON-escaped, base64, hex)."""
    if isinstance(text, bytes):
        return [f for f in FORMS if f.encode() in text]
    return [f for f in FORMS if f in text]


def as_json(value: Any) -> str:
    """Anything a control plane hands out (views, dicts, lists), as JSON text."""

    def plain(item: Any) -> Any:
        if is_dataclass(item) and not isinstance(item, type):
            return asdict(item)
        if hasattr(item, "value"):  # enums
            return item.value
        return str(item)

    return json.dumps(value if not is_dataclass(value) else asdict(value), default=plain,
                      ensure_ascii=False)


@dataclass
class Findings:
    """Where the planted secret was seen: ``what -> forms found``."""

    seen: dict[str, list[str]]
    checked: int = 0

    def check(self, what: str, shown: Any) -> None:
        self.checked += 1
        text = shown if isinstance(shown, str | bytes) else as_json(shown)
        found = leaks(text)
        if found:
            self.seen[what] = found

    def assert_none(self) -> None:
        assert self.checked, "nothing was checked"
        assert not self.seen, "the planted secret is shown in:\n" + "\n".join(
            f"  {what}: {forms}" for what, forms in sorted(self.seen.items()))


def findings() -> Findings:
    return Findings({})


@dataclass
class Driven:
    """What the planted runs left behind, to name in reads."""

    event_ids: list[str]
    dead_event_ids: list[str]
    waiting_run_ids: list[str]
    first_run_start: str  # the entry id of the first run's run_started


def cut_inside(payload: dict[str, Any], key: str, text: str) -> dict[str, Any]:
    """``payload`` with ``key`` set to ``text`` after dots, so that the secret in it crosses
    the 200th character of the payload's JSON (where its preview is cut)."""
    for dots in range(400):
        padded = {**payload, key: "." * dots + text}
        if json.dumps(padded, ensure_ascii=False).find(SCOPE) >= 190:
            return padded
    raise AssertionError("no padding puts the secret across the cut")


# (payload, trigger type): a tool call, the context, the conversation and an incident; a
# failing run (a dead letter); a run waiting for evidence (its payload carries the secret too).
INJECTIONS: tuple[tuple[dict[str, Any], str], ...] = (
    ({"script": "use"}, "manual"),
    (cut_inside({"script": "use"}, "alert", f"key {SCOPE} rejected"), "event"),
    (cut_inside({"script": "fail"}, "note", f"retry with {SCOPE}"), "manual"),
    ({"script": "quiet", "note": f"check {SCOPE}"}, "manual"),
)


async def drive(control: ControlPlane) -> Driven:
    """Wait for the vault to run, then inject the planted runs one at a time."""

    async def running() -> bool:
        return (await control.process_detail("vault")).summary.state == "running"

    await wait_for(running, 30.0, "the vault process to run (its MCP server connected)",
                   interval=0.05)
    event_ids: list[str] = []
    for payload, trigger_type in INJECTIONS:
        event_id = await control.inject("vault", payload, trigger_type)
        event_ids.append(event_id)

        async def settled(event_id: str = event_id) -> bool:
            runs = await control.runs("vault")
            letters = await control.dead_letters("vault")
            return any(r.event_id == event_id and r.state in ("succeeded", "waiting")
                       for r in runs) or any(d.event_id == event_id for d in letters)

        await wait_for(settled, 30.0, f"the run of {payload}", interval=0.05)
    letters = await control.dead_letters("vault")
    waiting = [r.run_id for r in await control.runs("vault", "waiting")]
    starts = await control.journal_entries("vault", entry_type="run_started", limit=5000)
    assert letters and waiting and starts
    return Driven(event_ids, [d.event_id for d in letters], waiting, starts[-1].entry_id)
