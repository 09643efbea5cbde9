"""The one safe YAML pass over a manifest: a problem's place, the limits, and the positions.

PyYAML's own loaders expand every alias, so a few hundred bytes of nested aliases (the
"billion laughs") grow to gigabytes, and an alias inside its own anchor builds a cycle that any
walk of the data follows forever. Here the document is composed once, by a loader that counts
the nodes each alias stands for before accepting it, refuses an alias to an anchor still being
composed, and caps nodes, depth and size; the data is then constructed from those same nodes,
so nothing is ever expanded beyond the caps. Every refusal names the line of the alias (or of
the node where a cap was reached).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from runtime_core.errors import RuntimeBaseError

#: A manifest larger than this is refused before it is parsed.
MAX_BYTES = 1_048_576
#: Nodes in the document once every alias is counted as the nodes it stands for.
MAX_NODES = 100_000
#: Nesting, counted through aliases too.
MAX_DEPTH = 64

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
_KEY = object()  # path step while a mapping's key is composed: not part of the dotted path


@dataclass(frozen=True, slots=True)
class ManifestProblem:
    file: str
    line: int
    column: int
    path: str
    message: str

    def __str__(self) -> str:
        # one line, always: a message or a key with a newline would break file:line:col output
        message = " ".join(self.message.splitlines())
        return f"{self.file}:{self.line}:{self.column}: {self.path or '(top)'}: {message}"


class ManifestError(ValueError, RuntimeBaseError):
    """One or more manifests are invalid; ``problems`` lists each with its place.

    Also known by the reference runtime's name, ``ManifestValidationError`` (with its
    attributes ``errors`` and ``file_path``)."""

    def __init__(self, problems: list[ManifestProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))

    @property
    def errors(self) -> list[dict[str, Any]]:
        """Each problem as a mapping: ``file``, ``line``, ``column``, ``loc``, ``msg``."""
        return [{"file": p.file, "line": p.line, "column": p.column, "loc": p.path,
                 "msg": p.message} for p in self.problems]

    @property
    def file_path(self) -> str | None:
        """The (first) file the problems are in."""
        return self.problems[0].file if self.problems else None


#: The reference runtime's name for a manifest that does not validate.
ManifestValidationError = ManifestError


def dotted(parts: Iterable[Any]) -> str:
    """``("triggers", 1, "seconds")`` -> ``triggers[1].seconds``."""
    out = ""
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + (part if _plain(part) else repr(part))
    return out


def _plain(part: Any) -> bool:
    """A key that reads unambiguously in a dotted path (else it is shown quoted)."""
    return isinstance(part, str) and part.isprintable() and bool(part) and not any(
        c.isspace() or c in ".[]'\"" for c in part)


class _Refused(yaml.MarkedYAMLError):
    """A document the loader will not build (a cap, a recursive alias, a duplicate key)."""

    def __init__(self, message: str, mark: Any, path: list[Any]) -> None:
        super().__init__(problem=message, problem_mark=mark)
        self.path = [step for step in path if step is not _KEY and step is not None]


class _SafeLoader(yaml.SafeLoader):
    """SafeLoader whose composer counts what aliases expand to before accepting them."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.nodes = 0
        self.path: list[Any] = []  # where the composer is, for the errors it raises
        self._open: set[str] = set()  # anchors whose node is still being composed
        self._shapes: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, height) expanded
        self._tallest: list[int] = []  # per open node: its tallest child so far

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if isinstance(parent, SequenceNode):
            self.path.append(index)
        elif isinstance(parent, MappingNode):
            self.path.append(index.value if isinstance(index, ScalarNode) else _KEY)
        else:
            self.path.append(None)
        if self.check_event(yaml.AliasEvent):
            node = self._alias(parent, index)
        else:
            node = self._node(parent, index)
        self.path.pop()  # left in place on an error: it says where the error is
        return node

    def _alias(self, parent: Node | None, index: Any) -> Node | None:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        anchor, mark = event.anchor, event.start_mark
        if anchor in self._open:
            raise _Refused(f"alias *{anchor} is inside its own anchor &{anchor} (a recursive "
                           "alias); an alias may only repeat a finished node", mark, self.path)
        if anchor not in self._shapes:
            raise _Refused(f"alias *{anchor} names no anchor (&{anchor}) written before it",
                           mark, self.path)
        nodes, height = self._shapes[anchor]
        self._count(nodes, mark, f"alias *{anchor} stands for {nodes:,} nodes: ")
        self._nest(height, mark)
        if self._tallest:  # the alias's height counts for its parent, as a node's would
            self._tallest[-1] = max(self._tallest[-1], height)
        self.get_event()  # type: ignore[no-untyped-call]
        return _copy_at(self.anchors[anchor], mark)

    def _node(self, parent: Node | None, index: Any) -> Node | None:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        anchor, mark = getattr(event, "anchor", None), event.start_mark
        if anchor is not None and anchor in self.anchors:
            first = self.anchors[anchor].start_mark.line + 1
            raise _Refused(f"anchor &{anchor} is defined twice (first at line {first}); give "
                           "each anchor its own name", mark, self.path)
        self._nest(1, mark)
        before = self.nodes
        self._count(1, mark, "")
        if anchor is not None:
            self._open.add(anchor)
        self._tallest.append(0)
        node = super().compose_node(parent, index)
        height = self._tallest.pop() + 1
        if anchor is not None:
            self._open.discard(anchor)
            self._shapes[anchor] = (self.nodes - before, height)
        if self._tallest:
            self._tallest[-1] = max(self._tallest[-1], height)
        if isinstance(node, MappingNode):
            self._no_duplicate_keys(node)
        return node

    def _count(self, nodes: int, mark: Any, why: str) -> None:
        self.nodes += nodes
        if self.nodes > MAX_NODES:
            raise _Refused(f"{why}the document grows past {MAX_NODES:,} YAML nodes, the most "
                           "a manifest may hold (an alias bomb?)", mark, self.path)

    def _nest(self, height: int, mark: Any) -> None:
        if len(self._tallest) + height > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels, the most a manifest may "
                           "nest", mark, self.path)

    def _no_duplicate_keys(self, node: MappingNode) -> None:
        # PyYAML keeps the last of two equal keys silently; in a manifest that hides a mistake
        seen: dict[tuple[str, str], ScalarNode] = {}
        for key, _ in node.value:
            if not isinstance(key, ScalarNode) or key.tag == _MERGE_TAG:
                continue
            first = seen.setdefault((key.tag, key.value), key)
            if first is not key:
                raise _Refused(f"duplicate key {key.value!r} (first at line "
                               f"{first.start_mark.line + 1}); a key may appear once",
                               key.start_mark, [*self.path, key.value])

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, OverflowError) as exc:  # e.g. 2024-13-45, a 5000-digit int
            shown = node.value if len(node.value) <= 40 else node.value[:37] + "..."
            raise ConstructorError(None, None, f"cannot read {shown!r}: {_short(exc)}",
                                   node.start_mark) from None


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) <= 120 else text[:117] + "..."


