"""``promptui reconcile NAME RUN_ID``: settle a run that waits on a write whose outcome is
unknown (a crash, or a call cut off: a lost connection, a dead server, a timeout), through the
served runtime (``--url``, ``PROMPTUI_URL`` or the ``promptui serve`` running here).
``--applied [--result R]`` continues the run with the call counted as done, ``--not-applied``
lets the model decide again, ``--failed`` fails the run; on a terminal, without one, it shows the
call and asks."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from promptui.cli.options import (
    NAME_ARGUMENT,
    RUN_ARGUMENT,
    TOKEN_OPTION,
    URL_OPTION,
    fail,
    need_server,
    on_server,
    out,
    waiting_run,
)

if TYPE_CHECKING:
    from runtime_core.control.remote import RemoteControl

OUTCOMES = ("applied", "not_applied", "failed")
NOT_ASKED = ("not asked, as stdin is not a terminal; pass --applied (with --result), "
             "--not-applied or --failed")


def reconcile(
    name: str = NAME_ARGUMENT,
    run_id: str = RUN_ARGUMENT,
    applied: bool = typer.Option(False, "--applied", help="The write took effect."),
    not_applied: bool = typer.Option(False, "--not-applied",
                                     help="The write did not take effect."),
    failed: bool = typer.Option(False, "--failed", help="Fail the run."),
    result: str | None = typer.Option(None, "--result", help="What the write returned, as "
                                      "the model should read it (JSON or text; --applied)."),
    note: str = typer.Option("", "--note", help="A note for the journal."),
    url: str | None = URL_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """Reconcile a run waiting on a write whose outcome is unknown."""
    chosen = [o for o, flag in zip(OUTCOMES, (applied, not_applied, failed), strict=True)
              if flag]
    if len(chosen) > 1:
        raise fail("choose one of --applied, --not-applied and --failed")
    if result is not None and chosen and chosen[0] != "applied":
        raise fail("--result goes with --applied")
    target = need_server(url, token)

    full_id, detail = waiting_run(target, name, run_id, "unknown_write_outcome",
                                  "a write to be reconciled")
    _show(detail)
    outcome = chosen[0] if chosen else _ask()
    value = _parsed(result) if outcome == "applied" else None

    async def send(control: RemoteControl) -> None:
        await control.reconcile(name, full_id, outcome, result=value, note=note)

    on_server(target, send)
    out.print(f"{escape(name)}: run {full_id[:8]} reconciled [b]{outcome.replace('_', ' ')}"
              "[/b]" + ("; it runs on" if outcome != "failed" else ""))


def _show(detail: dict[str, Any]) -> None:
    where = f" on MCP server {detail['mcp_server']}" if detail.get("mcp_server") else ""
    key = escape(str(detail.get("idempotency_key")))
    out.print(f"[b]{escape(str(detail.get('tool')))}[/b]{escape(where)} (step "
              f"{detail.get('step')}, idempotency key {key})")
    if detail.get("cause"):
        out.print(f"  why: {escape(str(detail['cause']))}")
    out.print(f"  arguments: {escape(json.dumps(detail.get('args', {}), default=str))}")


def _ask() -> str:
    if not sys.stdin.isatty():
        raise fail(NOT_ASKED)
    answer: str = typer.prompt("applied, not_applied or failed")
    choice = answer.strip().lower().replace("-", "_")
    if choice not in OUTCOMES:
        raise fail(f"{choice!r} is not applied, not_applied or failed")
    return choice


def _parsed(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
