"""A tool's own log lines carry a raw secret (issue 32): one that logs its scope's secret, the
same value read from the environment, and a traceback holding it, at import and in a run.
Under ``promptui run`` and ``promptui serve`` the value reaches no output, no log file and no
stream (the raw value and its first characters are grepped, as test_no_secret_anywhere does);
the lines themselves are still there, with ``[secret:api_key]`` in its place."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from promptui.cli.options import load_runtime
from runtime_core.log_redaction import WITHHELD, RedactingFormatter, redact_handler
from tests.helpers.cli import finish_promptui
from tests.helpers.polling import poll, wait_for
from tests.helpers.serving import start_serve

KEY = "sk-live-Tool-Logged-7f3a9c2e"
MANIFEST = """\
version: "1.0"
name: logger
instructions: Fetch with the key.
model:
  provider: scripted
  turns:
    - tool_calls: [{name: fetch_with_key}]
    - reply: done
tools:
  - {path: "loggingtool:fetch_with_key", effect: read}
secrets:
  enabled: true
  secrets: {api_key: "${MYTOOL_API_KEY}"}
triggers:
  - {type: interval, seconds: 0.5}
"""
TOOLS = '''\
import logging
import os

from runtime_core import ToolContext

log = logging.getLogger("mytool")
log.warning("imported with key %s", os.environ["MYTOOL_API_KEY"])


def fetch_with_key(ctx: ToolContext) -> str:
    """Fetch something with the key, and say so in the log."""
    key = ctx.secret("api_key")
    log.warning("using key %s", key)
    log.warning("from the environment: " + os.environ["MYTOOL_API_KEY"])
    try:
        raise RuntimeError(f"the server refused {key}")
    except RuntimeError:
        log.exception("fetch failed")
    log.warning("a bad call %d", key)  # arguments that do not fit: logging would dump them
    return "fetched"
'''


def write_agents(folder: Path) -> Path:
    agents = folder / "agents"
    agents.mkdir(parents=True)
    (agents / "logger.agent").write_text(MANIFEST, encoding="utf-8")
    (agents / "loggingtool.py").write_text(TOOLS, encoding="utf-8")
    return agents


def leaks(text: str) -> list[str]:
    """The forms of KEY in ``text``: the raw value, or its start cut short."""
    return [form for form in (KEY, KEY[:12]) if form in text]


def everything_written(folder: Path) -> str:
    return "\n".join(path.read_text(errors="replace") for path in folder.rglob("*")
                     if path.is_file() and path.suffix not in (".py", ".agent", ".db", ".pyc"))


@pytest.mark.slow
def test_promptui_run_shows_the_tool_s_log_lines_without_the_secret(tmp_path: Path) -> None:
    agents = write_agents(tmp_path)
    done, _ = finish_promptui(["run", str(agents), "--seconds", "4", "--json"], tmp_path,
                              env={"MYTOOL_API_KEY": KEY})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["processes"]["logger"]["invocation_count"] >= 1
    for part in ("imported with key [secret:api_key]", "using key [secret:api_key]",
                 "from the environment: [secret:api_key]", "the server refused [secret:api_key]",
                 "a bad call"):
        assert part in done.stderr, f"{part!r} not in {done.stderr}"
    assert not leaks(done.stdout + done.stderr + everything_written(tmp_path)), done.stderr


@pytest.mark.slow
def test_promptui_serve_logs_the_tool_s_lines_without_the_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agents = write_agents(tmp_path)
    monkeypatch.setenv("MYTOOL_API_KEY", KEY)
    served = start_serve(tmp_path, str(agents), "--log-level", "warning")
    try:
        poll(lambda: "the server refused" in served.stderr(), 30, "the tool to log")
        lines: list[str] = []
        with served.client() as client, client.stream("GET", "/events") as stream:
            for line in stream.iter_lines():  # the runs go on: events keep coming
                lines.append(line)
                if len(lines) >= 60:
                    break
        assert len(lines) >= 60 and not leaks("\n".join(lines)), lines
    finally:
        served.stop()
    log = served.stderr()
    assert "using key [secret:api_key]" in log and "Traceback" in log, log
    assert not leaks(log + everything_written(tmp_path)), log


@pytest.mark.slow  # a run on an interval: about a second
async def test_the_room_s_log_file_hides_the_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The handler ``promptui ui`` writes .promptui/promptui.log with, redacted as it does."""
    monkeypatch.setenv("MYTOOL_API_KEY", KEY)
    monkeypatch.syspath_prepend(str(tmp_path / "agents"))
    runtime, _ = load_runtime([write_agents(tmp_path)], journal=tmp_path / "journal.db")
    handler = logging.FileHandler(tmp_path / "promptui.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    redact_handler(handler, lambda: runtime.processes.values())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        logging.getLogger("mytool").warning("before the start: %s", KEY)  # declared already
        await runtime.start_all()
        process = runtime.processes["logger"]
        await wait_for(lambda: process.status()["invocation_count"] >= 1, 20, "a run")
    finally:
        await runtime.shutdown()
        root.removeHandler(handler)
        handler.close()
    text = (tmp_path / "promptui.log").read_text()
    assert "using key [secret:api_key]" in text and "before the start: [redacted]" in text, text
    assert not leaks(text), text


def test_a_line_whose_redaction_fails_is_withheld() -> None:
    def broken(text: str) -> str:
        raise RuntimeError("scope changed")

    formatter = RedactingFormatter(None, broken)
    record = logging.LogRecord("mytool", logging.WARNING, __file__, 1, "key %s", (KEY,), None)
    assert formatter.format(record) == WITHHELD


def test_a_json_log_line_hides_a_secret_json_would_escape() -> None:
    from promptui.cli.serve import JsonFormatter

    key = 'sk-"quoted\\value-9f8e7d6c'

    def redact(text: str) -> str:
        return text.replace(key, "[secret:api_key]")

    formatter = RedactingFormatter(JsonFormatter(), redact)
    try:
        raise RuntimeError(f"refused {key}")
    except RuntimeError:
        import sys

        record = logging.LogRecord("mytool", logging.ERROR, __file__, 1, "using %s", (key,),
                                   sys.exc_info())
    line = json.loads(formatter.format(record))
    assert line["message"] == "using [secret:api_key]", line
    assert "refused [secret:api_key]" in line["exc_info"], line
    assert key not in json.dumps(line) and json.dumps(key)[1:-1] not in formatter.format(record)
    assert record.args == (key,)  # the record itself is left as it was, for others' handlers
