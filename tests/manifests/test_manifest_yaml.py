"""The one safe YAML pass: alias bombs and recursive anchors are refused at the alias, fast and
small; the caps hold at their edges; aliases and merge keys within them still load, with
positions at the place the author wrote; random mutations of a valid manifest either load or
raise ManifestError with positioned problems, never anything else."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime_core.manifest.loader import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_NODES,
    ManifestError,
    load_manifest,
    parse_manifest,
)
from runtime_core.manifest.source import LINE_BREAK

CORPUS = Path(__file__).resolve().parent / "malformed"


def problems_of(text: str) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(text, Path("m.agent"))
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize("case", ["limit-alias-bomb", "limit-merge-bomb",
                                  "limit-recursive-anchor", "limit-deep-nesting"])
def test_a_hostile_document_is_refused_in_milliseconds_and_a_few_mb(case: str) -> None:
    path = CORPUS / f"{case}.agent"
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ManifestError):
            load_manifest(path)
        took = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert took < 0.5, f"{took:.3f}s"
    assert peak < 8 * 1024 * 1024, f"{peak / 1e6:.1f} MB"


def test_the_bomb_is_refused_at_the_alias_that_crosses_the_cap() -> None:
    levels = "".join(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 9))
    text = f"name: a\nworld:\n  l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n{levels}"
    (problem,) = problems_of(text)
    # 12,355 nodes before l4's items; each *l3 stands for 11,111: the 8th crosses 100,000
    assert problem.startswith("m.agent:7:") and ": world.l4[7]: alias *l3 stands for 11,111 " \
        "nodes: the document grows past 100,000 YAML nodes" in problem


def test_recursive_aliases_are_refused_where_they_are_written() -> None:
    assert problems_of("name: a\nworld: &w\n  me: *w\n") == [
        "m.agent:3:7: world.me: alias *w is inside its own anchor &w (a recursive alias); an "
        "alias may only repeat a finished node"]
    (problem,) = problems_of("name: a\nworld:\n  deep: &d {a: {b: [1, {c: *d}]}}\n")
    assert problem.startswith("m.agent:3:") and "world.deep.a.b[1].c: alias *d" in problem


def test_aliases_and_merge_keys_within_the_caps_load_with_positions_at_the_alias() -> None:
    manifest = parse_manifest(
        "name: a\nworld:\n  base: &base {retries: 2, zone: eu}\n  copy: *base\n"
        "  merged:\n    <<: *base\n    zone: us\n", Path("m.agent"))
    state = manifest.config.context.initial_state
    assert state["copy"] == {"retries": 2, "zone": "eu"}
    assert state["merged"] == {"retries": 2, "zone": "us"}  # the key written wins
    assert manifest.positions.find(("world", "copy")) == (4, 9)  # the alias, not the anchor
    assert manifest.positions.find(("world", "merged", "zone")) == (7, 11)
    (problem,) = problems_of("name: a\nworld: {x: &n 1}\ntriggers:\n  - {type: interval, "
                             "seconds: *n, topic: t}\n")
    assert problem.startswith("m.agent:4:5: triggers[0]: topic does not apply")


@pytest.mark.slow
def test_the_caps_hold_at_their_edges() -> None:
    # nodes: the root mapping, name and a, world and its mapping, l and its list, the items
    items = MAX_NODES - 7
    parse_manifest("name: a\nworld: {" + f"l: [{', '.join(['1'] * items)}]" + "}\n",
                   Path("m.agent"))
    assert "grows past 100,000" in problems_of(
        "name: a\nworld: {" + f"l: [{', '.join(['1'] * (items + 1))}]" + "}\n")[0]
    # depth: the root mapping (1), world's mapping (2), then the lists: 64 deep loads, 65 not
    def nested(levels: int) -> str:
        return "name: a\nworld: {k: " + "[" * levels + "]" * levels + "}\n"
    parse_manifest(nested(MAX_DEPTH - 2), Path("m.agent"))
    assert "nested deeper than 64" in problems_of(nested(MAX_DEPTH - 1))[0]
    # size: by bytes, not characters
    filler = "é" * ((MAX_BYTES - 40) // 2)  # two bytes each
    parse_manifest(f"name: a\ninstructions: {filler}\n", Path("m.agent"))
    assert "at most 1,048,576 bytes" in problems_of(
        f"name: a\ninstructions: {filler}{'é' * 30}\n")[0]


def test_an_aliased_subtree_counts_its_depth_where_it_is_repeated() -> None:
    # a is 40 deep where it is written (42 with the root and world); repeated 30 deeper, 72
    inner, outer = "[" * 40 + "]" * 40, "[" * 30 + "*a" + "]" * 30
    (problem,) = problems_of(f"name: a\nworld:\n  a: &a {inner}\n  b: {outer}\n")
    assert problem.startswith("m.agent:4:36: world.b" + "[0]" * 30 + ": nested deeper than 64")


def test_places_in_files_with_a_bom_or_bad_bytes(tmp_path: Path) -> None:
    bom = tmp_path / "bom.agent"
    bom.write_bytes("\ufeffname: a\nmodle: echo\n".encode())
    with pytest.raises(ManifestError, match=r"bom\.agent:2:1: modle: unknown key"):
        load_manifest(bom)
    latin = tmp_path / "latin.agent"
    latin.write_bytes(b"name: a\ninstructions: d\xc3\xa9j\xe0 vu\n")
    with pytest.raises(ManifestError, match=r"latin\.agent:2:18: \(top\): not UTF-8 text: "
                                            r"byte 0xe0"):
        load_manifest(latin)
    huge = tmp_path / "huge.agent"
    huge.write_bytes(b"# padding\n" * 300_000)
    with pytest.raises(ManifestError, match=r"huge\.agent:104858:\d+: \(top\): the file is "
                                            r"3,000,000 bytes"):
        load_manifest(huge)


VALID = """\
version: "1.0"
name: fuzzed
instructions: Keep the ledger.
model:
  provider: scripted
  turns:
    - tool_calls: [{name: dumps, args: {obj: $payload}}]
    - reply: Done.
