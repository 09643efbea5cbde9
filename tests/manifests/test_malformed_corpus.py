"""The malformed corpus (tests/manifests/malformed/, one file per case): ``promptui validate``
refuses each with status 1, no traceback, and every error line in the form
``<file>:<line>:<col>: <dotted.path or (top)>: <message>``, at a line inside the file; the
first error names the field and says what is wrong."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptui.cli.main import app
from tests.helpers.cli import promptui_command

CORPUS = Path(__file__).resolve().parent / "malformed"
FILES = sorted(CORPUS.glob("*.agent"))
LINE = re.compile(r"^error (?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<path>\S+): (?P<msg>.+)$")

# case -> (the first error's dotted path, a part of its message)
EXPECTED: dict[str, tuple[str, str]] = {
    "budget-list": ("budget", "valid dictionary"),
    "budget-negative": ("budget.max_tool_calls_per_run", "greater than or equal to 1"),
    "config-delivery-typo": ("config.trigger_delivery.max_retry", "valid keys: max_retries"),
    "config-huge-number": ("config.concurrency", "less than or equal to 100"),
    "config-negative": ("config.queue_size", "greater than or equal to 1"),
    "config-scalar": ("config", "config is a mapping"),
    "config-top-level-field": ("config.model", "at the top level, not under config"),
    "config-unknown-field": ("config.concurency", "unknown key 'concurency'"),
    "context-unknown-key": ("config.context.bogus", "unknown key 'bogus'"),
    "env-bad-default-syntax": ("world.port", "'${PORT:8080}' is not an environment reference"),
    "env-bad-name": ("world.port", "'${1PORT}' is not an environment reference"),
    "env-unclosed": ("world.port", "'${PORT' is not an environment reference"),
    "env-unset": ("world.key", "PROMPTUI_CORPUS_SURELY_UNSET is not set"),
    "health-unknown-key": ("health", "stuck_treshold"),
    "health-wrong-type": ("health.enabled", "valid boolean"),
    "inbox-wrong-type": ("inbox.enabled", "valid boolean"),
    "incidents-scalar": ("incidents", "valid dictionary"),
    "instructions-mapping": ("instructions", "valid string"),
    "journal-bad-level": ("journal.level", "'none', 'checkpoint' or 'full'"),
    "journal-scalar": ("journal", "valid dictionary"),
    "journal-unknown-key": ("journal.pth", "unknown key 'pth'"),
    "limit-alias-bomb": ("world.f[0]", "grows past 100,000 YAML nodes"),
    "limit-deep-flow": ("world" + "[0]" * 63, "nested deeper than 64 levels"),
    "limit-deep-nesting": ("world." + ".".join(f"k{i}" for i in range(62)),
                           "nested deeper than 64 levels"),
    "limit-merge-bomb": ("world.m10.<<[1]", "grows past 100,000 YAML nodes"),
    "limit-recursive-anchor": ("world.me", "alias *w is inside its own anchor &w"),
    "limit-recursive-sequence": ("world.l[1]", "alias *l is inside its own anchor &l"),
    "limit-too-large": ("(top)", "a manifest may be at most 1,048,576 bytes"),
    "memory-bad-provider": ("memory.provider", "'none', 'in_memory' or 'sqlite'"),
    "mission-scalar": ("mission", "valid dictionary"),
    "model-inline-unknown-key": ("model.temprature", "valid keys: provider, turns"),
    "model-list": ("model", "a model is 'echo', 'scripted:<file>'"),
    "model-number": ("model", "a model is 'echo', 'scripted:<file>'"),
    "model-remote-no-name": ("model.name", "Field required"),
    "model-turn-two-actions": ("model.turns[0]", "a turn has one of reply, tool_calls or raise"),
    "model-unknown": ("model", "unknown model 'gpt-5'"),
    "open-mode-wrong-type": ("open_mode.max_dynamic_triggers", "valid integer"),
    "profile-unknown-key": ("profile.verison", "unknown key 'verison'"),
    "secrets-list": ("secrets", "valid dictionary"),
    "servers-bad-type": ("servers.x", "'stdio', 'http'"),
    "servers-bad-url": ("servers.api", "must be http:// or https://"),
    "servers-list": ("servers", "valid dictionary"),
    "tools-bad-effect": ("tools[0].effect", "'read' or 'write'"),
    "tools-mapping": ("tools", "valid list"),
    "tools-no-colon": ("tools[0].path", "must look like 'package.module:function'"),
    "tools-number": ("tools[0]", "a tool is 'module:function'"),
    "tools-unknown-key": ("tools[0].efect", "a tool takes: path"),
    "top-bad-name": ("name", "name is required"),
    "top-bad-version": ("version", "unsupported version '2.0'"),
    "top-drain-timeout-huge": ("drain_timeout", "less than or equal to 3600"),
    "top-execution-mode": ("execution_mode", "'strict' or 'open'"),
    "top-list": ("(top)", "a manifest is a mapping"),
    "top-missing-name": ("(top)", "name is required"),
    "top-name-is-list": ("name", "name is required"),
    "top-scalar": ("(top)", "a manifest is a mapping"),
    "top-unknown-key": ("trigers", "unknown key 'trigers'"),
    "triggers-bad-filter": ("triggers[0]", "filter_expression column 13"),
    "triggers-cron-bad-timezone": ("triggers[0]", "unknown time zone 'Mars/Olympus'"),
    "triggers-cron-bad": ("triggers[0]", "invalid cron expression '61 * * * *'"),
    "triggers-cron-missing": ("triggers[0]", "needs 'cron_expression'"),
    "triggers-event-no-type": ("triggers[0]", "needs 'event_type'"),
    "triggers-file-watch-bad-event": ("triggers[0]", "unknown watch_events ['renamed']"),
    "triggers-file-watch-no-path": ("triggers[0]", "needs 'watch_path'"),
    "triggers-file-watch-patterns-string": ("triggers[0].patterns", "valid list"),
    "triggers-filter-private-name": ("triggers[0]", "'_pyload' is not allowed"),
    "triggers-interval-field-typo": ("triggers[0].secnds", "a 'interval' trigger takes"),
    "triggers-interval-negative": ("triggers[0].seconds", "greater than 0"),
    "triggers-interval-word": ("triggers[0].seconds", "valid number"),
    "triggers-item-string": ("triggers[0]", "valid dictionary"),
    "triggers-mapping": ("triggers", "valid list"),
    "triggers-message-foreign-field": ("triggers[0]", "event_type does not apply"),
    "triggers-missing-type": ("triggers[0].type", "Field required"),
    "triggers-unknown-type": ("triggers[0]", "unknown trigger type 'sometimes'"),
    "triggers-webhook-bad-scheme": ("triggers[0].signature_scheme", "unknown signature_scheme"),
    "triggers-webhook-bad-source": ("triggers[0].allowed_sources", "'not-an-address'"),
    "triggers-webhook-foreign-field": ("triggers[0]", "topic does not apply"),
    "triggers-webhook-port-huge": ("triggers[0].webhook_port", "less than or equal to 65535"),
    "triggers-webhook-port-word": ("triggers[0].webhook_port", "valid integer"),
    "world-list": ("world", "valid dictionary"),
    "world-scalar": ("world", "valid dictionary"),
    "yaml-bad-date": ("world.since", "cannot read '2024-13-45'"),
    "yaml-bad-key": ("world", "cannot read '2024-13-45'"),
    "yaml-bad-indentation": ("(top)", "mapping values are not allowed here"),
    "yaml-block-scalar-bad-indent": ("(top)", "expected <block end>"),
    "yaml-bom-then-unknown-key": ("modle", "unknown key 'modle'"),
    "yaml-complex-key": ("(top)", "found unhashable key"),
    "yaml-control-character": ("(top)", "character #x0007 may not appear"),
    "yaml-duplicate-anchor": ("world.b", "anchor &x is defined twice (first at line 4)"),
    "yaml-duplicate-flow-key": ("world.a", "duplicate key 'a'"),
    "yaml-duplicate-nested-key": ("triggers[0].type", "duplicate key 'type' (first at line 4)"),
    "yaml-duplicate-top-key": ("name", "duplicate key 'name' (first at line 2)"),
    "yaml-empty": ("(top)", "a manifest is a mapping"),
    "yaml-int-key": ("1", "unknown key 1"),
    "yaml-int-too-long": ("config.concurrency", "Exceeds the limit (4300 digits)"),
    "yaml-local-tag": ("world", "could not determine a constructor for the tag '!custom'"),
    "yaml-non-utf8": ("(top)", "not UTF-8 text: byte 0xe9"),
    "yaml-nul-byte": ("(top)", "character #x0000 may not appear"),
    "yaml-only-comments": ("(top)", "a manifest is a mapping"),
    "yaml-python-tag": ("instructions", "could not determine a constructor"),
    "yaml-tab-indentation": ("(top)", "found character '\\t'"),
    "yaml-two-documents": ("(top)", "but found another document"),
    "yaml-unclosed-brace": ("(top)", "while parsing a flow mapping at line 3"),
    "yaml-unclosed-bracket": ("(top)", "while parsing a flow sequence at line 3"),
    "yaml-unclosed-double-quote": ("(top)", "while scanning a quoted scalar at line 3"),
    "yaml-unclosed-single-quote": ("(top)", "while scanning a quoted scalar at line 3"),
    "yaml-undefined-alias": ("instructions", "alias *nowhere names no anchor"),
    "yaml-utf16": ("(top)", "UTF-16"),
}


def test_the_corpus_is_whole() -> None:
    assert len(FILES) >= 49
    assert {f.stem for f in FILES} == set(EXPECTED)


def error_lines(output: str, file: Path) -> list[re.Match[str]]:
    """Every error line, each checked against the form and the file's extent."""
    lines = file.read_bytes().count(b"\n") + 1  # the empty line after a last newline counts
    found = []
    for text in output.splitlines():
        if not text.startswith("error"):
            continue
        match = LINE.match(text)
        assert match, f"not file:line:col: path: message: {text!r}"
        assert match["file"] == str(file), text
        assert 1 <= int(match["line"]) <= lines and int(match["col"]) >= 1, text
        found.append(match)
    assert found, output
    return found


