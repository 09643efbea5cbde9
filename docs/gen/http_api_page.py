"""``reference/http-api.md``: the control API of ``promptui serve`` from its own OpenAPI
document (every path, method, parameter, body field and answer), then the webhook servers,
which are not FastAPI apps, in prose."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from .markdown import banner, cell, code, prose, table

METHODS = ("get", "post", "put", "patch", "delete")
#: The error statuses every guarded route shares: listed once, then named per operation.
ERROR_PREFIXES = ("4", "5")

INTRO = """\
# HTTP API

`promptui serve` runs the runtime headless behind this API; `promptui attach`, the CLI's
remote commands (`status`, `start`, `inject`, `dead-letters`, ...) and your own scripts speak
it. The machine-readable document is served at `/api/v1/openapi.json`; this page is made from
it.

**Authentication.** Every route but `/api/v1/health` needs `Authorization: Bearer <token>`.
The token is read from `--token-file` (default `.promptui/token`, made with mode 0600 at the
first start) unless `PROMPTUI_TOKEN` is set. A request from a web page (any `Origin` header) is
refused with 403, a `Host` that names no loopback host on a loopback bind with 421, and every
command on a `--read-only` server with 403 `READ_ONLY`.

**Errors** all have one shape, `{"error": {"code": "...", "message": "...", "error_id":
"..."}}`: `code` is machine-readable, `message` says what failed and what to do, and
`error_id` (on an unexpected failure only) is the key to the server's log line. The codes each
operation can answer are listed with it; what they mean:
"""

#: What a webhook POST is answered: (status, body, meaning).
WEBHOOK_ANSWERS = (
    ("202", '`{"status": "accepted", "event_id": ...}`',
     "Journaled and queued: it will run, across restarts too."),
    ("200", '`{"status": "ignored", "event_id": ...}`',
     "The trigger's `filter_expression` did not match."),
    ("200", '`{"status": "duplicate", "event_id": ...}`',
     "This delivery (the sender's delivery id, else its signature) was taken before; the id "
     "is the first event's. Nothing is queued."),
    ("200", '`{"challenge": ...}`', "Slack's `url_verification` handshake."),
    ("503 + `Retry-After`", '`{"status": "unavailable", "message": ...}`',
     "The queue is full, or the process is starting, stopping, stopped or cannot journal. "
     "Senders retry a 503."),
    ("400, 401, 403, 413", '`{"status": "error", "message": ...}`',
     "Not JSON, a bad signature, a refused source or Origin, too large."),
)

WEBHOOKS = """\
## Webhook servers

A `webhook` trigger is served by a small HTTP server of its own, not by the control API: one
server per (`webhook_host`, `webhook_port`), shared by every trigger of the runtime on that
address, started with the first and stopped with the last (port 0 gives a trigger a server of
its own). Its routes:

`POST <webhook_path>`
:   An event for the trigger's process. The request is checked in this order: the client
    address against `allowed_sources` (403), the body size (413), the signature over the raw
    body when `hmac_secret` is set (401; the schemes are listed below), the JSON body (400).
    Then the answer says what the process did with it:

{answers}

    An event is acknowledged (202) only once it is in the journal: an accepted event is never
    lost, and a delivery acknowledged once is acknowledged once, across restarts.

`GET /health`
:   `{"status": "ok"}`, or 503 `{"status": "unavailable"}` while a process behind the server is
    failed, stopping or cannot journal, so a load balancer stops sending. `GET
    /health?path=/alerts` asks about one path. It needs no token and says nothing more.

A path that a process of this runtime will serve but that no trigger serves at the moment (the
process not started yet, restarting, stopped) answers 503 with `Retry-After`, never 404: a
sender retries a 503 and may drop a 404. Another path answers 404, another method 405. A
foreign `Host` on a loopback bind gets 421, a request with an `Origin` header 403.
"""


def control_app() -> Any:
    """The control API's FastAPI app, built over an empty runtime (nothing starts)."""
    from runtime_core.api.server import create_app
    from runtime_core.control.local import LocalControl
    from runtime_core.runtime import AgentRuntime

    return create_app(LocalControl(AgentRuntime()), token="documentation",
                      start_processes=False)


def cluster_document() -> dict[str, Any]:
    """The OpenAPI document of the routes only a scale-out node adds (``serve --cluster``)."""
    from fastapi import FastAPI

    from runtime_core.api.cluster_routes import router

    app = FastAPI(title="promptui cluster routes")
    app.include_router(router)
    document: dict[str, Any] = app.openapi()
    return document


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(METHOD, path, operation) for every operation of an OpenAPI document, in its order."""
    for path, item in document.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path, item[method]


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if not ref:
        return schema
    found: dict[str, Any] = document
    for part in ref.removeprefix("#/").split("/"):
        found = found[part]
    return found


def schema_type(schema: dict[str, Any]) -> str:
    """A JSON schema in a few words: ``string``, ``integer or null``, ``one of: a, b``."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "enum" in schema:
        return "one of: " + ", ".join(str(v) for v in schema["enum"])
    if "const" in schema:
        return f"always {schema['const']}"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(dict.fromkeys(schema_type(s) for s in schema[key]))
    kind = schema.get("type")
    if kind == "array":
        return f"list of {schema_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {schema_type(schema['additionalProperties'])}"
    return str(kind or "any")