tools:
  - {path: "json:dumps", effect: read}
triggers:
  - {type: interval, seconds: 60, filter_expression: 'payload.size > 1'}
  - type: cron
    cron_expression: "*/15 * * * *"
  - {type: webhook, webhook_port: 0, webhook_path: /hook}
world:
  base: &base {retries: 2}
  copy: *base
  seen: 0
journal: {level: checkpoint}
config:
  concurrency: 1
  trigger_delivery: {max_retries: 2}
"""
TOKENS = ["&a ", "*a", "*base", "<<: ", "[", "]", "{", "}", ": ", "- ", "\t", "'", '"', "\n",
          "  ", "!!str ", "!x ", "${", "${X}", "?", "# ", "|", ">", "%", "@", "`", ",", "\x07",
          "\ufeff", "\x85", "\r", "\u2028", "1e999", "-1", "~", "null", "yes", "2024-13-45",
          "0x", "é", "\\"]


@st.composite
def mutations(draw: st.DrawFn) -> str:
    text = VALID
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["insert", "delete", "replace", "duplicate-line",
                                     "swap-lines", "indent"]))
        if kind == "insert":
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 12)):]
        elif kind == "replace":
            text = text[:at] + draw(st.text(max_size=6)) + text[at + 1:]
        else:
            lines = text.split("\n")
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            if kind == "duplicate-line":
                lines.insert(j, lines[i])
            elif kind == "swap-lines":
                lines[i], lines[j] = lines[j], lines[i]
            else:
                lines[i] = " " * draw(st.integers(1, 3)) + lines[i]
            text = "\n".join(lines)
    return text


def test_the_valid_manifest_loads() -> None:
    assert parse_manifest(VALID, Path("fuzz.agent")).name == "fuzzed"


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations())
def test_a_mutated_manifest_loads_or_raises_positioned_problems(text: str) -> None:
    try:
        parse_manifest(text, Path("fuzz.agent"))
    except ManifestError as exc:
        assert exc.problems
        last_line = len(LINE_BREAK.findall(text)) + 1  # \r, NEL, LS, PS end lines too
        for problem in exc.problems:
            assert problem.file == "fuzz.agent"
            assert 1 <= problem.line <= last_line and problem.column >= 1, str(problem)
            shown = str(problem)
            assert shown.startswith(f"fuzz.agent:{problem.line}:{problem.column}: "
                                    f"{problem.path or '(top)'}: ") and "\n" not in shown
