"""Read a reference runtime's ``FileJournal`` directory (promptise): one ``<process>.jsonl`` per
process (one ``JournalEntry.to_dict()`` object a line: ``entry_id, process_id, timestamp,
entry_type, data``) and ``<process>.checkpoint.json``, the latest checkpoint, overwritten.

Reading never raises on what a file holds: a line that is not valid JSON, a torn last line, a
line where a torn write and the next entry were glued together, bytes that are not UTF-8 are
each reported with file and line and skipped. A complete entry found on a glued line is kept
on its own; the torn part is never joined to another line."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

JSONL = ".jsonl"
CHECKPOINT_FILE = ".checkpoint.json"
#: Candidate starts tried on one damaged line before the rest of it is given up as torn.
MAX_SPLIT_TRIES = 200
EXPECTED = (f"a reference FileJournal directory: one <process>{JSONL} file per process (JSON "
            f"lines, as promptise's FileJournal(base_path=...) writes) and optional "
            f"<process>{CHECKPOINT_FILE} files")


class NotAReferenceJournal(ValueError):
    """The path is not a reference journal directory (the message says what was expected)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """Something skipped or doubtful, where it is. ``kind``: torn, corrupt, glued, invalid,
    unknown_type, not_carried, orphan, note."""

    file: str
    line: int  # 0: the file as a whole
    kind: str
    message: str

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def __str__(self) -> str:
        return f"{self.where()}: {self.message}"


@dataclass(frozen=True, slots=True)
class RawEntry:
    """One reference entry as read, with the place it came from."""

    file: str
    line: int
    data: dict[str, Any]

    @property
    def entry_type(self) -> str:
        return str(self.data.get("entry_type", ""))

    @property
    def body(self) -> dict[str, Any]:
        body = self.data.get("data")
        return body if isinstance(body, dict) else {}


@dataclass(slots=True)
class ReferenceProcess:
    name: str
    files: list[str] = field(default_factory=list)
    entries: list[RawEntry] = field(default_factory=list)
    checkpoint_file: dict[str, Any] | None = None  # the <name>.checkpoint.json state
    checkpoint_file_name: str = ""
    lines: int = 0


@dataclass(slots=True)
class ReferenceJournal:
    directory: Path
    processes: dict[str, ReferenceProcess] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)  # file name -> sha256


def is_entry(value: Any) -> bool:
    """A reference entry: an object with a string entry_type, a data object and an id or a
    time (a fragment of a payload torn out of a longer line does not pass)."""
    return (isinstance(value, dict) and isinstance(value.get("entry_type"), str)
            and bool(value["entry_type"]) and isinstance(value.get("data", {}), dict)
            and ("entry_id" in value or "timestamp" in value))


def split_line(text: str, constants: list[str] | None = None
               ) -> tuple[list[dict[str, Any]], list[str]]:
    """The complete entries on one line and the torn pieces between them. A clean line is one
    entry and no pieces. NaN and Infinity (Python's json writes them; our journal stores JSON
    only) read as null, each one's name added to ``constants``."""
    seen = constants if constants is not None else []

    def constant(name: str) -> None:
        seen.append(name)
        return None

    decoder = json.JSONDecoder(parse_constant=constant)
    try:
        whole = decoder.decode(text)
    except (ValueError, RecursionError):
        pass
    else:
        return ([whole], []) if is_entry(whole) else ([], [text])
    seen.clear()
    found: list[dict[str, Any]] = []
    junk: list[str] = []
    pos, tries = 0, 0
    end = len(text)
    while pos < end:
        while pos < end and text[pos] in " \t\r":
            pos += 1
        if pos >= end:
            break
        start = pos
        next_pos: int | None = None
        candidate = pos
        while candidate != -1 and tries < MAX_SPLIT_TRIES:
            tries += 1
            try:
                value, stop = decoder.raw_decode(text, candidate)
            except (ValueError, RecursionError):
                value, stop = None, -1
            if stop != -1 and is_entry(value):
                if candidate > start:
                    junk.append(text[start:candidate])
                found.append(value)
                next_pos = stop
                break
            candidate = text.find("{", candidate + 1)
        if next_pos is None:
            junk.append(text[start:])
            break
        pos = next_pos
    return found, junk


def _short(text: str, limit: int = 60) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _line_problem(name: str, number: int, text: str, last: bool, torn_tail: bool) -> Problem:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        reason = f"{exc.msg} (column {exc.colno})"
    except ValueError as exc:
        reason = str(exc)
    except RecursionError:
        reason = "nested too deeply"
    else:
        reason = "not a journal entry (no entry_type and data)"
    if last and torn_tail:
        return Problem(name, number, "torn", f"torn last line skipped (no newline at the end, "
                       f"{len(text.encode('utf-8', 'replace'))} bytes): {reason}")
    return Problem(name, number, "corrupt", f"corrupt line skipped: {reason}: "
                   f"{_short(text)!r}")


