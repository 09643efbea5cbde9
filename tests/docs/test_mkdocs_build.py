"""The documentation site builds with ``mkdocs build --strict``: every nav page exists, every
link and anchor resolves, every generated reference page and mkdocstrings directive renders
(any warning fails the build)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
        env={"PATH": str(Path(sys.executable).parent), "NO_MKDOCS_2_WARNING": "1",
             "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-6000:]
    for page in ("reference/cli", "reference/manifest", "reference/keys",
                 "reference/http-api", "reference/python", "reference/python-journal"):
        assert (site / page / "index.html").is_file(), page
    processes = (site / "reference/python/processes/index.html").read_text()
    assert 'id="runtime_core.AgentProcess"' in processes  # mkdocstrings rendered the API
