"""``python -m docs.gen DIR``: write every generated reference page under DIR (e.g. docs/, to
read them as files; they are not kept in the repository)."""

from __future__ import annotations

import sys
from pathlib import Path

from . import render_all


def main(argv: list[str]) -> int:
    """Write the pages; the one argument is the folder (a docs/ tree) to write them under."""
    if len(argv) != 1:
        print("usage: python -m docs.gen DIR", file=sys.stderr)
        return 2
    root = Path(argv[0])
    for path, text in render_all().items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
