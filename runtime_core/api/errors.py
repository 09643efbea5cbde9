"""The HTTP status of each control-plane refusal, answered in the API's one error shape
(error_shape.py). An unexpected exception is never quoted to the client: it gets a fixed
message and an error id; the traceback goes to the log under that id."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

from runtime_core.api.error_shape import error_body
from runtime_core.control.plane import ControlError

log = logging.getLogger("promptui.api")

STATUS_OF_CODE = {
    "PROCESS_NOT_FOUND": 404,
    "TRIGGER_NOT_FOUND": 404,
    "NOT_FOUND": 404,
    "READ_ONLY": 403,
    "UNKNOWN_FIELD": 422,
    "INVALID_CONFIG": 422,
    "INVALID_REQUEST": 422,
    "HEALTH_DISABLED": 400,
    "REFUSED": 409,
    "JOURNAL_UNAVAILABLE": 503,  # degraded: try again once the journal writes again
}


def error_response(status: int, code: str, message: str, *, error_id: str = "",
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, message, error_id), status_code=status, headers=headers)


def _where(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(part) for part in loc) or "(request)"


def install(app: FastAPI) -> None:
    @app.exception_handler(ControlError)
    async def control_error(_: Request, exc: ControlError) -> JSONResponse:
        status = STATUS_OF_CODE.get(exc.code, 409)
        return error_response(status, exc.code, str(exc),
                              headers={"Retry-After": "5"} if status == 503 else None)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{_where(err.get('loc', ()))}: {err.get('msg', 'invalid')}"
                             for err in exc.errors()[:10])
        return error_response(422, "INVALID_REQUEST", problems)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "HTTP_ERROR")
        message = {404: "no such route; the routes are listed at /api/v1/openapi.json",
                   405: "this route does not take that method; see /api/v1/openapi.json"
                   }.get(exc.status_code, "the request was refused")
        return error_response(exc.status_code, code, message, headers=dict(exc.headers or {}))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        error_id = uuid.uuid4().hex[:12]
        log.error("error %s on %s %s", error_id, request.method, request.url.path,
                  exc_info=(type(exc), exc, exc.__traceback__))
        return error_response(500, "INTERNAL_ERROR", "the server failed on this request; "
                              f"its log has the details under error id {error_id}",
                              error_id=error_id)
