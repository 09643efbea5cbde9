"""The names the spec's examples import exist in ``runtime_core`` (and ``runtime_core.journal``),
are listed in ``__all__``, cost nothing until used, and the older import paths still work."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

ROOT_NAMES = (
    "AgentProcess", "ProcessConfig", "TriggerConfig", "TriggerEvent", "JournalConfig",
    "HookEvent", "BudgetConfig", "HealthConfig", "MissionConfig", "SecretScopeConfig",
    "ToolCostAnnotation", "EscalationTarget", "HealthMonitor", "Anomaly", "AnomalyType",
    "ProcessState", "StateError", "AgentContext", "ConversationBuffer", "JournalEntry",
    "ReplayEngine", "RewindEngine", "RewindMode", "RewindPlan",
)
JOURNAL_NAMES = (
    "JournalEntry", "JournalProvider", "ReplayEngine", "RewindEngine", "SQLiteJournal",
    "InMemoryJournal",
)
HEAVY_MODULES = ("runtime_core.process.process", "httpx", "uvicorn", "starlette")


@pytest.mark.parametrize(("module_name", "names"), [
    ("runtime_core", ROOT_NAMES),
    ("runtime_core.journal", JOURNAL_NAMES),
])
def test_every_spec_name_imports_and_is_in_all(module_name: str, names: tuple[str, ...]) -> None:
    module = importlib.import_module(module_name)
    for name in names:
        value = getattr(module, name)  # what ``from module import name`` does
        assert value is not None, name
        assert name in module.__all__, f"{module_name}.__all__ lacks {name}"
        assert name in dir(module), f"dir({module_name}) lacks {name}"


def test_journal_names_are_the_same_objects_at_both_paths() -> None:
    import runtime_core
    import runtime_core.journal

    for name in set(ROOT_NAMES) & set(JOURNAL_NAMES):
        assert getattr(runtime_core, name) is getattr(runtime_core.journal, name), name


def test_from_import_statements_of_the_spec_work() -> None:
    from runtime_core import (  # noqa: F401
        AgentContext,
        AgentProcess,
        Anomaly,
        AnomalyType,
        BudgetConfig,
        ConversationBuffer,
        EscalationTarget,
        HealthConfig,
        HealthMonitor,
        HookEvent,
        JournalConfig,
        JournalEntry,
        MissionConfig,
        ProcessConfig,
        ProcessState,
        ReplayEngine,
        RewindEngine,
        RewindMode,
        RewindPlan,
        SecretScopeConfig,
        StateError,
        ToolCostAnnotation,
        TriggerConfig,
        TriggerEvent,
    )
    from runtime_core.journal import (  # noqa: F401
        InMemoryJournal,
        JournalProvider,
        SQLiteJournal,
    )

    assert issubclass(StateError, Exception)
    assert ProcessState("running") is ProcessState.RUNNING


def test_old_import_paths_keep_working() -> None:
    import runtime_core
    from runtime_core.config import ProcessConfig
    from runtime_core.control import ControlPlane, LocalControl, RemoteControl
    from runtime_core.process import AgentProcess

    assert AgentProcess is runtime_core.AgentProcess
    assert ProcessConfig is runtime_core.ProcessConfig
    assert all(isinstance(cls, type) for cls in (LocalControl, ControlPlane, RemoteControl))


@pytest.mark.slow
def test_import_runtime_core_loads_nothing_heavy() -> None:
    """In a fresh interpreter: ``import runtime_core`` alone must not load the process, the
    HTTP client or the web server."""
    code = (
        "import json, sys\n"
        "import runtime_core\n"
        f"heavy = {list(HEAVY_MODULES)!r}\n"
        "print(json.dumps({'loaded': [m for m in heavy if m in sys.modules],\n"
        "                  'runtime_core': sorted(m for m in sys.modules\n"
        "                                         if m.startswith('runtime_core'))}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["loaded"] == [], f"import runtime_core loaded {report['loaded']}"
    assert report["runtime_core"] == ["runtime_core"], report["runtime_core"]