def _copy_at(node: Node, mark: Any) -> Node:
    """The anchor's node as the alias repeats it: at the alias's place (so positions and errors
    point there), sharing the children, with its own item list (a merge key edits it)."""
    if isinstance(node, ScalarNode):
        return ScalarNode(node.tag, node.value, mark, mark, style=node.style)
    if isinstance(node, MappingNode):
        return MappingNode(node.tag, list(node.value), mark, mark, flow_style=node.flow_style)
    assert isinstance(node, SequenceNode)
    return SequenceNode(node.tag, list(node.value), mark, mark, flow_style=node.flow_style)


class Positions:
    """Line and column (1-based) of every node, by its path in the data."""

    def __init__(self, root: Node | None = None, loader: _SafeLoader | None = None) -> None:
        self.marks: dict[tuple[Any, ...], tuple[int, int]] = {}
        pending: list[tuple[Node, tuple[Any, ...]]] = [(root, ())] if root is not None else []
        while pending:  # bounded: the loader capped the nodes, aliases included
            node, path = pending.pop()
            self.marks.setdefault(path, _at(node))
            if isinstance(node, MappingNode):
                pairs = [(_key_of(k, loader), k, v) for k, v in _pairs(node)]
                for key, key_node, _ in pairs:  # a key written here wins over a merged one
                    self.marks.setdefault((*path, key, "<key>"), _at(key_node))
                pending.extend((value, (*path, key)) for key, _, value in reversed(pairs))
            elif isinstance(node, SequenceNode):
                pending.extend((item, (*path, i)) for i, item in enumerate(node.value))

    def find(self, path: tuple[Any, ...], *, key: bool = False) -> tuple[int, int]:
        """The closest known position: the node itself, else its nearest parent."""
        if key and (*path, "<key>") in self.marks:
            return self.marks[(*path, "<key>")]
        probe = tuple(path)
        while probe:
            if probe in self.marks:
                return self.marks[probe]
            probe = probe[:-1]
        return self.marks.get((), (1, 1))

    def path_at(self, line: int, column: int) -> tuple[Any, ...]:
        """The path of the node written at ``line``:``column`` (``()`` if none is)."""
        for path, place in self.marks.items():
            if place == (line, column) and path:
                return path[:-2] if path[-1] == "<key>" else path
        return ()


def _pairs(node: MappingNode, depth: int = 0) -> list[tuple[Node, Node]]:
    """A mapping's own pairs, then those its merge keys (``<<: *base``) bring in."""
    own, merged = [], []
    for key, value in node.value:
        if key.tag != _MERGE_TAG:
            own.append((key, value))
            continue
        sources = value.value if isinstance(value, SequenceNode) else [value]
        for source in sources:
            if isinstance(source, MappingNode) and depth < MAX_DEPTH:
                merged.extend(_pairs(source, depth + 1))
    return own + merged