def read_jsonl(path: Path, journal: ReferenceJournal) -> tuple[list[RawEntry], int]:
    """Every entry of one JSONL file, in order, and its number of lines; each damaged line
    reported."""
    import hashlib

    name = path.name
    try:
        raw = path.read_bytes()
    except OSError as exc:
        journal.problems.append(Problem(name, 0, "corrupt", f"cannot read: {exc.strerror}"))
        return [], 0
    journal.digests[name] = hashlib.sha256(raw).hexdigest()
    torn_tail = bool(raw) and not raw.endswith(b"\n")
    lines = raw.split(b"\n")
    if not torn_tail and lines and lines[-1] == b"":
        lines.pop()
    out: list[RawEntry] = []
    for index, chunk in enumerate(lines):
        number = index + 1
        last = index == len(lines) - 1
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            journal.problems.append(Problem(name, number, "torn" if last and torn_tail
                                            else "corrupt", f"line skipped: not UTF-8 text "
                                            f"(byte {exc.start})"))
            continue
        if not text.strip(" \t\r"):
            continue
        if not text.strip("\x00 \t\r"):
            journal.problems.append(Problem(name, number, "torn" if last and torn_tail
                                            else "corrupt", "line skipped: only NUL bytes "
                                            "(a write the crash left unfinished)"))
            continue
        constants: list[str] = []
        entries, junk = split_line(text, constants)
        if entries and constants:
            names = ", ".join(sorted(set(constants)))
            journal.problems.append(Problem(name, number, "note", f"{names} read as null (not "
                                            "JSON; the journal stores JSON only)"))
        if not entries:
            journal.problems.append(_line_problem(name, number, text, last, torn_tail))
            continue
        if junk:
            pieces = "; ".join(repr(_short(j, 40)) for j in junk)
            journal.problems.append(Problem(
                name, number, "glued", f"{len(entries)} complete entr"
                f"{'y' if len(entries) == 1 else 'ies'} kept from a line glued to a torn "
                f"write; the torn part skipped: {pieces}"))
        elif len(entries) > 1:
            journal.problems.append(Problem(
                name, number, "glued", f"{len(entries)} entries written on one line (no newline "
                "between them); each kept on its own"))
        out.extend(RawEntry(name, number, entry) for entry in entries)
    return out, len(lines)


def read_checkpoint_file(path: Path, journal: ReferenceJournal) -> dict[str, Any] | None:
    """The state a ``.checkpoint.json`` holds: a state object, or an entry whose data is one."""
    import hashlib

    name = path.name
    try:
        raw = path.read_bytes()
        journal.digests[name] = hashlib.sha256(raw).hexdigest()
        value = json.loads(raw.decode("utf-8"))
    except OSError as exc:
        journal.problems.append(Problem(name, 0, "corrupt", f"cannot read: {exc.strerror}"))
        return None
    except UnicodeDecodeError as exc:
        journal.problems.append(Problem(name, 0, "corrupt", f"checkpoint file skipped: not "
                                        f"UTF-8 text (byte {exc.start})"))
        return None
    except json.JSONDecodeError as exc:
        journal.problems.append(Problem(name, exc.lineno, "corrupt",
                                        f"checkpoint file skipped: {exc.msg}"))
        return None
    except (ValueError, RecursionError) as exc:
        journal.problems.append(Problem(name, 0, "corrupt", f"checkpoint file skipped: {exc}"))
        return None
    if is_entry(value) and isinstance(value.get("data"), dict):
        value = value["data"]
    elif isinstance(value, dict) and isinstance(value.get("state"), dict) and \
            "context_state" not in value:
        value = value["state"]
    if not isinstance(value, dict):
        journal.problems.append(Problem(name, 1, "invalid", "checkpoint file skipped: not a "
                                        "JSON object"))
        return None
    return value


def _process_of(entry: RawEntry, stem: str) -> str:
    name = entry.data.get("process_id")
    return name if isinstance(name, str) and name else stem


def read_reference(directory: Path) -> ReferenceJournal:
    """Read every process in ``directory``. NotAReferenceJournal when it is not one (a file,
    a missing path, a folder without JSONL or checkpoint files)."""
    if not directory.exists():
        raise NotAReferenceJournal(f"{directory} does not exist; expected {EXPECTED}")
    if not directory.is_dir():
        hint = " (that is a journal file like ours, not a reference directory)" \
            if directory.suffix == ".db" else ""
        raise NotAReferenceJournal(f"{directory} is a file{hint}; expected {EXPECTED}")
    jsonl = sorted(p for p in directory.iterdir() if p.name.endswith(JSONL) and p.is_file())
    checkpoints = sorted(p for p in directory.iterdir()
                         if p.name.endswith(CHECKPOINT_FILE) and p.is_file())
    if not jsonl and not checkpoints:
        raise NotAReferenceJournal(f"{directory} holds no {JSONL} or {CHECKPOINT_FILE} files; "
                                   f"expected {EXPECTED}")
    journal = ReferenceJournal(directory)
    for path in jsonl:
        stem = path.name[: -len(JSONL)]
        entries, lines = read_jsonl(path, journal)
        # An empty or wholly corrupt file still names a process (by its file name).
        owner = _process_of(entries[0], stem) if entries else stem
        journal.processes.setdefault(owner, ReferenceProcess(owner)).lines += lines
        named = {owner}
        for entry in entries:
            name = _process_of(entry, stem)
            named.add(name)
            journal.processes.setdefault(name, ReferenceProcess(name)).entries.append(entry)
        for name in sorted(named):
            journal.processes[name].files.append(path.name)
    for name, process in journal.processes.items():
        if len(process.files) > 1:
            journal.problems.append(Problem(process.files[-1], 0, "note", f"entries of process "
                                            f"{name!r} are in {len(process.files)} files ("
                                            f"{', '.join(process.files)}); read in that order"))
    for path in checkpoints:
        stem = path.name[: -len(CHECKPOINT_FILE)]
        state = read_checkpoint_file(path, journal)
        holder = next((p for p in journal.processes.values()
                       if f"{stem}{JSONL}" in p.files), None)
        if holder is None:
            holder = journal.processes.setdefault(stem, ReferenceProcess(stem))
        holder.checkpoint_file = state
        holder.checkpoint_file_name = path.name
    return journal
