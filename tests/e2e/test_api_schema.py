"""The control API against its own OpenAPI schema: schemathesis (``st run``) sends generated
and mutated requests to every operation of a real ``promptui serve`` and checks that none is
answered with a 5xx, and that every answer conforms to the document: its status is declared,
its content type, body and headers are the declared ones, and a method the path does not take
gets 405 with ``Allow``. A throwaway server: the generated requests stop, fork and rewind its
processes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from runtime_core import AgentRuntime
from runtime_core.api.server import create_app
from runtime_core.control import LocalControl
from tests.helpers.serving import TOKEN, start_serve, write_agents

# Path parameters named ``name`` are mostly real process names, so the requests reach the
# commands behind the 404s; the rest stay random.
CONFIG = """\
[dictionaries.processes]
values = ["worker", "broken", "judge"]

[parameters]
"path.name" = { dictionary = "processes", probability = 0.8 }
"""


# Every operation, every answer: no 5xx, and the status, content type, body and headers are
# the ones the document declares; an undeclared method gets 405 with Allow.
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_schema_conformance", "response_headers_conformance", "unsupported_method")


def st_command() -> list[str]:
    exe = Path(sys.executable).parent / "st"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "schemathesis.cli"]


@pytest.mark.slow
def test_no_operation_answers_a_server_error(tmp_path: Path) -> None:
    agents = write_agents(tmp_path)
    (tmp_path / "schemathesis.toml").write_text(CONFIG)  # read from the working folder
    server = start_serve(tmp_path, str(agents), "--journal", str(tmp_path / "journal.db"))
    report = tmp_path / "report.json"
    try:
        operations = len([m for item in server.client().get("/openapi.json").json()[
            "paths"].values() for m in item])
        result = subprocess.run([
            *st_command(), "run", f"{server.url}/api/v1/openapi.json",
            "--checks", ",".join(CHECKS),
            "-H", f"Authorization: Bearer {server.token}",
            "--exclude-path", "/api/v1/events",  # a stream that never ends; see test_serve
            "--phases", "coverage,fuzzing", "--max-examples", "25", "--seed", "1",
            # one worker: hypothesis's lambda descriptions race in ast.parse across threads
            "--workers", "1", "--request-timeout", "10", "--generation-database", "none",
            "--no-color", "--report", "json", "--report-json-path", str(report),
        ], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    finally:
        code = server.stop()
    summary = json.loads(report.read_text())
    shown = result.stdout[-6000:]
    assert summary["failures"] == [], shown
    assert summary["test_cases"]["with_failures"] == 0, shown
    assert summary["errors"] == [], shown  # every operation was generated for and sent
    assert summary["operations"]["tested"] == operations - 1, shown
    assert summary["test_cases"]["generated"] >= 10 * (operations - 1), shown
    log = server.stderr()
    assert "INTERNAL_ERROR" not in log and "ERROR promptui.api" not in log, log[-6000:]
    assert code == 0, log[-3000:]


async def test_405_lists_every_method_the_path_takes() -> None:
    """Each method of a path is a route of its own; Allow names them all, not the first's."""
    app = create_app(LocalControl(AgentRuntime()), token=TOKEN, start_processes=False)
    paths = app.openapi()["paths"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1",
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        for template, item in paths.items():
            documented = {method.upper() for method in item}
            url = re.sub(r"\{[^}]*\}", "worker", template)
            unused = next(m for m in ("PUT", "PATCH", "DELETE", "POST") if m not in documented)
            response = await client.request(unused, url)
            assert response.status_code == 405, (unused, url, response.text)
            allowed = {m.strip() for m in response.headers["allow"].split(",")}
            assert documented <= allowed, (unused, url, response.headers["allow"])
            assert ("HEAD" in allowed) == ("GET" in allowed), response.headers["allow"]
            assert response.json()["error"]["code"] == "METHOD_NOT_ALLOWED"


def test_every_operation_declares_its_errors_in_the_error_shape() -> None:
    app = create_app(LocalControl(AgentRuntime()), token=TOKEN, start_processes=False)
    document = app.openapi()
    for template, item in document["paths"].items():
        for method, operation in item.items():
            declared = operation["responses"]
            where = (method, template, sorted(declared))
            if template != "/api/v1/health":
                assert {"401", "403", "421", "503"} <= set(declared), where
                assert declared["401"]["headers"]["WWW-Authenticate"]["required"], where
            if "{name}" in template:
                assert {"404", "409"} <= set(declared), where
            if method in ("post", "delete", "patch"):
                assert "413" in declared, where
            assert declared["503"]["headers"]["Retry-After"]["required"], where
            for status, answer in declared.items():
                if status.startswith(("4", "5")) and template != "/api/v1/health":
                    schema = answer["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorBody"}, where
    assert "HTTPValidationError" not in document["components"]["schemas"]  # 422 is ours too
