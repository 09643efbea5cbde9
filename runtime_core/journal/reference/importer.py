"""Import a reference runtime's FileJournal directory into one of our journals.

Each process becomes the entries ``mapping`` makes, after one ``imported`` entry that
says where they came from (the directory, the files and a digest of their bytes). Nothing is
written unless every process can be: a name the journal already has is refused (naming it),
unless it holds this very import already (then it is left as it is, so importing twice never
duplicates); ``rename`` imports a process under another name. A process's entries are written
in one transaction on an SQLite journal, so a crash leaves all of them or none.

The result says, per process, what was (or, for a dry run, would be) imported: entries per
type, checkpoints, dead letters, queued events, runs in flight and writes waiting for an
operator, and every line skipped with its file and line number."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.memory import InMemoryJournal
from runtime_core.journal.provider import JournalError, JournalProvider, ReadFilter
from runtime_core.journal.reference.mapping import Mapped, MappedProcess, map_process
from runtime_core.journal.reference.reader import (
    EXPECTED,
    NotAReferenceJournal,
    Problem,
    ReferenceJournal,
    read_reference,
)
from runtime_core.journal.replay import ReplayEngine, rebuild_run

SOURCE = "promptise FileJournal"

__all__ = ["EXPECTED", "ImportReport", "NotAReferenceJournal", "NothingToImport",
           "ProcessImport", "apply_import", "import_into_file", "import_reference",
           "prepare_import"]


class NothingToImport(ValueError):
    """The directory is a reference journal, but no process in it has an entry to import."""


@dataclass(slots=True)
class ProcessImport:
    """One process: what it holds once imported, and what happens to it."""

    name: str  # its name in our journal
    source_name: str  # its name in the reference journal
    files: list[str]
    lines: int
    status: str = "import"  # import, imported, already imported, refused, empty
    message: str = ""
    entries: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # our entry types
    read: dict[str, int] = field(default_factory=dict)  # the reference's entry types
    not_carried: dict[str, int] = field(default_factory=dict)
    dropped_keys: list[str] = field(default_factory=list)
    checkpoints: int = 0
    dead_letters: int = 0
    queued_events: int = 0
    open_runs: int = 0
    waiting_writes: int = 0
    lifecycle_state: str = ""
    context_keys: list[str] = field(default_factory=list)
    conversation_messages: int = 0
    first_entry: str = ""
    last_entry: str = ""
    digest: str = ""
    mapped: list[Mapped] = field(default_factory=list, repr=False)


@dataclass(slots=True)
class ImportReport:
    source: str
    journal: str
    dry_run: bool
    processes: list[ProcessImport] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def refused(self) -> list[ProcessImport]:
        return [p for p in self.processes if p.status == "refused"]

    @property
    def skipped_lines(self) -> list[Problem]:
        return [p for p in self.problems if p.kind in ("torn", "corrupt", "glued", "invalid")]

    def to_dict(self) -> dict[str, Any]:
        processes = []
        for process in self.processes:
            row = asdict(process)
            row.pop("mapped", None)
            processes.append(row)
        return {"source": self.source, "journal": self.journal, "dry_run": self.dry_run,
                "processes": processes,
                "problems": [{"file": p.file, "line": p.line, "kind": p.kind,
                              "message": p.message} for p in self.problems]}


def _digest(reference: ReferenceJournal, files: list[str]) -> str:
    text = "".join(f"{name}:{reference.digests.get(name, '')}\n" for name in sorted(files))
    return hashlib.sha256(text.encode()).hexdigest()


async def _summarize(row: ProcessImport, mapped: MappedProcess) -> None:
    """Play the entries into a journal in memory: what recovery will find, and a check that
    every entry is one our journals accept (one that is not is reported and left out)."""
    memory = InMemoryJournal()
    kept: list[Mapped] = []
    for item in mapped.entries:
        item.entry.process = row.name
        try:
            await memory.append(item.entry, attachment=item.attachment)
        except JournalError as exc:
            file, _, line = item.source.rpartition(":")
            mapped.problems.append(Problem(file or item.source, int(line or 0)
                                           if line.isdigit() else 0, "invalid",
                                           f"{item.entry.entry_type} left out: {exc}"))
            continue
        kept.append(item)
    for item in kept:
        item.entry.seq = 0  # the target journal numbers them
    row.mapped = kept
    row.entries = len(kept)
    row.counts = dict(Counter(item.entry.entry_type for item in kept))
    row.read = dict(mapped.read)
    row.not_carried = dict(mapped.not_carried)
    row.dropped_keys = sorted(mapped.dropped_keys)
    row.checkpoints = row.counts.get(EntryType.CHECKPOINT, 0)
    row.dead_letters = await memory.dead_letter_count(row.name)
    runs = await memory.open_runs(row.name)
    in_flight = {run.event_id for run in runs}
    pending = await memory.pending_events(row.name)
    row.queued_events = sum(1 for e in pending if e.get("event_id") not in in_flight)
    row.open_runs = len(runs)
    for run in runs:
        steps = await memory.read(ReadFilter(process=row.name, run_id=run.run_id))
        if rebuild_run(steps).unknown is not None:
            row.waiting_writes += 1
    engine = ReplayEngine(memory)
    recovered = await engine.recover(row.name)
    row.lifecycle_state = str(recovered["lifecycle_state"]) if recovered["found"] else ""
    row.context_keys = sorted(recovered["context_state"])
    row.conversation_messages = len(await engine.conversation(row.name, 0))


async def prepare_import(source: Path, *, rename: dict[str, str] | None = None,
                         only: list[str] | None = None) -> tuple[ImportReport, ReferenceJournal]:
    """Read and map ``source`` (nothing is written anywhere). ``rename`` maps a process's name
    there to its name here (the key "" means the directory's only process). Raises
    NotAReferenceJournal when it is not a reference journal; ValueError for a ``rename`` or
    ``only`` naming no process in it; NothingToImport when no chosen process has an entry."""
    reference = await asyncio.to_thread(read_reference, source)
    names = sorted(reference.processes)
    rename = dict(rename or {})
    if "" in rename:  # a new name without an old one: the directory's only process
        if len(names) != 1:
            raise ValueError(f"{source} holds {len(names)} processes ({', '.join(names)}); "
                             "name the one to rename: OLD=NEW")
        rename[names[0]] = rename.pop("")
    for wanted in [*(only or []), *rename]:
        if wanted not in reference.processes:
            raise ValueError(f"{source} has no process {wanted!r} (processes: "
                             f"{', '.join(names) or 'none'})")
    targets = [rename.get(name, name) for name in names if not only or name in only]
    twice = sorted(n for n, c in Counter(targets).items() if c > 1)
    if twice:
        raise ValueError(f"two processes would be imported as {', '.join(map(repr, twice))}; "
                         "give them different names")
    report = ImportReport(str(source), "", False, problems=list(reference.problems))
    for name in names:
        if only and name not in only:
            continue
        process = reference.processes[name]
        files = [*process.files, *([process.checkpoint_file_name]
                                   if process.checkpoint_file_name else [])]
        row = ProcessImport(rename.get(name, name), name, files, process.lines,
                            digest=_digest(reference, files))
        mapped = map_process(process)
        await _summarize(row, mapped)
        report.problems.extend(mapped.problems)
        if not row.entries:
            row.status, row.message = "empty", "no entry to import"
        report.processes.append(row)
    report.problems.sort(key=lambda p: (p.file, p.line))
    if not any(row.entries for row in report.processes):
        raise NothingToImport(f"nothing to import from {source}: no process in it has a "
                              f"readable entry ({len(report.skipped_lines)} line(s) skipped); "
                              f"expected {EXPECTED}")
    return report, reference


def decide(report: ImportReport, first_entries: dict[str, JournalEntry | None],
           heads: dict[str, int]) -> None:
    """Set each process's status against the target journal's first entry of each name."""
    for row in report.processes:
        if row.status == "empty":
            continue
        first = first_entries.get(row.name)
        if first is None and not heads.get(row.name):
            row.status = "import"
            continue
        data = first.data if first is not None else {}
        ours = first is not None and first.entry_type == EntryType.IMPORTED
        if ours and data.get("digest") == row.digest \
                and data.get("from_process") == row.source_name:
            row.status = "already imported"
            count = data.get("entries")
            upto = f" to {row.name}:{count + 1}" if isinstance(count, int) else ""
            row.message = f"imported before ({row.name}:1{upto}); left as it is"
            continue
        row.status = "refused"
        hint = (f"import it under another name with --as {row.source_name}=NEW_NAME, or "
                f"leave it out with --only")
        if ours and data.get("from_process") == row.source_name:
            row.message = (f"process {row.name!r} was imported from a reference journal "
                           f"before ({row.name}:1) and this one differs from it; {hint}")
        else:
            row.message = (f"the journal already has a process named {row.name!r} "
                           f"({heads.get(row.name, '?')} entries); {hint}")


async def _existing(journal: JournalProvider, names: list[str]
                    ) -> tuple[dict[str, JournalEntry | None], dict[str, int]]:
    known = set(await journal.processes())
    first: dict[str, JournalEntry | None] = {}
    heads: dict[str, int] = {}
    for name in names:
        if name not in known:
            continue
        found = await journal.read(ReadFilter(process=name, limit=1))
        last = await journal.read(ReadFilter(process=name, newest_first=True, limit=1))
        first[name] = found[0] if found else None
        heads[name] = last[0].seq if last else 0
    return first, heads


def marker(row: ProcessImport, source: str) -> JournalEntry:
    return JournalEntry(row.name, EntryType.IMPORTED, {
        "source": SOURCE, "directory": source, "from_process": row.source_name,
        "files": row.files, "digest": row.digest, "entries": row.entries,
        "lines": row.lines},
        timestamp=row.mapped[0].entry.timestamp if row.mapped else 0.0)


async def _write(journal: JournalProvider, row: ProcessImport, source: str) -> None:
    """The marker and the entries, submitted at once: on SQLite, one transaction."""
    from runtime_core.journal.sqlite.journal import SQLiteJournal

    saved = journal.max_batch if isinstance(journal, SQLiteJournal) else 0
    if isinstance(journal, SQLiteJournal):
        journal.max_batch = max(saved, row.entries + 1)
    try:
        futures = [journal.submit(marker(row, source))]
        futures += [journal.submit(m.entry, attachment=m.attachment) for m in row.mapped]
        await asyncio.gather(*futures)
    finally:
        if isinstance(journal, SQLiteJournal):
            journal.max_batch = saved
    row.first_entry = f"{row.name}:1"
    row.last_entry = row.mapped[-1].entry.entry_id if row.mapped else row.first_entry


async def apply_import(journal: JournalProvider, report: ImportReport, *,
                       dry_run: bool = False) -> ImportReport:
    """Decide each prepared process against ``journal`` (open) and write those to import;
    with ``dry_run``, or when a process is refused, nothing is written."""
    report.dry_run = dry_run
    report.journal = str(getattr(journal, "path", type(journal).__name__))
    first, heads = await _existing(journal, [p.name for p in report.processes])
    decide(report, first, heads)
    if dry_run or report.refused:
        return report
    where = str(await asyncio.to_thread(Path(report.source).resolve))
    for row in report.processes:
        if row.status == "import":
            await _write(journal, row, where)
            row.status = "imported"
    return report


async def import_reference(journal: JournalProvider, source: Path, *,
                           rename: dict[str, str] | None = None, only: list[str] | None = None,
                           dry_run: bool = False) -> ImportReport:
    """Import the reference journal at ``source`` into ``journal`` (open). With ``dry_run``,
    or when a process is refused, nothing is written. Raises NotAReferenceJournal,
    NothingToImport or ValueError (see prepare_import)."""
    report, _ = await prepare_import(source, rename=rename, only=only)
    return await apply_import(journal, report, dry_run=dry_run)


def _existing_readonly(path: Path, names: list[str]
                       ) -> tuple[dict[str, JournalEntry | None], dict[str, int]]:
    """What the journal file has under ``names``, read-only (nothing when there is no file)."""
    from runtime_core.journal.inspect import process_names, read_entries

    if not path.exists():
        return {}, {}
    known = set(process_names(path))
    first: dict[str, JournalEntry | None] = {}
    heads: dict[str, int] = {}
    for name in names:
        if name in known:
            found = read_entries(path, name, limit=1)
            last = read_entries(path, name, limit=1, newest_first=True)
            first[name] = found[0] if found else None
            heads[name] = last[0].seq if last else 0
    return first, heads


async def import_into_file(path: Path, source: Path, *, rename: dict[str, str] | None = None,
                           only: list[str] | None = None, dry_run: bool = False
                           ) -> ImportReport:
    """The command line's import: into the journal file at ``path`` (created if missing). A
    dry run only reads the file. Otherwise the file is opened as a writer, strict (refused
    while a runtime holds it, JournalLocked naming the holder; a damaged journal is reported,
    never moved aside)."""
    from runtime_core.journal.sqlite.journal import SQLiteJournal

    report, _ = await prepare_import(source, rename=rename, only=only)
    if dry_run:
        report.dry_run = True
        report.journal = str(path)
        first, heads = await asyncio.to_thread(_existing_readonly, path,
                                               [p.name for p in report.processes])
        decide(report, first, heads)
        return report
    journal = SQLiteJournal(path, strict=True)
    await journal.open()
    try:
        return await apply_import(journal, report)
    finally:
        await journal.close()
