"""The house's size rules (DESIGN.md): small modules with one job, and AgentProcess a facade."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_is_over_500_lines() -> None:
    sources = [*(ROOT / "runtime_core").rglob("*.py"), *(ROOT / "promptui").rglob("*.py")]
    assert sources
    over = {str(p.relative_to(ROOT)): lines(p) for p in sources if lines(p) > 500}
    assert over == {}, f"split these modules: {over}"


def test_agent_process_stays_a_facade() -> None:
    # The facade wires its parts in a visible order and documents each public name; past 450
    # lines it is doing a part's work (460: the parts are imported where they are used, so that
    # importing AgentProcess does not load them; see the Python API page, "Import cost").
    assert lines(ROOT / "runtime_core" / "process" / "process.py") <= 460
