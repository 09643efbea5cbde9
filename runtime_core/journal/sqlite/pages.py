"""Reading an SQLite file page by page, without SQLite: the rows of every b-tree page that
can still be parsed, whatever happened to the rest of the file.

SQLite's own reads follow each table's b-tree from its root page (named in the schema on page
1), so one lost page (a truncated file, a page of garbage, a damaged schema) stops them, and
the Python ``sqlite3`` module offers no way around it (neither ``sqlite_dbpage`` nor the
recovery extension is compiled into it). This reads the file the way SQLite's ``.recover``
does: every page that is a b-tree page on its own, cell by cell, following overflow chains;
a cell that cannot be read is counted and skipped. The file format is SQLite's documented
one (https://www.sqlite.org/fileformat2.html); pages on the freelist are skipped, as they
hold rows SQLite deleted.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HEADER = b"SQLite format 3\x00"
TABLE_INTERIOR, TABLE_LEAF, INDEX_INTERIOR, INDEX_LEAF = 5, 13, 2, 10
BTREE_KINDS = (TABLE_INTERIOR, TABLE_LEAF, INDEX_INTERIOR, INDEX_LEAF)
_U16, _U32 = struct.Struct(">H"), struct.Struct(">I")
_F64 = struct.Struct(">d")


class Unreadable(ValueError):
    """A cell or page that does not parse."""


@dataclass(frozen=True, slots=True)
class Cell:
    """One row of a table (``rowid`` set) or one entry of an index, or of a WITHOUT ROWID
    table (``rowid`` None), as its record's values."""

    page: int
    rowid: int | None
    values: tuple[Any, ...]


@dataclass(slots=True)
class BTreePage:
    """A page that parses as a b-tree page: its rows (cells), the pages it points to
    (children, for an interior page) and how many of its cells could not be read."""

    number: int
    kind: int
    cells: list[Cell] = field(default_factory=list)
    children: list[int] = field(default_factory=list)
    torn: int = 0  # cells that could not be read

    @property
    def is_index(self) -> bool:
        """An index's page (or a WITHOUT ROWID table's), not a rowid table's."""
        return self.kind in (INDEX_INTERIOR, INDEX_LEAF)


class PageFile:
    """A file's pages: each one parsed when first asked for (``page``), so reading one small
    table costs its own pages, not the file's."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.header_ok = data[:16] == HEADER
        self.page_size = _page_size(data) if self.header_ok else 4096
        reserved = data[20] if self.header_ok and len(data) > 20 else 0
        self.usable = self.page_size - reserved
        self.page_count = (len(data) + self.page_size - 1) // self.page_size
        #: The page count in the header (0: unknown); more than ``page_count``: cut short.
        self.expected = _U32.unpack_from(data, 28)[0] if self.header_ok and len(data) >= 32 \
            else 0
        self.free = _freelist(data, self.page_size, self.page_count) if self.header_ok \
            else set()
        #: An auto-vacuum file (incremental too) has pointer-map pages: no b-tree pages, but
        #: their first byte may look like one's.
        self.ptrmap = self.header_ok and len(data) >= 56 and _U32.unpack_from(data, 52)[0] > 0
        self._parsed: dict[int, BTreePage | None] = {}

    def is_ptrmap(self, number: int) -> bool:
        """Whether page ``number`` is a pointer-map page (2, then one every usable/5 + 1)."""
        return self.ptrmap and number >= 2 and (number - 2) % (self.usable // 5 + 1) == 0

    def page(self, number: int) -> BTreePage | None:
        """Page ``number`` as a b-tree page; None when it is not one (free, overflow,
        garbage, zeros, past the end)."""
        if number in self._parsed:
            return self._parsed[number]
        parsed = None
        if 1 <= number <= self.page_count and number not in self.free \
                and not self.is_ptrmap(number):
            size = self.page_size
            raw = self.data[(number - 1) * size:number * size]
            if len(raw) < size:  # the last page of a cut file: what is left of it
                raw = raw + bytes(size - len(raw))
            parsed = _btree_page(self.data, raw, number, size, self.usable)
        self._parsed[number] = parsed
        return parsed

    @property
    def pages(self) -> dict[int, BTreePage]:
        """Every b-tree page parsed so far, by number."""
        return {n: p for n, p in sorted(self._parsed.items()) if p is not None}

    def tree(self, root: int, visit: Callable[[BTreePage], None] | None = None
             ) -> tuple[list[BTreePage], bool]:
        """The pages of the b-tree rooted at ``root`` that can be reached, and whether that is
        all of them (every child named exists and parsed, every cell read). ``visit`` is
        called with each page as it is reached (it may take its cells away: a big table is
        then never held whole)."""
        found: list[BTreePage] = []
        complete = True
        todo, seen = [root], set()
        while todo:
            number = todo.pop()
            if number in seen:  # a loop: damage
                complete = False
                continue
            seen.add(number)
            page = self.page(number)
            if page is None:
                complete = False
                continue
            complete = complete and page.torn == 0
            found.append(page)
            todo.extend(page.children)
            if visit is not None:
                visit(page)
        return found, complete


def _page_size(data: bytes) -> int:
    size = _U16.unpack_from(data, 16)[0] if len(data) >= 18 else 0
    size = 65536 if size == 1 else size
    return size if size >= 512 and size & (size - 1) == 0 else 4096


def _freelist(data: bytes, page_size: int, count: int) -> set[int]:
    free: set[int] = set()
    trunk = _U32.unpack_from(data, 32)[0] if len(data) >= 36 else 0
    while 1 <= trunk <= count and trunk not in free:
        free.add(trunk)
        at = (trunk - 1) * page_size
        if at + 8 > len(data):
            break
        following, leaves = _U32.unpack_from(data, at)[0], _U32.unpack_from(data, at + 4)[0]
        for i in range(min(leaves, (page_size - 8) // 4)):
            if at + 12 + 4 * i > len(data):
                break
            leaf = _U32.unpack_from(data, at + 8 + 4 * i)[0]
            if 1 <= leaf <= count:
                free.add(leaf)
        trunk = following
    return free


def _btree_page(data: bytes, page: bytes, number: int, page_size: int, usable: int
                ) -> BTreePage | None:
    """The page as a b-tree page, or None when it is not one (an overflow or freelist page,
    garbage, zeros)."""
    start = 100 if number == 1 else 0
    kind = page[start]
    if kind not in BTREE_KINDS:
        return None
    interior = kind in (TABLE_INTERIOR, INDEX_INTERIOR)
    cells = _U16.unpack_from(page, start + 3)[0]
    pointers = start + (12 if interior else 8)
    if pointers + 2 * cells > page_size:
        return None
    out = BTreePage(number, kind)
    if interior:
        out.children.append(_U32.unpack_from(page, start + 8)[0])
    for i in range(cells):
        offset = _U16.unpack_from(page, pointers + 2 * i)[0]
        try:
            if offset < pointers + 2 * cells or offset >= usable:
                raise Unreadable("a cell outside the page")
            _cell(data, page, out, offset, page_size, usable)
        except (Unreadable, IndexError, struct.error, UnicodeDecodeError):
            out.torn += 1
    return out


def _cell(data: bytes, page: bytes, out: BTreePage, at: int, page_size: int,
          usable: int) -> None:
    kind = out.kind
    if kind in (TABLE_INTERIOR, INDEX_INTERIOR):
        out.children.append(_U32.unpack_from(page, at)[0])
        at += 4
    if kind == TABLE_INTERIOR:
        return  # a key only: the rows are in the leaves
    size, at = varint(page, at)
    rowid = None
    if kind == TABLE_LEAF:
        rowid, at = varint(page, at)
        rowid = rowid - (1 << 64) if rowid >= 1 << 63 else rowid
    payload = _payload(data, page, at, size, kind == TABLE_LEAF, page_size, usable)
    out.cells.append(Cell(out.number, rowid, record(payload)))


def _payload(data: bytes, page: bytes, at: int, size: int, table: bool, page_size: int,
             usable: int) -> bytes:
    """The cell's payload: the part on the page, then its overflow pages."""
    most = usable - 35 if table else (usable - 12) * 64 // 255 - 23
    if size <= most:
        if at + size > usable:
            raise Unreadable("a payload past the page's end")
        return page[at:at + size]
    least = (usable - 12) * 32 // 255 - 23
    local = least + (size - least) % (usable - 4)
    local = local if local <= most else least
    parts = [page[at:at + local]]
    following = _U32.unpack_from(page, at + local)[0]
    got, hops = local, 0
    while got < size:
        hops += 1
        if following < 1 or (following - 1) * page_size + usable > len(data) or hops > 1 << 20:
            raise Unreadable("an overflow page is missing")
        base = (following - 1) * page_size
        take = min(size - got, usable - 4)
        parts.append(data[base + 4:base + 4 + take])
        got += take
        following = _U32.unpack_from(data, base)[0]
    return b"".join(parts)


