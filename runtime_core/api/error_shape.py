"""The API's one error shape, ``{"error": {"code", "message", "error_id"?}}``, as plain data
and as a raw ASGI answer (for the guard, which answers before FastAPI is involved)."""

from __future__ import annotations

import json
from typing import Any


def error_body(code: str, message: str, error_id: str = "") -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if error_id:
        error["error_id"] = error_id
    return {"error": error}


RawError = tuple[int, list[tuple[bytes, bytes]], bytes]


def raw_error(status: int, code: str, message: str,
              headers: dict[str, str] | None = None) -> RawError:
    """The same error for the ASGI guard, which answers before any route runs."""
    body = json.dumps(error_body(code, message)).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return status, raw, body