def _limits(schema: dict[str, Any]) -> str:
    words = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<",
             "minLength": "length >=", "maxLength": "length <="}
    found = [f"{words[k]} {schema[k]}" for k in words if k in schema]
    for option in schema.get("anyOf", ()):
        found += [f"{words[k]} {option[k]}" for k in words if k in option]
    return ", ".join(found)


#: What the path parameters name, where a route's own declaration does not say.
PATH_PARAMETERS = {
    "name": "The process name.",
    "run_id": "The run's id (from the runs or a journal entry).",
    "event_id": "The dead letter's event id.",
    "entry_id": "A journal entry's id, PROCESS:SEQ.",
    "trigger_id": "The trigger's id (from GET .../triggers).",
    "incident_id": "The incident's id (from GET /api/v1/incidents).",
}
#: What the query and header parameters mean, where the route's declaration does not say.
OTHER_PARAMETERS = {
    "last-event-id": "The id of the last event received: the stream resumes after it (an id "
                     "from another server start replays what the log still holds); its "
                     "first event, hello, says how many were missed for good.",
    "before_seq": "Entries before this seq (paging back).",
    "after_seq": "Entries after this seq (following new ones).",
    "at_or_before": "Entries at or before this time (Unix seconds).",
    "type": "Only entries of this type, e.g. run_finished, tool_intent, dead_lettered.",
    "text": "Only entries whose data contains this text.",
    "limit": "The most entries (or items) to return.",
    "offset": "Items to skip from the oldest.",
    "run_id": "Only the entries of this run.",
    "state": "Only runs in this state: queued, running, waiting, succeeded, failed, cancelled.",
    "entry_id": "A journal entry's id, PROCESS:SEQ.",
    "mode": "both, conversation_only, code_only, summarize, or cancel (a preview).",
    "process": "Only this process's incidents.",
}


def _known(param: dict[str, Any]) -> str:
    known = PATH_PARAMETERS if param["in"] == "path" else OTHER_PARAMETERS
    return known.get(str(param["name"]).lower(), "")


def _default(schema: dict[str, Any]) -> str:
    """A schema's default as JSON (``""``, ``null``), or "" when it has none."""
    return code(json.dumps(schema["default"])) if "default" in schema else ""


def _parameters(operation: dict[str, Any]) -> str:
    rows = []
    for param in operation.get("parameters", []):
        schema = param.get("schema", {})
        kind = schema_type(schema)
        limits = _limits(schema)
        default = _default(schema)
        rows.append((code(param["name"]), param["in"], cell(kind + (f" ({limits})"
                                                                    if limits else "")),
                     "yes" if param.get("required") else "", default,
                     cell(param.get("description") or _known(param))))
    if not rows:
        return ""
    return table(("Parameter", "In", "Type", "Required", "Default", "Description"), rows)


def _body(document: dict[str, Any], operation: dict[str, Any]) -> str:
    body = operation.get("requestBody")
    if not body:
        return ""
    content = body.get("content", {}).get("application/json", {})
    schema = _resolve(document, content.get("schema", {}))
    required = set(schema.get("required", ()))
    properties: dict[str, Any] = schema.get("properties", {})
    lead = "Body (JSON" + (", optional" if not body.get("required") else "") + ")"
    if not properties:
        about = schema.get("description") or "a JSON object"
        return f"{lead}: {cell(about)}.\n"
    rows = []
    for name, field in properties.items():
        limits = _limits(field)
        rows.append((code(name), cell(schema_type(field) + (f" ({limits})" if limits else "")),
                     "yes" if name in required else "",
                     _default(field),
                     cell(field.get("description", ""))))
    return f"{lead}:\n\n" + table(("Field", "Type", "Required", "Default", "Description"),
                                  rows)


def _answers(operation: dict[str, Any]) -> str:
    rows = []
    errors = []
    for status, answer in operation.get("responses", {}).items():
        if status.startswith(ERROR_PREFIXES):
            errors.append(status)
            continue
        schema = answer.get("content", {}).get("application/json", {}).get("schema")
        kind = f" ({_linked_type(schema)})" if schema else ""
        rows.append(f"- **{status}**{kind}: {cell(answer.get('description', ''))}")
    if errors:
        rows.append("- Errors: " + ", ".join(f"[{s}](#error-{s})" for s in errors))
    return "\n".join(rows) + "\n"


def _linked_type(schema: dict[str, Any]) -> str:
    """``schema_type`` with each named schema linked to its table under Schemas."""
    text = cell(schema_type(schema))
    for name in _refs(schema):
        text = re.sub(rf"\b{re.escape(name)}\b", f"[{name}](#schema-{name.lower()})", text,
                      count=1)
    return text


