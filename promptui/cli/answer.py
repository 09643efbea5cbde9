"""``promptui answer NAME RUN_ID``: answer the question an MCP server asked during a run's tool
call (elicitation), through the served runtime (``--url``, ``PROMPTUI_URL`` or the ``promptui
serve`` running here). ``--accept KEY=VALUE`` (once per field), ``--decline`` or ``--cancel``;
on a terminal, without them, it shows the question and asks for each field of the form."""

from __future__ import annotations

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
    from runtime_core.control.elicitation import FormField
    from runtime_core.control.remote import RemoteControl

ACCEPT_OPTION = typer.Option(
    None, "--accept", metavar="KEY=VALUE",
    help="Accept, with this value for the form's field KEY (repeat for each field; "
    "--accept '' accepts leaving every field out).")
NOT_ASKED = ("not asked, as stdin is not a terminal; pass --accept KEY=VALUE (once per field), "
             "--decline or --cancel")


def answer(
    name: str = NAME_ARGUMENT,
    run_id: str = RUN_ARGUMENT,
    accept: list[str] | None = ACCEPT_OPTION,
    decline: bool = typer.Option(False, "--decline", help="Say no to the server."),
    cancel: bool = typer.Option(False, "--cancel", help="Dismiss the question unanswered."),
    url: str | None = URL_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """Answer an MCP server's question a run waits on (accept with values, decline, cancel)."""
    if sum((accept is not None, decline, cancel)) > 1:
        raise fail("choose one of --accept, --decline and --cancel")
    target = need_server(url, token)

    full_id, detail = waiting_run(target, name, run_id, "elicitation",
                                  "the answer to a server's question")
    _show(detail)
    action, content = _decide(detail, accept, decline, cancel)

    async def send(control: RemoteControl) -> None:
        await control.answer_elicitation(name, full_id, action, content=content)

    on_server(target, send)
    out.print(f"{escape(name)}: run {full_id[:8]} answered [b]{action}[/b]; it runs on")


def _fields(detail: dict[str, Any]) -> list[FormField]:
    from runtime_core.control.elicitation import FormError, form_fields

    try:
        return form_fields(detail.get("requested_schema") or {"type": "object"})
    except FormError as exc:
        raise fail(f"the server's form cannot be shown: {exc}") from None


def _show(detail: dict[str, Any]) -> None:
    out.print(f"[b]{escape(str(detail.get('server')))}[/b] asks during "
              f"{escape(str(detail.get('tool')))} (step {detail.get('step')}):")
    out.print(f"  {escape(str(detail.get('message', '')))}")
    if detail.get("mode") == "url":
        out.print(f"  open: {escape(str(detail.get('url', '')))}")
        return
    for field in _fields(detail):
        need = "required" if field.required else "optional"
        about = f" - {field.description}" if field.description else ""
        out.print(f"  [b]{escape(field.name)}[/b] ({escape(field.hint())}, {need})"
                  f"{escape(about)}")


def _decide(detail: dict[str, Any], accept: list[str] | None, decline: bool, cancel: bool
            ) -> tuple[str, dict[str, Any] | None]:
    if decline or cancel:
        return ("decline" if decline else "cancel"), None
    interactive = sys.stdin.isatty()
    if accept is None:
        if not interactive:
            raise fail(NOT_ASKED)
        choice = typer.prompt("accept, decline or cancel", default="cancel").strip().lower()
        if choice not in ("accept", "decline", "cancel"):
            raise fail(f"{choice!r} is not accept, decline or cancel")
        if choice != "accept":
            return choice, None
    if detail.get("mode") == "url":
        return "accept", None
    fields = _fields(detail)
    content = _given(fields, accept or [])
    if interactive:
        for field in fields:
            if field.name not in content:
                value = _ask(field)
                if value is not None:
                    content[field.name] = value
    from runtime_core.control.elicitation import FormError, check_content

    try:
        return "accept", check_content(detail.get("requested_schema") or {}, content)
    except FormError as exc:
        raise fail(f"the answer does not fit the form: {exc}") from None


def _given(fields: list[FormField], pairs: list[str]) -> dict[str, Any]:
    from runtime_core.control.elicitation import parse_value

    by_name = {f.name: f for f in fields}
    content: dict[str, Any] = {}
    for pair in pairs:
        if not pair:
            continue
        key, sep, text = pair.partition("=")
        if not sep:
            raise fail(f"--accept {pair!r}: give KEY=VALUE")
        field = by_name.get(key.strip())
        if field is None:
            raise fail(f"--accept {pair!r}: the form has no field {key.strip()!r} (fields: "
                       f"{', '.join(by_name) or 'none'})")
        try:
            content[field.name] = parse_value(field, text)
        except ValueError as exc:
            raise fail(f"--accept {pair!r}: {exc}") from None
    return content


def _ask(field: FormField) -> Any:
    from runtime_core.control.elicitation import field_problem, parse_value

    default = "" if field.default is None else str(field.default)
    while True:
        need = "" if field.required else ", Enter to leave out"
        text = typer.prompt(f"{field.label} ({field.hint()}{need})", default=default,
                            show_default=bool(default))
        try:
            value = parse_value(field, text)
        except ValueError as exc:
            out.print(f"[red]{escape(str(exc))}[/red]")
            continue
        problem = "required" if value is None and field.required else \
            None if value is None else field_problem(field, value)
        if problem is not None:
            out.print(f"[red]{escape(problem)}[/red]")
            continue
        return value
