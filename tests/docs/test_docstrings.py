"""Every public name of ``runtime_core`` and ``runtime_core.journal`` has a docstring of its
own: the Python API pages of the docs site are generated from them (mkdocstrings), and a name
without one shows up there as a bare signature."""

from __future__ import annotations

import dataclasses
import importlib

import pytest


def _own_docstring(obj: object) -> str:
    # A class's own, not one inherited (a pydantic model would show BaseModel's), and not the
    # signature @dataclass writes in its place ("TriggerEvent(trigger_id: 'str', ...)").
    doc = vars(obj).get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    doc = (doc or "").strip()
    if dataclasses.is_dataclass(obj) and doc.startswith(f"{getattr(obj, '__name__', '')}("):
        return ""
    return doc


@pytest.mark.parametrize("package", ["runtime_core", "runtime_core.journal"])
def test_every_public_name_has_a_docstring(package: str) -> None:
    module = importlib.import_module(package)
    names = list(module.__all__)
    assert len(names) >= 20
    missing = [name for name in names if not _own_docstring(getattr(module, name))]
    assert not missing, f"{package}: no docstring on {', '.join(missing)}"


@pytest.mark.parametrize("package", ["runtime_core", "runtime_core.journal"])
def test_a_docstring_says_more_than_the_name(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        doc = _own_docstring(getattr(module, name))
        if doc:
            assert len(doc.split()) >= 4, f"{package}.{name}: {doc!r} says too little"