def varint(buf: bytes, at: int) -> tuple[int, int]:
    """SQLite's variable-length integer at ``at``: (value, the offset after it)."""
    value = 0
    for i in range(8):
        byte = buf[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | buf[at + 8], at + 9


_INT_SIZES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}


def record(payload: bytes) -> tuple[Any, ...]:
    """The values of an SQLite record (the database's text encoding is UTF-8)."""
    header_size, at = varint(payload, 0)
    if header_size > len(payload) or header_size < 1:
        raise Unreadable("a record header past its payload")
    types = []
    while at < header_size:
        serial, at = varint(payload, at)
        types.append(serial)
    body = header_size
    values: list[Any] = []
    for serial in types:
        if serial in (0, 8, 9):
            values.append(None if serial == 0 else serial - 8)
            continue
        if serial in _INT_SIZES:
            n = _INT_SIZES[serial]
            chunk = payload[body:body + n]
            if len(chunk) < n:
                raise Unreadable("a record past its payload")
            values.append(int.from_bytes(chunk, "big", signed=True))
        elif serial == 7:
            n = 8
            if body + n > len(payload):
                raise Unreadable("a record past its payload")
            values.append(_F64.unpack_from(payload, body)[0])
        elif serial >= 12:
            n = (serial - 12) // 2
            chunk = payload[body:body + n]
            if len(chunk) < n:
                raise Unreadable("a record past its payload")
            values.append(chunk.decode("utf-8") if serial % 2 else bytes(chunk))
        else:
            raise Unreadable(f"serial type {serial} is reserved")
        body += n
    return tuple(values)


def schema_roots(pages: PageFile) -> dict[str, int] | None:
    """The schema's root pages (name -> page), when page 1 still holds the schema table (and
    the pages it points to); None when it does not."""
    first = pages.page(1)
    if first is None or first.is_index:
        return None
    found, complete = pages.tree(1)
    roots: dict[str, int] = {}
    for page in found:
        for cell in page.cells:
            values = cell.values
            if len(values) == 5 and values[0] in ("table", "index") and isinstance(
                    values[1], str) and isinstance(values[3], int):
                roots[values[1]] = values[3]
    return roots if complete and roots else None
