"""Code written for the reference runtime finds its names: the exceptions (RuntimeBaseError over
the runtime's own errors, ProcessStateError, ManifestValidationError, BudgetExceededError), the
trigger registry and the manifest functions, in ``runtime_core``; and TriggerConfig takes (and
reads back) its field spellings."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path

import pytest
from pydantic import ValidationError

import runtime_core
from runtime_core import (
    AgentProcess,
    BudgetExceededError,
    ManifestError,
    ManifestValidationError,
    ProcessConfig,
    ProcessStateError,
    RuntimeBaseError,
    StateError,
    TriggerConfig,
)

NAMES = ("RuntimeBaseError", "ProcessStateError", "ManifestValidationError", "ManifestError",
         "BudgetExceededError", "register_trigger_type", "registered_trigger_types",
         "unregister_trigger_type", "manifest_to_process_config", "save_manifest")


@pytest.mark.parametrize("name", NAMES)
def test_the_names_import_from_runtime_core(name: str) -> None:
    module = importlib.import_module("runtime_core")
    assert getattr(module, name) is not None
    assert name in module.__all__ and name in dir(module)


def test_runtime_base_error_catches_the_runtime_s_own_errors(tmp_path: Path) -> None:
    from runtime_core.control import ControlError
    from runtime_core.governance.budget import BudgetViolation
    from runtime_core.journal.provider import JournalError
    from runtime_core.triggers.registry import TriggerError

    for error in (StateError, ManifestError, JournalError, TriggerError, ControlError,
                  BudgetExceededError):
        assert issubclass(error, RuntimeBaseError), error
    assert issubclass(RuntimeBaseError, RuntimeError)
    assert issubclass(StateError, ValueError) and issubclass(ManifestError, ValueError)
    assert ProcessStateError is StateError and ManifestValidationError is ManifestError

    budget = BudgetExceededError(BudgetViolation("max_tool_calls_per_run", 2, 3, "deploy"))
    assert budget.violation.tool == "deploy"
    assert str(budget).startswith("Budget limit max_tool_calls_per_run reached (limit 2); "
                                  "tool call 'deploy' was not executed")

    bad = tmp_path / "bad.agent"
    bad.write_text("name: x\ntriggers:\n  - {type: cron}\n")
    with pytest.raises(ManifestValidationError) as caught:
        runtime_core.AgentRuntime().load_manifest(bad)
    assert caught.value.file_path == str(bad)
    assert caught.value.errors[0]["line"] == 3 and "cron_expression" in caught.value.errors[0][
        "msg"]


async def test_process_state_error_is_what_a_wrong_call_raises() -> None:
    process = AgentProcess("p", ProcessConfig())
    await process.start()
    try:
        with pytest.raises(ProcessStateError) as caught:
            await process.start()  # already running
        assert caught.value.current_state == "running"
        assert caught.value.attempted_state == "starting"
        with pytest.raises(RuntimeBaseError):
            await process.start()
    finally:
        await process.stop()
    await asyncio.sleep(0)


def test_trigger_config_takes_the_reference_spellings() -> None:
    cron = TriggerConfig(type="cron", cron_expression="0 9 * * 1-5", cron_timezone="Europe/Paris")
    assert cron.timezone == "Europe/Paris" and cron.cron_timezone == "Europe/Paris"
    assert "cron_timezone" not in cron.model_dump()  # one canonical name in dumps
    watch = TriggerConfig.model_validate({
        "type": "file_watch", "watch_path": "./in", "watch_patterns": ["*.csv"],
        "watch_debounce_seconds": 2, "watch_events": ["created", "moved", "modified"]})
    assert (watch.patterns, watch.debounce) == (["*.csv"], 2.0)
    assert (watch.watch_patterns, watch.watch_debounce_seconds) == (["*.csv"], 2.0)
    assert watch.watch_events == ["added", "deleted", "modified"]
    with pytest.raises(ValidationError, match="cron_timezone and timezone are two spellings of "
                                              "one field; give only timezone"):
        TriggerConfig(type="cron", cron_expression="* * * * *", cron_timezone="UTC",
                      timezone="UTC")
    with pytest.raises(ValidationError, match="watch_patterns and patterns"):
        TriggerConfig.model_validate({"type": "file_watch", "watch_path": "x",
                                      "patterns": ["*"], "watch_patterns": ["*"]})
    with pytest.raises(ValidationError, match="timezone does not apply to a 'webhook'"):
        TriggerConfig(type="webhook", cron_timezone="UTC")


def test_a_journal_folder_holds_journal_db(tmp_path: Path) -> None:
    from runtime_core import JournalConfig

    folder = tmp_path / "existing"
    folder.mkdir()
    assert JournalConfig(path=str(folder)).path == str(folder / "journal.db")
    assert JournalConfig(backend="file", path=str(tmp_path / ".promptise/journal")).path == \
        str(tmp_path / ".promptise/journal/journal.db")
    assert JournalConfig(backend="file").backend == "sqlite"
    assert JournalConfig(path=str(tmp_path / "j.db")).path == str(tmp_path / "j.db")
    plain_file = tmp_path / "journal"
    plain_file.write_bytes(b"")  # an existing file without a suffix stays that file
    assert JournalConfig(path=str(plain_file)).path == str(plain_file)
