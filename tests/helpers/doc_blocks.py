"""The code blocks of the hand-written docs (README.md and docs/**/*.md, not the generated
docs/reference/), as the docs' tests run them. The convention (docs/contributing.md, "Examples
that run"):

- a block whose first line is ``# not run: <reason>`` is not run; the tests skip it with the
  reason;
- a ``bash`` block whose first line starts with ``# with: promptui serve`` runs while the demo
  is served (``promptui serve --port 0``) in the page's folder;
- ``python`` blocks run as scripts, ``bash`` blocks as scripts, ``console`` blocks as
  transcripts (``$ `` lines are commands, the others what they print); ``yaml`` blocks with a
  top-level ``version`` and ``name`` are whole manifests, checked as ``promptui validate
  --no-imports`` checks them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_RUN = re.compile(r"^#\s*not run:\s*(.*)$")
WITH_SERVE = "# with: promptui serve"
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<lang>[\w+-]*)(?P<info>.*)$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str  # relative to the repository, e.g. docs/runtime.md
    line: int  # the opening fence's line, 1-based
    lang: str
    text: str

    @property
    def first_line(self) -> str:
        return self.text.split("\n", 1)[0].strip()

    @property
    def not_run(self) -> str | None:
        """The reason this block is not run, or None when it runs."""
        found = NOT_RUN.match(self.first_line)
        return found.group(1).strip() if found else None

    @property
    def with_serve(self) -> bool:
        return self.first_line.startswith(WITH_SERVE)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every hand-written page under docs/ (the reference pages are generated
    from the code at build time and have no file here to read)."""
    docs = ROOT / "docs"
    found = [ROOT / "README.md"]
    found += sorted(p for p in docs.rglob("*.md")
                    if "reference" not in p.relative_to(docs).parts[:1])
    return found


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` in order (an indented fence, in a list or an admonition,
    loses its indent)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    index = 0
    while index < len(lines):
        opened = _FENCE.match(lines[index])
        if opened is None:
            index += 1
            continue
        indent, ticks = opened.group("indent"), opened.group("ticks")
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not re.match(rf"^{re.escape(indent)}{ticks}\s*$",
                                                lines[end]):
            line = lines[end]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            end += 1
        out.append(Block(str(page.relative_to(ROOT)), index + 1, opened.group("lang").lower(),
                         "\n".join(body) + "\n"))
        index = end + 1
    return out


def all_blocks(*langs: str) -> list[Block]:
    """Every block in those languages, on every page."""
    return [b for page in pages() for b in blocks(page) if b.lang in langs]


def console_steps(block: Block) -> list[tuple[str, list[str]]]:
    """A ``console`` transcript as (command, the output lines shown after it); a command
    ending in ``\\`` goes on on the next line."""
    steps: list[tuple[str, list[str]]] = []
    lines = block.text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("$ "):
            command = [line[2:]]
            while command[-1].endswith("\\") and index + 1 < len(lines):
                index += 1
                command.append(lines[index])
            steps.append(("\n".join(command), []))
        elif steps:
            steps[-1][1].append(line)
        index += 1
    return steps
