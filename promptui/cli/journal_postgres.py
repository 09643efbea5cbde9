"""``promptui logs``, ``journal export`` and ``journal verify`` on a PostgreSQL journal: a
scale-out cluster's database, named by ``--cluster DSN|env`` (as ``promptui serve --cluster``
takes it) or by ``--journal postgresql://...``.

Read-only and safe while the nodes run (runtime_core.control.offline_postgres). A database
that cannot be read is one line naming it as ``user@host:port/dbname`` (never the password)
with what to do, and exit 2; ``logs --follow`` polls, and waits out a database that goes away
for a while."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.markup import escape

from promptui.cli.cluster_serve import cluster_dsn
from promptui.cli.options import DEFAULT_JOURNAL, err, fail, is_dsn

if TYPE_CHECKING:
    from runtime_core.control.offline_postgres import (
        JournalEntry,
        PostgresReader,
        PostgresVerifyReport,
    )

FOLLOW_SECONDS = 0.5  # between two polls of logs --follow
EXPORT_PAGE = 5000  # entries read at once by export: a long journal never sits in memory
Emit = Callable[[list["JournalEntry"]], None]


def journal_dsn(journal: str, cluster: str | None, url: str | None = None) -> str | None:
    """The PostgreSQL journal a reading command was given (``--cluster``, or a DSN as
    ``--journal``), or None for a journal file. Two sources at once exit 2."""
    if cluster is not None:
        if journal != str(DEFAULT_JOURNAL):
            raise fail("--journal and --cluster both name a journal: give one (--cluster "
                       "reads the cluster's PostgreSQL)")
        dsn = cluster_dsn(cluster)
    elif is_dsn(journal):
        dsn = journal
    else:
        return None
    if url:
        raise fail("--url reads through a served runtime, and a DSN reads the database "
                   "itself: give one")
    return dsn


@contextmanager
def reading(dsn: str) -> Iterator[PostgresReader]:
    """The journal at ``dsn``, open read-only, closed after; a JournalError (unreachable,
    refused, no journal there, an unknown process...) is printed as one line, exit 2."""
    from runtime_core.control.offline_postgres import JournalError, PostgresReader

    reader = PostgresReader(dsn)
    try:
        reader.open()
        yield reader
    except JournalError as exc:
        raise fail(str(exc)) from None
    finally:
        reader.close()


def logs_postgres(dsn: str, process: str, lines: int, entry_type: str | None, follow: bool,
                  emit: Emit) -> None:
    """The newest ``lines`` entries of ``process`` (of ``entry_type``), oldest first; with
    ``follow``, every later one as it commits, until Ctrl+C."""
    with reading(dsn) as reader:
        reader.check_process(process)
        recent = reader.read_entries(process, entry_type=entry_type, limit=lines,
                                     newest_first=True)
        recent.reverse()
        emit(recent)
        if not follow:
            return
        if recent:
            last = recent[-1].seq
        else:  # nothing of that type yet: follow from the current end
            newest = reader.read_entries(process, limit=1, newest_first=True)
            last = newest[0].seq if newest else 0
        try:
            _follow(reader, process, entry_type, last, emit)
        except KeyboardInterrupt:
            return


def _follow(reader: PostgresReader, process: str, entry_type: str | None, last: int,
            emit: Emit) -> None:
    from runtime_core.control.offline_postgres import JournalUnreachable

    waiting = False
    while True:
        time.sleep(FOLLOW_SECONDS)  # a poll: PostgreSQL's NOTIFY would need a writer's help
        try:
            new = reader.read_entries(process, entry_type=entry_type, since_seq=last)
        except JournalUnreachable as exc:
            if not waiting:  # said once, not every poll
                err.print(f"[yellow]warning:[/yellow] {escape(str(exc))}; still following: "
                          "reading again once it answers (Ctrl+C stops)")
            waiting = True
            continue
        if waiting:
            err.print(f"reading {escape(reader.where)} again")
            waiting = False
        if new:
            emit(new)
            last = new[-1].seq


def export_postgres(dsn: str, process: str, emit: Emit) -> None:
    """Every entry of ``process``, oldest first, in pages, up to its end as it is now."""
    with reading(dsn) as reader:
        reader.check_process(process)
        since = 0
        while True:
            page = reader.read_entries(process, since_seq=since, limit=EXPORT_PAGE)
            if not page:
                return
            emit(page)
            since = page[-1].seq


def verify_report(dsn: str) -> PostgresVerifyReport:
    """What ``journal verify`` finds in the PostgreSQL journal at ``dsn``."""
    from runtime_core.control.offline_postgres import verify_postgres

    with reading(dsn) as reader:
        return verify_postgres(reader)
