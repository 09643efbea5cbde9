"""A ProcessConfig checks its triggers whatever modules happen to be imported: in a fresh
interpreter that imports only ``runtime_core.config``, a bad cron expression and a bad
``filter_expression`` are refused when the config is validated, with a message that names the
problem. Nothing imports the trigger modules (cron, filters) by hand first."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

pytestmark = pytest.mark.slow

# Runs in the fresh interpreter. It imports runtime_core.config and nothing else of the
# runtime; each case reports what validation said.
CHILD = textwrap.dedent("""
    import json, sys
    from pydantic import ValidationError
    from runtime_core.config import ProcessConfig

    CASES = {
        "bad_cron": {"triggers": [{"type": "cron", "cron_expression": "61 * * * *"}]},
        "cron_fields": {"triggers": [{"type": "cron", "cron_expression": "* * *"}]},
        "bad_zone": {"triggers": [{"type": "cron", "cron_expression": "0 9 * * *",
                                   "timezone": "Mars/Olympus"}]},
        "bad_filter_syntax": {"triggers": [{"type": "interval", "seconds": 5,
                                            "filter_expression": "payload.level =="}]},
        "bad_filter_name": {"triggers": [{"type": "event", "event_type": "alert",
                                          "filter_expression": "__import__('os')"}]},
        "good": {"triggers": [{"type": "cron", "cron_expression": "*/5 * * * *",
                               "filter_expression": "payload.level == 'high'"}]},
    }
    out = {"before": sorted(m for m in sys.modules if m.startswith("runtime_core.triggers"))}
    for name, raw in CASES.items():
        try:
            ProcessConfig.model_validate(raw)
        except ValidationError as exc:
            out[name] = {"ok": False, "errors": [
                {"loc": [str(p) for p in e["loc"]], "msg": e["msg"]} for e in exc.errors()]}
        else:
            out[name] = {"ok": True}
    out["after"] = sorted(m for m in sys.modules if m.startswith("runtime_core.triggers"))
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def only_error(results: dict[str, Any], case: str) -> dict[str, Any]:
    outcome = results[case]
    assert outcome["ok"] is False, f"{case} was accepted"
    assert len(outcome["errors"]) == 1, outcome["errors"]
    error: dict[str, Any] = outcome["errors"][0]
    assert error["loc"][:2] == ["triggers", "0"], error  # it names the trigger
    return error


#: The trigger machinery: none of it is needed to validate a config, before or after.
MACHINERY = ("runtime_core.triggers.registry", "runtime_core.triggers.builtin",
             "runtime_core.triggers.webhook.trigger", "runtime_core.triggers.file_watch")


def test_validation_needs_no_trigger_machinery(results: dict[str, Any]) -> None:
    # The checks live in the TriggerConfig model (triggers/config.py); the modules that build
    # and run triggers are not loaded, before validating or after.
    for when in ("before", "after"):
        loaded = [m for m in MACHINERY if m in results[when]]
        assert loaded == [], f"{when} validation: {loaded}"
    assert "runtime_core.triggers.config" in results["before"]


def test_a_valid_cron_trigger_with_a_filter_passes(results: dict[str, Any]) -> None:
    assert results["good"] == {"ok": True}


def test_bad_cron_expression_is_rejected(results: dict[str, Any]) -> None:
    error = only_error(results, "bad_cron")
    assert "invalid cron expression '61 * * * *'" in error["msg"]


def test_cron_expression_with_too_few_fields_is_rejected(results: dict[str, Any]) -> None:
    error = only_error(results, "cron_fields")
    assert "invalid cron expression '* * *'" in error["msg"]
    assert "5 fields" in error["msg"]


def test_unknown_cron_timezone_is_rejected(results: dict[str, Any]) -> None:
    error = only_error(results, "bad_zone")
    assert "unknown time zone 'Mars/Olympus'" in error["msg"]


def test_filter_expression_syntax_error_is_rejected(results: dict[str, Any]) -> None:
    error = only_error(results, "bad_filter_syntax")
    assert "filter_expression column" in error["msg"]
    assert "invalid syntax" in error["msg"]


def test_filter_expression_outside_the_language_is_rejected(results: dict[str, Any]) -> None:
    error = only_error(results, "bad_filter_name")
    assert "filter_expression column 1" in error["msg"]
    assert "unknown function '__import__'" in error["msg"]
