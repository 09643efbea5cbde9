"""The error answers each route declares in the OpenAPI document: every status a route can give
(the guard's, the control plane's refusals, validation, the connection limit), each with the
API's one error shape (error_shape.py) and the headers that come with it. A client generated
from the document, or schemathesis, then knows every answer, not only the 2xx."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorDetail(BaseModel):
    code: str = Field(description="Machine-readable reason, e.g. PROCESS_NOT_FOUND")
    message: str = Field(description="What failed and what to do")
    error_id: str = Field("", description="On an unexpected failure: the id the server's log "
                          "has the details under")


class ErrorBody(BaseModel):
    error: ErrorDetail


_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again",
                                "required": True, "schema": {"type": "string"}}}

#: status -> (description, headers it always carries)
_ERRORS: dict[int, tuple[str, dict[str, Any]]] = {
    400: ("The process has no health monitoring (HEALTH_DISABLED)", {}),
    401: ("No valid 'Authorization: Bearer <token>' (UNAUTHORIZED)", {
        "WWW-Authenticate": {"description": "Bearer", "required": True,
                             "schema": {"type": "string"}}}),
    403: ("A request from a web page (CROSS_ORIGIN_REFUSED), or a command on a read-only "
          "server (READ_ONLY)", {}),
    404: ("No such process (PROCESS_NOT_FOUND), trigger (TRIGGER_NOT_FOUND), journal entry "
          "or dead letter (NOT_FOUND)", {}),
    409: ("Refused in the current state, e.g. starting a running process (REFUSED), a "
          "fork whose triggers clash with ones already served (CONFLICT), or a configuration "
          "a manifest cannot hold (NOT_SAVABLE)", {}),
    413: ("The body is over the server's --max-body (BODY_TOO_LARGE)", {}),
    421: ("The Host header names no loopback host on a loopback server "
          "(MISDIRECTED_REQUEST)", {}),
    422: ("The request does not validate (INVALID_REQUEST, UNKNOWN_FIELD, INVALID_CONFIG)", {}),
    503: ("A journal cannot be written (JOURNAL_UNAVAILABLE), or the server holds the most "
          "connections it allows (TOO_MANY_CONNECTIONS): try again after Retry-After",
          _RETRY_AFTER),
}

#: A route behind the guard without parameters: the token, Host and Origin, the limit.
READ = (401, 403, 421, 503)
#: Any route behind the guard that takes parameters: they may not validate.
GUARDED = (*READ, 422)
#: A route on one process: it may not exist, or refuse in its state.
ON_PROCESS = (*GUARDED, 404, 409)
#: A command: it has a body (or may) that can be too large.
COMMAND = (*ON_PROCESS, 413)


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route that can answer ``statuses``, each with the error shape."""
    declared: dict[int | str, dict[str, Any]] = {}
    for status in sorted(set(statuses)):
        description, headers = _ERRORS[status]
        declared[status] = {"model": ErrorBody, "description": description}
        if headers:
            declared[status]["headers"] = headers
    return declared


def health_unavailable(health: type[BaseModel]) -> dict[int | str, dict[str, Any]]:
    """/health's 503: the health body while a journal cannot be written, the error shape
    when the server is at its connection limit."""
    return {503: {"model": health | ErrorBody, "headers": _RETRY_AFTER, "description":
                  "A journal cannot be written (status degraded: events are refused until it "
                  "writes again), or the server holds the most connections it allows"}}
