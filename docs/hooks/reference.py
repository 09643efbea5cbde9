"""MkDocs hook: the reference pages under docs/reference/ are made from the code at build time
(``docs/gen``), handed to MkDocs as files of their own, never written into the source tree: a
page cannot go stale, and ``mkdocs serve`` has nothing to watch in a loop."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def on_files(files: Any, config: Any) -> Any:
    """Add every generated page (replacing a file of the same name, e.g. a stub)."""
    from mkdocs.structure.files import File

    if str(ROOT) not in sys.path:  # docs.gen is beside the packages, not installed
        sys.path.insert(0, str(ROOT))
    from docs.gen import render_all

    for path, text in render_all().items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=text))
    return files
