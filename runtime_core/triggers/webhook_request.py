"""One webhook request's body and the error answers: the size limit, parsing, and ``Reject``.

A request that cannot become an event raises ``Reject`` with the status to answer and a message
that is safe to show the sender; the trigger turns it into a JSON error response.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

RETRY_AFTER_SECONDS = 30


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


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media in ("application/json", "text/json") or media.endswith("+json")


def _reject_constant(name: str) -> Any:
    # NaN/Infinity are not JSON; they would break strict consumers of the journal later.
    raise ValueError(f"{name} is not valid JSON")


def parse_body(body: bytes, content_type: str) -> Any:
    """JSON for JSON content types, otherwise UTF-8 text; Reject(400) naming the problem."""
    if _is_json(content_type):
        try:
            text = body.decode("utf-8-sig")  # tolerate a BOM: some senders add one
        except UnicodeDecodeError as exc:
            raise Reject(400, f"body is not valid UTF-8 (byte {exc.start})") from None
        try:
            return json.loads(text, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            raise Reject(400, f"invalid JSON: {exc.msg} at line {exc.lineno} column "
                              f"{exc.colno}") from None
        except ValueError as exc:
            raise Reject(400, f"invalid JSON: {exc}") from None
        except RecursionError:
            raise Reject(400, "invalid JSON: nested too deeply") from None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Reject(400, f"body is not valid UTF-8 text (byte {exc.start}); send UTF-8 or "
                          "JSON with Content-Type: application/json") from None
