"""The paths users import from keep working after the house's third edition moved the prefix
families into packages, and every lazy package's stub names something that loads."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: (module, name): where code written against earlier releases imports from.
OLD_PATHS = [
    ("runtime_core.manifest", "load_manifest"),
    ("runtime_core.manifest", "load_directory"),
    ("runtime_core.manifest", "parse_manifest"),
    ("runtime_core.manifest", "manifest_to_process_config"),
    ("runtime_core.manifest", "save_manifest"),
    ("runtime_core.manifest", "manifest_text"),
    ("runtime_core.manifest", "Manifest"),
    ("runtime_core.manifest", "ManifestError"),
    ("runtime_core.manifest", "NAME_PATTERN"),
    ("runtime_core.manifest", "MAX_BYTES"),
    ("runtime_core.manifest", "check_start"),
    ("runtime_core.journal", "SQLiteJournal"),
    ("runtime_core.journal", "PostgresJournal"),
    ("runtime_core.journal", "DamagedJournal"),
    ("runtime_core.journal", "JournalFenced"),
    ("runtime_core.journal", "FileJournal"),
    ("runtime_core.journal.sqlite", "SQLiteJournal"),
    ("runtime_core.journal.postgres", "PostgresJournal"),
    ("runtime_core.triggers.webhook", "WebhookTrigger"),
    ("runtime_core.triggers.filters", "compile_filter"),
    ("runtime_core.triggers.filters", "EventFilter"),
    ("runtime_core", "SQLiteJournal"),
    ("runtime_core", "ManifestError"),
    ("runtime_core", "manifest_to_process_config"),
    ("runtime_core", "register_evaluator"),
    ("runtime_core", "CompletionVerdict"),
]


@pytest.mark.parametrize(("module", "name"), OLD_PATHS)
def test_an_earlier_import_path_still_works(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is not None


def lazy_packages() -> list[str]:
    stubs = sorted((ROOT / "runtime_core").rglob("__init__.pyi"))
    return [".".join(stub.parent.relative_to(ROOT).parts) for stub in stubs]


def test_every_package_of_the_runtime_with_names_is_lazy() -> None:
    packages = lazy_packages()
    assert "runtime_core" in packages and "runtime_core.manifest" in packages
    assert "runtime_core.journal.sqlite" in packages and "runtime_core.agent.mcp" in packages


@pytest.mark.parametrize("package", lazy_packages())
def test_every_name_a_stub_lists_loads(package: str) -> None:
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if getattr(module, name, None) is None]
    assert module.__all__ and missing == []


def test_the_completion_shim_is_gone() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("runtime_core.completion")
