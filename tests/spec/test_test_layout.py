"""The test suite's own layout: shared test code lives in tests/helpers/ and nowhere else. No
module under tests/ (a test module, a conftest, a helper) imports another test module or a
conftest: a ``tests.*`` import names ``tests.helpers`` or a module in it. And no module outside
tests/helpers/ defines its own copy of a shared helper (a free port, a poll with a timeout)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
HELPERS = "tests.helpers"
#: Names that belong to tests/helpers (ports.py, polling.py): defined anywhere else, they are
#: the copies this layout replaced.
SHARED_NAMES = {"free_port", "poll", "wait_for", "until", "eventually"}


def module_name(path: Path, tests: Path) -> str:
    parts = path.relative_to(tests.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(node: ast.Import | ast.ImportFrom, here: str, is_package: bool) -> list[str]:
    """The modules ``node`` loads, made absolute (``from tests import x``: tests.x)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = here.split(".") if is_package else here.split(".")[:-1]
        package = package[:len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    if base == "tests" or node.module is None:  # ``from tests|. import x``: x is a module
        return [f"{base}.{alias.name}" for alias in node.names]
    return [base]


def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in ``body`` and in the blocks inside it (expressions are not visited:
    imports and definitions are statements)."""
    for node in body:
        yield node
        for block in ("body", "orelse", "finalbody"):
            yield from statements(getattr(node, block, []))
        for inner in getattr(node, "handlers", []) + getattr(node, "cases", []):
            yield from statements(inner.body)


def allowed(name: str) -> bool:
    """Whether an import of ``name`` is fine: not in tests, or in tests.helpers."""
    if name != "tests" and not name.startswith("tests."):
        return True
    return name == HELPERS or name.startswith(HELPERS + ".")


def violations(tests: Path) -> list[str]:
    """Every import of a test module or conftest, and every copy of a shared helper, as
    ``file:line: what``."""
    found: list[tuple[Path, int, str]] = []
    helpers = tests / "helpers"
    for path in sorted(tests.rglob("*.py")):
        where = path.relative_to(tests.parent)
        here = module_name(path, tests)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in statements(tree.body):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for name in imported(node, here, path.name == "__init__.py"):
                    if not allowed(name):
                        found.append((where, node.lineno, f"imports {name}: shared test code "
                                      "lives in tests/helpers (fixtures in a conftest.py)"))
            elif (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.name in SHARED_NAMES and helpers not in path.parents):
                found.append((where, node.lineno, f"defines {node.name}: use the one in "
                              "tests/helpers (ports.py, polling.py)"))
    return [f"{where}:{line}: {what}" for where, line, what in sorted(found)]


def test_test_modules_import_shared_code_from_helpers_only() -> None:
    found = violations(TESTS)
    assert not found, "\n".join(found)


def test_the_check_finds_a_planted_import_and_a_planted_copy(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    (tests / "helpers").mkdir(parents=True)
    (tests / "e2e").mkdir()
    for package in (tests, tests / "helpers", tests / "e2e"):
        (package / "__init__.py").write_text("")
    (tests / "helpers" / "polling.py").write_text("def poll():\n    pass\n")
    (tests / "e2e" / "test_a.py").write_text(
        "from tests.helpers.polling import poll\n"
        "from tests.e2e.test_b import start\n"
        "from tests.conftest import wait_for\n"
        "import tests.tui.conftest\n"
        "from tests import helpers\n"
        "from tests.tui import scenes\n"
        "from . import test_b\n"
        "from .. import helpers as h\n"
        "\n\n"
        "async def wait_for():\n"
        "    def free_port():\n"
        "        pass\n")
    assert violations(tests) == [
        f"tests/e2e/test_a.py:{line}: imports {name}: shared test code lives in tests/helpers "
        "(fixtures in a conftest.py)" for line, name in [
            (2, "tests.e2e.test_b"), (3, "tests.conftest"), (4, "tests.tui.conftest"),
            (6, "tests.tui"), (7, "tests.e2e.test_b")]] + [
        f"tests/e2e/test_a.py:{line}: defines {name}: use the one in tests/helpers (ports.py, "
        "polling.py)" for line, name in [(11, "wait_for"), (12, "free_port")]]