def _refs(value: Any) -> list[str]:
    """The schema names ``value`` refers to, nested ones too, in order."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref" and isinstance(item, str):
                found.append(item.rsplit("/", 1)[-1])
            else:
                found += _refs(item)
    elif isinstance(value, list):
        for item in value:
            found += _refs(item)
    return list(dict.fromkeys(found))


def _is_generated_summary(operation: dict[str, Any]) -> bool:
    # FastAPI's summary when a route sets none: the function's name, title-cased.
    summary = str(operation.get("summary", ""))
    words = str(operation.get("operationId", "")).split("_api_")[0].replace("_", " ")
    return summary == words.title()


def operation_section(document: dict[str, Any], method: str, path: str,
                      operation: dict[str, Any]) -> str:
    """One operation: heading, what it does, parameters, body and answers."""
    parts = [f"### `{method} {path}`\n"]
    description = operation.get("description", "")
    if not _is_generated_summary(operation):
        parts.append(cell(operation.get("summary", "")) + "\n")
    if description:
        parts.append(prose(description) + "\n")
    for piece in (_parameters(operation), _body(document, operation), _answers(operation)):
        if piece:
            parts.append(piece)
    return "\n".join(parts)


def _error_table(documents: list[dict[str, Any]]) -> str:
    described: dict[str, Counter[str]] = {}
    for document in documents:
        for _, _, operation in operations(document):
            for status, answer in operation.get("responses", {}).items():
                if status.startswith(ERROR_PREFIXES):
                    described.setdefault(status, Counter())[answer.get("description", "")] += 1
    # The description most routes give (one route may say more of its own case).
    rows = [(f'<span id="error-{status}">{status}</span>',
             cell(described[status].most_common(1)[0][0])) for status in sorted(described)]
    return table(("Status", "When"), rows)


def _group(path: str) -> str:
    segments = path.removeprefix("/api/v1/").split("/")
    if segments[0] == "processes" and len(segments) > 2:
        return {"dead-letters": "Dead letters", "triggers": "Triggers", "journal": "Journal",
                "runs": "Runs", "rewind-plan": "Rewind and fork", "rewind": "Rewind and fork",
                "fork": "Rewind and fork", "health": "Health", "incidents": "Incidents",
                "manifest": "Processes"}.get(segments[2], "Processes")
    return {"processes": "Processes", "incidents": "Incidents",
            "cluster": "Cluster"}.get(segments[0], "The runtime")


def render() -> str:
    """The whole HTTP API page."""
    document = control_app().openapi()
    cluster = cluster_document()
    parts = [banner("http_api_page"), INTRO, _error_table([document, cluster])]
    groups: dict[str, list[str]] = {}
    for method, path, operation in operations(document):
        groups.setdefault(_group(path), []).append(
            operation_section(document, method, path, operation))
    for title, sections in groups.items():
        parts.append(f"## {title}\n")
        parts += sections
    parts.append("## Cluster nodes\n")
    parts.append("A node of a scale-out cluster (`promptui serve --cluster DSN`) answers every "
                 "route above (a command on a process another node runs is forwarded to its "
                 "owner) and these too:\n")
    parts += [operation_section(cluster, method, path, operation)
              for method, path, operation in operations(cluster)]
    parts.append(_schemas([document, cluster]))
    answers = table(("Status", "Body", "Meaning"), WEBHOOK_ANSWERS)
    indented = "\n".join("    " + line for line in answers.splitlines())  # in the definition
    parts.append(WEBHOOKS.replace("{answers}", indented))
    parts.append(_schemes())
    return "\n".join(parts)


def _schemas(documents: list[dict[str, Any]]) -> str:
    """Every named schema a body or an answer uses, with its fields."""
    parts = ["## Schemas\n", "The bodies and answers named above, field by field.\n"]
    done: set[str] = set()
    for document in documents:
        for name, schema in document.get("components", {}).get("schemas", {}).items():
            if name in done or name in ("ValidationError", "HTTPValidationError"):
                continue
            done.add(name)
            parts.append(f'### {name} {{#schema-{name.lower()}}}\n')
            if schema.get("description"):
                parts.append(prose(schema["description"]) + "\n")
            required = set(schema.get("required", ()))
            properties: dict[str, Any] = schema.get("properties", {})
            if schema.get("enum"):
                parts.append("One of: " + ", ".join(code(v) for v in schema["enum"]) + ".\n")
            if not properties:
                continue
            rows = [(code(field), _linked_type(value), "yes" if field in required else "",
                     cell(value.get("description", ""))) for field, value in properties.items()]
            parts.append(table(("Field", "Type", "Always there", "Description"), rows))
    return "\n".join(parts)


def _schemes() -> str:
    from runtime_core.triggers.webhook.signatures.table import VERIFIERS

    rows = []
    for name, verify in VERIFIERS.items():
        module = __import__(verify.__module__, fromlist=["_"])
        rows.append((code(name), cell(prose((module.__doc__ or "").split("\n\n")[0]))))
    return ("### Signature schemes\n\n`signature_scheme` in a webhook trigger picks how "
            "`hmac_secret` is checked:\n\n" + table(("Scheme", "What the sender sends"), rows))
