"""Manifests: the bundled demo validates, broken manifests fail with located errors, garbage
never raises anything but ManifestError, and the CLI's validate/init behave."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptui.cli.manifests import TEMPLATES
from runtime_core import AgentRuntime
from runtime_core.manifest.loader import (
    ManifestError,
    load_directory,
    load_manifest,
    parse_manifest,
)
from tests.helpers.cli import promptui_command

DEMO = Path(__file__).resolve().parents[2] / "demo_manifests"


def test_every_bundled_manifest_validates() -> None:
    manifests = load_directory(DEMO)
    names = {m.name for m in manifests}
    assert len(names) >= 6
    assert {"health-checker", "alert-handler", "invoice-watcher", "looper", "flaky-deployer",
            "demo-feeder"} <= names
    types = {t.type for m in manifests for t in m.config.triggers}
    assert {"interval", "webhook", "file_watch", "event"} <= types
    assert all(m.config.journal.level == "checkpoint" for m in manifests)


BROKEN = [
    ("name: [oops\n", 2, 1, "", "not valid YAML"),
    ("- just\n- a list\n", 1, 1, "", "a manifest is a mapping"),
    ("name: ok\nmodle: echo\n", 2, 1, "modle", "unknown key 'modle'; valid keys: version"),
    ("model: echo\n", 1, 1, "", "name is required"),
    ("name: 9lives\n", 1, 7, "name", "name is required"),
    ("name: a\nversion: '2'\n", 2, 10, "version", "unsupported version"),
    ("name: a\nmodel: gpt-5\n", 2, 8, "model", "unknown model 'gpt-5'"),
    ("name: a\ntriggers:\n  - type: cron\n    cron_expression: 'every day'\n", 3, 5,
     "triggers[0]", "invalid cron expression"),
    ("name: a\ntriggers:\n  - type: interval\n    seconds: 5\n  - type: interval\n"
     "    secnds: 5\n", 6, 5, "triggers[1].secnds", "a 'interval' trigger takes: type"),
    ("name: a\ntriggers:\n  - {type: webhook, topic: x}\n", 3, 5, "triggers[0]",
     "topic does not apply to a 'webhook' trigger"),
    ("name: a\ntriggers:\n  - {type: event}\n", 3, 5, "triggers[0]", "needs 'event_type'"),
    ("name: a\ntriggers:\n  - {type: interval, seconds: 1, filter_expression: 'x.y + 1'}\n",
     3, 5, "triggers[0]", "arithmetic ('+') is not allowed"),
    ("name: a\nconfig:\n  concurrency: 0\n", 3, 16, "config.concurrency",
     "greater than or equal to 1"),
    ("name: a\nconfig:\n  trigger_delivery: {max_retry: 2}\n", 3, 22,
     "config.trigger_delivery.max_retry", "valid keys: max_retries"),
    ("name: a\nworld:\n  key: ${PROMPTUI_SURELY_UNSET_VAR}\n", 3, 8, "world.key",
     "PROMPTUI_SURELY_UNSET_VAR is not set"),
    ("name: a\nconfig:\n  model: echo\n", 3, 3, "config.model", "at the top level"),
    ("name: a\njournal: {level: sometimes}\n", 2, 18, "journal.level", "Input should be"),
    ("name: a\nservers:\n  gh: {type: stdio, command: no-such-mcp-server-xyz}\n", 3, 7,
     "servers.gh", "is not an executable file and is not on PATH"),
    ("name: a\nservers:\n  api:\n    type: http\n    url: ftp://example.com\n", 4, 5,
     "servers.api", "must be http:// or https://"),
    ("name: a\nservers:\n  x:\n    command: python\n    argz: [a]\n", 5, 5,
     "servers.x.argz", "a stdio server takes: timeout, call_timeout, tool_prefix, elicitation, "
     "elicitation_timeout, sampling, type, command, args"),
    ("name: a\nservers:\n  x: {type: smtp}\n", 3, 6, "servers.x", "'stdio', 'http'"),
]


@pytest.mark.parametrize(("text", "line", "column", "path", "fragment"), BROKEN)
def test_broken_manifest_errors_are_located(
    text: str, line: int, column: int, path: str, fragment: str
) -> None:
    with pytest.raises(ManifestError) as err:
        parse_manifest(text, Path("broken.agent"))
    problem = err.value.problems[0]
    assert problem.file == "broken.agent"
    assert (problem.line, problem.column) == (line, column), str(problem)
    assert problem.path == path, str(problem)
    assert fragment in problem.message, str(problem)
    assert str(problem).startswith(f"broken.agent:{line}:{column}: ")


def test_env_substitution_with_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTUI_TEST_PORT", "9999")
    manifest = parse_manifest(
        "name: a\ntriggers:\n  - type: webhook\n    webhook_port: ${PROMPTUI_TEST_PORT}\n"
        "    webhook_path: ${PROMPTUI_TEST_PATH:-/hooks}\n", Path("a.agent"))
    trigger = manifest.config.triggers[0]
    assert trigger.webhook_port == 9999 and trigger.webhook_path == "/hooks"


def test_server_entries_keep_credentials_as_references(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTUI_TEST_TOKEN", "tok-123")
    monkeypatch.delenv("PROMPTUI_TEST_UNSET", raising=False)
    (tmp_path / "server.py").write_text("")
    manifest = parse_manifest(
        "name: a\nservers:\n"
        "  local:\n    command: python\n    args: ['${MANIFEST_DIR}/server.py']\n"
        "    env: {TOKEN: '${PROMPTUI_TEST_TOKEN}'}\n"
        "  remote:\n    url: https://mcp.example.com/mcp\n"
        "    bearer_token: ${PROMPTUI_TEST_UNSET}\n"
        "    headers: {X-Key: '${PROMPTUI_TEST_TOKEN}'}\n", tmp_path / "a.agent")
    local, remote = manifest.config.servers["local"], manifest.config.servers["remote"]
    assert local.type == "stdio" and remote.type == "http"  # the shape gave the type
    assert local.args == [f"{tmp_path.resolve()}/server.py"]  # ${MANIFEST_DIR}
    # Credentials stay references, read when the server connects; an unset one is a warning.
    assert local.env == {"TOKEN": "${PROMPTUI_TEST_TOKEN}"}
    assert remote.bearer_token == "${PROMPTUI_TEST_UNSET}"
    assert remote.headers == {"X-Key": "${PROMPTUI_TEST_TOKEN}"}
    assert manifest.warnings == [f"{tmp_path / 'a.agent'}: servers.remote needs environment "
                                 "variable PROMPTUI_TEST_UNSET, which is not set (it is read "
                                 "when the server connects)"]


@pytest.mark.slow
def test_validate_connect_lists_each_servers_tools_and_effects(tmp_path: Path) -> None:
    out = subprocess.run([*promptui_command(), "validate", "--connect",
                          str(DEMO / "changelog.agent")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert ("connected servers.changelog (stdio): lookup_build (read), append_changelog "
            "(write, idempotent), clear_changelog (write)") in out.stdout
    broken = tmp_path / "broken.agent"
    broken.write_text("name: broken\nservers:\n  quiet:\n    command: python\n"
                      "    args: ['-c', 'import sys; sys.stderr.write(\"no config\\\\n\")']\n")
    out = subprocess.run([*promptui_command(), "validate", "--connect", str(broken)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 1
    assert "error servers.quiet: MCP server 'quiet' could not be connected" in out.stdout
    assert "no config" in out.stdout


def test_load_directory_reports_every_file(tmp_path: Path) -> None:
    (tmp_path / "a.agent").write_text("name: a\nmodle: echo\n")
    (tmp_path / "b.agent").write_text("name: b\nconfig: {concurrency: -1}\n")
    (tmp_path / "c.agent").write_text("name: a\n")
    (tmp_path / "d.agent").write_text("name: a\n")
    with pytest.raises(ManifestError) as err:
        load_directory(tmp_path)
    text = str(err.value)
    assert "a.agent:2:1: modle" in text
    assert "b.agent:2:23: config.concurrency" in text
    assert "already used" in text
    with pytest.raises(ManifestError, match=r"no \.agent files"):
        load_directory(_empty(tmp_path))


def _empty(tmp_path: Path) -> Path:
    empty = tmp_path / "empty"
    empty.mkdir()
    return empty


def test_runtime_loads_a_directory_all_or_nothing(tmp_path: Path) -> None:
    runtime = AgentRuntime()
    processes = runtime.load_directory(DEMO)
    assert len(processes) == len(list(DEMO.glob("*.agent")))
    (tmp_path / "good.agent").write_text("name: good\n")
    (tmp_path / "bad.agent").write_text("name: bad\nmodel: nope\n")
    other = AgentRuntime()
    with pytest.raises(ManifestError):
        other.load_directory(tmp_path)
    assert other.list_processes() == []


def test_unreadable_files_are_manifest_errors(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tmp_path / "missing.agent")
    binary = tmp_path / "bin.agent"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ManifestError):
        load_manifest(binary)


@settings(max_examples=200, deadline=None)
@given(st.one_of(
    st.text(max_size=200),
    st.text(alphabet="name:model-[]{}\"'\n &*!|>#%@`${}0123456789trigerscon_", max_size=200),
))
def test_garbage_only_ever_raises_manifest_error(text: str) -> None:
    with contextlib.suppress(ManifestError):
        parse_manifest(text, Path("fuzz.agent"))


@pytest.mark.slow
@pytest.mark.parametrize("template", list(TEMPLATES))
def test_init_templates_validate_and_never_overwrite(tmp_path: Path, template: str) -> None:
    target = tmp_path / f"{template}.agent"
    made = subprocess.run([*promptui_command(), "init", "--template", template, "-o", str(target)],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr + made.stdout
    assert load_manifest(target).name == template.replace("_", "_")
    checked = subprocess.run([*promptui_command(), "validate", str(target)], capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0 and "ok" in checked.stdout
    before = target.read_text()
    again = subprocess.run([*promptui_command(), "init", "-t", template, "-o", str(target)],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "--force" in again.stdout
    assert target.read_text() == before


@pytest.mark.slow
def test_validate_exits_1_and_lists_problems(tmp_path: Path) -> None:
    bad = tmp_path / "bad.agent"
    bad.write_text("name: bad\ntriggers:\n  - {type: cron}\n")
    out = subprocess.run([*promptui_command(), "validate", str(bad), str(DEMO)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert f"{bad}:3:5: triggers[0]" in out.stdout
    assert "ok health-checker" in out.stdout
