"""One webhook request's body and the error answers: the size limit, parsing, and ``Reject``.

A request that cannot become an event raises ``Reject`` with the status to answer and a message
that is safe to show the sender; the trigger turns it into a JSON error response. Anything the
journal could not store (NaN, a number out of range, nesting it cannot write back) is refused
here with 400: accepted, it would fail the journal write and get a 503 the sender retries
forever.
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

RETRY_AFTER_SECONDS = 30
MAX_DEPTH = 64  # objects and arrays inside each other; far beyond any sender's payload
MAX_FORM_FIELDS = 1000
FORM_MEDIA = "application/x-www-form-urlencoded"


class Reject(Exception):
    """A request answered with an error status; carries the status and a sender-safe message."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


def error_response(status: int, message: str,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"status": "error", "message": message}, status, headers=headers)


def unavailable_response(message: str) -> JSONResponse:
    return JSONResponse({"status": "unavailable", "message": message}, 503,
                        headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused with 413 as soon as it is known to exceed ``limit`` bytes."""
    too_large = Reject(413, f"body larger than {limit} bytes")
    declared = request.headers.get("content-length")
    if declared is not None:
        if not (declared.isascii() and declared.isdigit()):
            raise Reject(400, "invalid Content-Length")
        if int(declared) > limit:
            raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async with contextlib.aclosing(request.stream()) as stream:
            async for chunk in stream:
                size += len(chunk)
                if size > limit:  # chunked bodies have no Content-Length: stop reading here
                    raise too_large
                chunks.append(chunk)
    except ClientDisconnect:
        raise Reject(400, "client disconnected before sending the whole body") from None
    return b"".join(chunks)


def _media(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _is_json(content_type: str) -> bool:
    media = _media(content_type)
    return media in ("application/json", "text/json") or media.endswith("+json")


def _reject_constant(name: str) -> Any:
    # NaN/Infinity are not JSON; they would break strict consumers of the journal later.
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses as inf, which JSON cannot hold
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _too_deep(value: Any) -> bool:
    level: list[tuple[Any, int]] = [(value, 1)]
    while level:  # a loop, not recursion: the point is to refuse what recursion cannot walk
        item, depth = level.pop()
        children = item.values() if isinstance(item, dict) else item
        if not isinstance(item, dict | list):
            continue
        for child in children:
            if isinstance(child, dict | list):
                if depth >= MAX_DEPTH:
                    return True
                level.append((child, depth + 1))
    return False


def parse_json(text: str) -> Any:
    """Strict JSON: no NaN/Infinity, no number out of float range, at most MAX_DEPTH deep."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise Reject(400, f"invalid JSON: {exc.msg} at line {exc.lineno} column "
                          f"{exc.colno}") from None
    except ValueError as exc:  # NaN, 1e400, an integer over Python's digit limit
        raise Reject(400, f"invalid JSON: {exc}") from None
    except RecursionError:
        raise Reject(400, "invalid JSON: nested too deeply") from None
    if _too_deep(value):
        raise Reject(400, f"invalid JSON: nested more than {MAX_DEPTH} levels deep")
    return value


def parse_form(text: str) -> Any:
    """A form body as a dict (a repeated field: a list of its values). Slack's interactive
    requests are one field, ``payload``, holding JSON: that JSON object is the payload."""
    try:
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS,
                          errors="strict")
    except UnicodeDecodeError:
        raise Reject(400, "form body has a %-escape that is not UTF-8") from None
    except ValueError:
        raise Reject(400, f"form body has more than {MAX_FORM_FIELDS} fields") from None
    fields: dict[str, Any] = {}
    for name, value in pairs:
        old = fields.get(name)
        if old is None:
            fields[name] = value
        elif isinstance(old, list):
            old.append(value)
        else:
            fields[name] = [old, value]
    if list(fields) == ["payload"] and isinstance(fields["payload"], str):
        inner = parse_json(fields["payload"])
        if isinstance(inner, dict):
            return inner
    return fields


def parse_body(body: bytes, content_type: str) -> Any:
    """JSON for JSON content types, a dict for forms, otherwise UTF-8 text; Reject(400)
    naming the problem."""
    if _is_json(content_type) or _media(content_type) == FORM_MEDIA:
        try:
            text = body.decode("utf-8-sig")  # tolerate a BOM: some senders add one
        except UnicodeDecodeError as exc:
            raise Reject(400, f"body is not valid UTF-8 (byte {exc.start})") from None
        return parse_json(text) if _is_json(content_type) else parse_form(text)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Reject(400, f"body is not valid UTF-8 text (byte {exc.start}); send UTF-8 or "
                          "JSON with Content-Type: application/json") from None
