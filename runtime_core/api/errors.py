"""The HTTP status of each control-plane refusal, answered in the API's one error shape
(error_shape.py). An unexpected exception is never quoted to the client: it gets a fixed
message and an error id; the traceback goes to the log under that id."""

from __future__ import annotations

import functools
import logging
import re
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

from runtime_core.api.error_shape import error_body
from runtime_core.control.plane import ControlError
from runtime_core.journal.provider import JournalError

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
    "CONFLICT": 409,  # e.g. a fork's trigger clashes with one already served
    "JOURNAL_UNAVAILABLE": 503,  # degraded: try again once the journal writes again
    "INBOX_UNAVAILABLE": 503,  # a cluster node cannot reach its inbox (the database) now
    "NOT_RUNNING": 409,  # an inject for a stopped or failed process: start it first
    "NOT_ACCEPTING": 503,  # an inject while the process stops, drains or shuts down
    "QUEUE_FULL": 503,  # an inject with no room in the queue: try again shortly
}


def error_response(status: int, code: str, message: str, *, error_id: str = "",
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, message, error_id), status_code=status, headers=headers)


def _where(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(part) for part in loc) or "(request)"


_METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _allowed_methods(request: Request, found: str) -> str:
    """Every method the OpenAPI document lists for this path (each method is a route of its
    own, and Starlette's 405 names only the first route's); ``found`` when it lists none."""
    app: FastAPI = request.app
    paths: dict[str, dict[str, Any]] = app.openapi().get("paths", {})
    path = request.scope.get("path", "")
    allowed = {method.upper() for template, item in paths.items()
               if _template(template).fullmatch(path) for method in item}
    if not allowed:
        return found
    if "GET" in allowed:
        allowed.add("HEAD")  # Starlette answers HEAD wherever it answers GET
    rank = {method: i for i, method in enumerate(_METHOD_ORDER)}
    return ", ".join(sorted(allowed, key=lambda m: (rank.get(m, len(rank)), m)))


@functools.lru_cache(maxsize=256)
def _template(template: str) -> re.Pattern[str]:
    """``/processes/{name}`` as Starlette matches it: a parameter is one path segment."""
    return re.compile(re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(template)))


def install(app: FastAPI) -> None:
    @app.exception_handler(ControlError)
    async def control_error(_: Request, exc: ControlError) -> JSONResponse:
        status = STATUS_OF_CODE.get(exc.code, 409)
        return error_response(status, exc.code, str(exc),
                              headers={"Retry-After": "5"} if status == 503 else None)

    @app.exception_handler(JournalError)
    async def journal_error(_: Request, exc: JournalError) -> JSONResponse:
        # a degraded or fenced journal (a cluster node that just lost a process): the request
        # changed nothing, and asking again (this node or the new owner) is the answer
        return error_response(503, "JOURNAL_UNAVAILABLE", f"the journal refused the write, so "
                              f"nothing changed: {exc}; try again", headers={"Retry-After": "5"})

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{_where(err.get('loc', ()))}: {err.get('msg', 'invalid')}"
                             for err in exc.errors()[:10])
        return error_response(422, "INVALID_REQUEST", problems)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        if exc.status_code == 400:  # FastAPI's "error parsing the body": not UTF-8 JSON
            return error_response(422, "INVALID_REQUEST", "the request body could not be "
                                  "read as JSON (UTF-8); send a JSON object")
        if exc.status_code == 405:  # Starlette lists only the first route's methods
            headers["Allow"] = _allowed_methods(request, headers.get("Allow", ""))
        code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "HTTP_ERROR")
        message = {404: "no such route; the routes are listed at /api/v1/openapi.json",
                   405: "this route does not take that method; see /api/v1/openapi.json"
                   }.get(exc.status_code, "the request was refused")
        return error_response(exc.status_code, code, message, headers=headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        error_id = uuid.uuid4().hex[:12]
        log.error("error %s on %s %s", error_id, request.method, request.url.path,
                  exc_info=(type(exc), exc, exc.__traceback__))
        return error_response(500, "INTERNAL_ERROR", "the server failed on this request; "
                              f"its log has the details under error id {error_id}",
                              error_id=error_id)
