"""The examples of the hand-written docs (README.md, docs/**/*.md) run as written.

Every ``python`` block is run as a script in an empty folder, offline (its models are
``scripted`` or ``echo``), and must end with status 0 within the timeout; a block whose first
line is ``# not run: <reason>`` is skipped with the reason. Every ``yaml`` block that is a whole
manifest (a top-level ``version`` and ``name``) must load and pass the start checks without
importing tools, as ``promptui validate --no-imports`` checks it. The shell blocks are run by
test_doc_shell_examples.py. The convention is in docs/contributing.md."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runtime_core.manifest.loader import ManifestError, check_start, load_manifest
from tests.helpers.doc_blocks import ROOT, Block, all_blocks

PYTHON = all_blocks("python")
RUNNABLE = [b for b in PYTHON if b.not_run is None]
TIMEOUT = 120  # seconds for one example; the slowest takes about two on an idle machine
SHELLS = ("bash", "console")


def _is_manifest(block: Block) -> bool:
    try:
        data = yaml.safe_load(block.text)
    except yaml.YAMLError:
        return False  # a fragment showing alternatives (several model: keys), not a file
    return isinstance(data, dict) and "version" in data and "name" in data


MANIFESTS = [b for b in all_blocks("yaml") if _is_manifest(b)]


def test_every_block_runs_or_says_why_not() -> None:
    """A block is run by the tests, or its first line says why not; a runnable Python block is
    Python; a shell block is ``bash`` or ``console`` (the languages the tests run)."""
    problems = []
    for block in all_blocks("python", *SHELLS, "sh", "shell", "zsh"):
        if block.lang not in ("python", *SHELLS):
            problems.append(f"{block.where}: ```{block.lang}: write ```bash or ```console")
        if block.not_run is None and re.match(r"#\s*not\s+run", block.first_line, re.I):
            problems.append(f"{block.where}: write the marker as '# not run: <reason>'")
        if block.not_run is not None and len(block.not_run) < 10:
            problems.append(f"{block.where}: '# not run:' needs a reason a reader can follow")
        if block.lang == "python" and block.not_run is None:
            try:
                ast.parse(block.text, filename=block.where)
            except SyntaxError as exc:
                problems.append(f"{block.where}: not Python as written: {exc}")
    assert not problems, "\n".join(problems)


def test_the_docs_have_examples_that_run() -> None:
    """The convention is used, not dodged: most examples run."""
    assert len(RUNNABLE) >= 10, [b.where for b in RUNNABLE]
    assert len(MANIFESTS) >= 3, [b.where for b in MANIFESTS]


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.where)
def test_python_example_runs_as_written(block: Block, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(block.text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROMPTUI_")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / ".config"))
    try:
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.where}: still running after {TIMEOUT} s:\n{exc.stdout}\n{exc.stderr}")
    assert done.returncode == 0, (f"{block.where} exited {done.returncode}:\n{done.stdout}\n"
                                  f"{done.stderr}")


@pytest.mark.parametrize("block", MANIFESTS, ids=lambda b: b.where)
def test_manifest_example_is_valid(block: Block, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole manifest in the docs loads and passes the start checks (tools not imported:
    their modules are the reader's). Each ``${VAR}`` without a default is set to a placeholder,
    as the reader would set it."""
    monkeypatch.chdir(tmp_path)
    for name in re.findall(r"\$\{([A-Z_][A-Z0-9_]*)\}", block.text):
        monkeypatch.setenv(name, "placeholder")
    path = tmp_path / "example.agent"
    path.write_text(block.text, encoding="utf-8")
    try:
        manifest = load_manifest(path)
    except ManifestError as exc:
        pytest.fail(f"{block.where}: the manifest does not load:\n{exc}")
    errors = check_start([manifest], imports=False)[0].errors
    assert not errors, f"{block.where}:\n" + "\n".join(map(str, errors))


def test_the_docs_changelog_is_the_changelog() -> None:
    """docs/changelog.md mirrors CHANGELOG.md (the site's page; the file GitHub shows)."""
    root = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8")
    assert page == root, "copy CHANGELOG.md to docs/changelog.md"


def test_the_readme_links_resolve() -> None:
    """Every relative link of the README names a file of the repository (on GitHub the
    README links straight to the docs' Markdown files); an anchor names a heading there."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    problems = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://|mailto:|#", target):
            continue
        file, _, anchor = target.partition("#")
        path = ROOT / file
        if not path.exists():
            problems.append(f"{target}: no {file}")
        elif anchor and anchor not in _anchors(path):
            problems.append(f"{target}: no heading #{anchor} in {file}")
    assert not problems, "\n".join(problems)


def _anchors(page: Path) -> set[str]:
    """The ids MkDocs (and GitHub) give the headings of ``page``."""
    found = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if heading := re.match(r"^#{1,6}\s+(.*)$", line):
            words = re.sub(r"[^\w\s-]", "", heading.group(1).lower()).strip()
            found.add(re.sub(r"[\s]+", "-", words))
    return found