@pytest.mark.parametrize("file", FILES, ids=[f.stem for f in FILES])
def test_validate_refuses_each_malformed_manifest_at_its_place(
        file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMPTUI_CORPUS_SURELY_UNSET", raising=False)
    result = CliRunner().invoke(app, ["validate", str(file)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exception
    assert "Traceback" not in result.output
    first = error_lines(result.output, file)[0]
    path, fragment = EXPECTED[file.stem]
    assert first["path"] == path, first.group(0)
    assert fragment in first["msg"], first.group(0)


@pytest.mark.slow
def test_the_real_command_refuses_the_whole_corpus_in_one_run(tmp_path: Path) -> None:
    """One ``promptui validate`` over the folder: every file reported, nothing else said."""
    env = {k: v for k, v in os.environ.items() if k != "PROMPTUI_CORPUS_SURELY_UNSET"}
    done = subprocess.run([*promptui_command(), "validate", str(CORPUS)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr and not done.stderr.strip()
    reported = {Path(m["file"]).stem for file in FILES
                for m in error_lines("\n".join(line for line in done.stdout.splitlines()
                                               if f"{file}:" in line), file)}
    assert reported == {f.stem for f in FILES}
    assert not [line for line in done.stdout.splitlines()
                if line and not line.startswith("error ") and "problem(s)" not in line]
