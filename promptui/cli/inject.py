"""``promptui inject NAME [PAYLOAD]`` (or ``--payload JSON``, ``--payload @file.json``): queue
an event for a process of the served runtime (``--url``, ``PROMPTUI_URL`` or the ``promptui
serve`` running here), as the room's ``i`` does.

It prints the event's id once the event is durable. A refusal keeps nothing (the process is
stopped: exit 1; it is draining, stopping or its queue is full: exit 75, try again). With
``--idempotency-key KEY`` a retry is safe: the same key for the same process within a day
queues nothing more and prints the first inject's event id."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from promptui.cli.options import (
    NAME_ARGUMENT,
    TOKEN_OPTION,
    URL_OPTION,
    fail,
    json_option,
    need_server,
    on_server,
    out,
)

if TYPE_CHECKING:
    from runtime_core.control.plane import Injected
    from runtime_core.control.remote import RemoteControl

#: sysexits' EX_TEMPFAIL: refused for now (draining, stopping, queue full), nothing kept
EXIT_TRY_AGAIN = 75
TRANSIENT = frozenset({"NOT_ACCEPTING", "QUEUE_FULL", "JOURNAL_UNAVAILABLE",
                       "INBOX_UNAVAILABLE", "UNREACHABLE"})

PAYLOAD_ARGUMENT = typer.Argument(
    None, help="The event's payload: a JSON object, or - to read it from stdin (or give "
    "--payload).", show_default=False)
PAYLOAD_OPTION = typer.Option(
    None, "--payload", metavar="JSON|@FILE", help="The event's payload: a JSON object, "
    "@file.json to read it from a file, or - for stdin (default: {}).")
KEY_OPTION = typer.Option(
    None, "--idempotency-key", metavar="KEY",
    help="Make a retry safe: the same KEY for the same process within a day queues nothing "
    "more and prints the first inject's event id (1 to 255 printable ASCII characters, e.g. "
    "a UUID).")


def _payload(text: str) -> dict[str, Any]:
    """The payload ``text`` gives: JSON, ``-`` (stdin) or ``@path`` (a file); a JSON mistake
    is reported with where it is (the file, line and column)."""
    source = "the payload"
    if text == "-":
        text, source = sys.stdin.read(), "the payload on stdin"
    elif text.startswith("@"):
        path = Path(text[1:]).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise fail(f"cannot read the payload file {path}: {why}") from None
        source = f"{path}"
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"{source}:{exc.lineno}:{exc.colno}" if source != "the payload" else \
            f"the payload, line {exc.lineno} column {exc.colno}"
        raise fail(f"{where}: not JSON: {exc.msg}; give a JSON object, e.g. "
                   f"'{{\"task\": \"check\"}}'") from None
    if not isinstance(payload, dict):
        raise fail(f"{source} must be a JSON object, e.g. '{{\"task\": \"check\"}}', not "
                   f"{type(payload).__name__}")
    return payload


def inject(
    name: str = NAME_ARGUMENT,
    payload: str | None = PAYLOAD_ARGUMENT,
    payload_option: str | None = PAYLOAD_OPTION,
    trigger_type: str = typer.Option("manual", "--type", help="The event's trigger type."),
    idempotency_key: str | None = KEY_OPTION,
    as_json: bool = json_option("Print {name, event_id, replayed} as JSON."),
    url: str | None = URL_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """Queue an event for a process of the served runtime (--idempotency-key: retry safely)."""
    if payload is not None and payload_option is not None:
        raise fail("give the payload once: as the argument or with --payload, not both")
    body = _payload(payload_option or payload or "{}")
    target = need_server(url, token)

    async def send(control: RemoteControl) -> Injected | tuple[str, str]:
        from runtime_core.control.plane import ControlError, Injected

        try:
            if idempotency_key is None:
                return Injected(await control.inject(name, body, trigger_type))
            return await control.inject_once(name, body, trigger_type,
                                             idempotency_key=idempotency_key)
        except ControlError as exc:
            if exc.code not in TRANSIENT:
                raise
            return exc.code, str(exc)

    done = on_server(target, send)
    if isinstance(done, tuple):
        code, message = done
        again = " with the same --idempotency-key" if idempotency_key else ""
        raise fail(f"{message} ({code}); nothing was kept: run it again{again}",
                   EXIT_TRY_AGAIN)
    if as_json:
        print(json.dumps({"name": name, "event_id": done.event_id,
                          "replayed": done.replayed}))
    elif done.replayed:
        out.print(f"{escape(name)}: event {done.event_id} (this --idempotency-key was used "
                  "before: that event, nothing queued now)")
    else:
        out.print(f"{escape(name)}: event {done.event_id} queued")