def _at(node: Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _key_of(node: Node, loader: _SafeLoader | None) -> Any:
    """The key as the data has it (``1: x`` is the int 1), so paths from the data match."""
    if not isinstance(node, ScalarNode) or node.tag == _STR_TAG or loader is None:
        return node.value if isinstance(node, ScalarNode) else None
    try:
        return loader.construct_object(node, deep=True)
    except yaml.YAMLError:  # the construction proper reports it; it must not look recursive
        loader.recursive_objects.pop(node, None)
        return node.value


def _place(text: str, index: int) -> tuple[int, int]:
    """Line and column (1-based) of character ``index`` of ``text``, lines as YAML counts
    them (``\r\n``, ``\r``, ``\n``, NEL, LS and PS each end one)."""
    index = max(0, min(index, len(text)))
    breaks = list(LINE_BREAK.finditer(text, 0, index))
    line_start = breaks[-1].end() if breaks else 0
    return len(breaks) + 1, index - line_start + 1


def too_large(file: str, text: str, size: int) -> ManifestProblem:
    """The refusal of a file over MAX_BYTES, at the line where the limit falls."""
    line, column = _place(text, MAX_BYTES)
    return ManifestProblem(file, line, column, "",
                           f"the file is {size:,} bytes; a manifest may be at most "
                           f"{MAX_BYTES:,} bytes (1 MB)")


def read_yaml(text: str, file: str) -> tuple[Any, Positions]:
    """The data of one YAML document and where each node is; ManifestError, at the place of
    the fault, for text that is not YAML or goes over a limit."""
    size = len(text) if len(text) > MAX_BYTES else len(text.encode("utf-8", "replace"))
    if size > MAX_BYTES:
        raise ManifestError([too_large(file, text, size)])
    loader: _SafeLoader | None = None
    positions: Positions | None = None
    try:
        loader = _SafeLoader(text)  # its reader already checks every character
        root = loader.get_single_node()
        positions = Positions(root, loader)  # before constructing: its errors get a path
        data = loader.construct_document(root) if root is not None else None
        return data, positions
    except _Refused as exc:
        raise ManifestError([_problem(file, text, exc.problem_mark, dotted(exc.path),
                                      exc.problem or "refused")]) from None
    except yaml.MarkedYAMLError as exc:
        where = ""
        if isinstance(exc, ConstructorError) and positions is not None and exc.problem_mark:
            mark = exc.problem_mark
            where = dotted(positions.path_at(mark.line + 1, mark.column + 1))
        raise ManifestError([_problem(file, text, exc.problem_mark, where,
                                      f"not valid YAML: {_reason(exc)}")]) from None
    except yaml.reader.ReaderError as exc:  # a control character, an unpaired surrogate
        line, column = _place(text, exc.position)
        raise ManifestError([ManifestProblem(
            file, line, column, "", f"not valid YAML: character #x{exc.character:04x} may not "
            "appear in YAML text (write it as an escape in a double-quoted string)")]) from None
    except yaml.YAMLError as exc:
        raise ManifestError([ManifestProblem(file, 1, 1, "", f"not valid YAML: {exc}")]) from None
    finally:
        if loader is not None:
            loader.dispose()


def _reason(exc: yaml.MarkedYAMLError) -> str:
    """PyYAML's problem with its context, in an order that reads as a sentence."""
    problem = exc.problem or str(exc)
    if not exc.context:
        return problem
    context = exc.context
    if exc.context_mark is not None:
        mark = exc.context_mark
        context += f" at line {mark.line + 1}, column {mark.column + 1}"
    if problem.startswith("but "):  # "expected a single document ... but found another"
        return f"{context}, {problem}"
    return f"{problem} ({context})"


def _problem(file: str, text: str, mark: Any, path: str, message: str) -> ManifestProblem:
    if mark is None:
        return ManifestProblem(file, 1, 1, path, message)
    last_line = _place(text, len(text))[0]  # a mark past the last break is on that line
    return ManifestProblem(file, min(mark.line + 1, last_line), mark.column + 1, path, message)


def read_text(path: Path) -> str:
    """A manifest's (or a script's) text: at most MAX_BYTES, UTF-8; ManifestError otherwise,
    at the line of the first byte that is not UTF-8."""
    file = str(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
            if len(raw) > MAX_BYTES:
                size = max(len(raw), path.stat().st_size)
                raise ManifestError([too_large(file, raw.decode("utf-8", "replace"), size)])
    except OSError as exc:
        raise ManifestError([ManifestProblem(file, 1, 1, "",
                                             f"cannot read: {exc.strerror or exc}")]) from None
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise ManifestError([ManifestProblem(file, 1, 1, "", "the file is UTF-16 text; save it "
                                             "as UTF-8")])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        column = len(raw[line_start:exc.start].decode("utf-8", "replace")) + 1
        raise ManifestError([ManifestProblem(
            file, line, column, "", f"not UTF-8 text: byte 0x{raw[exc.start]:02x} "
            f"({exc.reason}); save the file as UTF-8")]) from None
