"""`promptui run` stops as `promptui serve` does (issue 31): on SIGTERM, SIGINT or the end of
--seconds the run in flight drains, what is still queued stays in the journal (nothing is
dead-lettered "process stopped"), the closing line and --json say how many were kept, and the
next `promptui run` on the same journal runs every kept event exactly once. After a SIGKILL
with a queue, the next run runs each acknowledged event once too (a write the kill cut off
waits for an operator instead)."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from tests.helpers.headless import Books
from tests.helpers.polling import poll

pytestmark = pytest.mark.slow

EVENTS = 12
CLOSING = re.compile(r"Stopped cleanly\. (\d+) queued event\(s\) kept in the journal for the "
                     r"next start; (\d+) dead letter\(s\) kept for redelivery\.")


def post_all(books: Books) -> None:
    answers = [books.post(n) for n in range(EVENTS)]
    assert answers == [202] * EVENTS


def finish_the_queue(books: Books, acknowledged: int = EVENTS) -> None:
    """A second `promptui run` on the journal: it runs what was kept, then stops."""
    again = books.start(log="run2")
    poll(lambda: not books.journal_state().queued and sum(books.written().values())
         + len(books.journal_state().waiting) >= acknowledged, timeout=60,
         what="the kept events to run")
    assert again.stop(signal.SIGTERM) == 0, again.err
    kept = CLOSING.search(" ".join(again.out.split()))  # the console wraps at 80
    assert kept is not None, again.out
    assert kept.groups() == ("0", "0")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "--seconds"])
def test_a_stop_keeps_the_queue_and_the_next_run_runs_each_once(tmp_path: Path,
                                                                 how: str) -> None:
    books = Books(tmp_path)
    args = ("--seconds", "5") if how == "--seconds" else ("--json",) if how == "SIGINT" else ()
    run = books.start(*args, book_seconds=1.0 if how == "--seconds" else 0.4)
    post_all(books)
    poll(lambda: books.written(), what="the first booking")
    if how == "--seconds":
        assert run.wait(60) == 0, run.err
    else:
        assert run.stop(getattr(signal, how)) == 0, run.err
    written = sum(books.written().values())
    state = books.journal_state()
    assert state.dead == []  # nothing is dead-lettered "process stopped"
    assert len(state.queued) == EVENTS - written > 0, "the stop came after the queue emptied"
    if how == "SIGINT":  # --json: the final status carries the counts
        final = json.loads(run.out)
        assert final["stopped"]["kept"] == EVENTS - written
        assert final["stopped"]["dead_letters"] == 0
        assert final["stopped"]["processes"]["books"] == {"pending": EVENTS - written,
                                                          "dead_letters": 0}
    else:
        kept = CLOSING.search(" ".join(run.out.split()))
        assert kept is not None, run.out
        assert kept.groups() == (str(EVENTS - written), "0")

    finish_the_queue(books)
    assert books.written() == {n: 1 for n in range(EVENTS)}  # each exactly once
    assert books.journal_state().dead == []


def test_after_a_sigkill_with_a_queue_the_next_run_runs_each_once(tmp_path: Path) -> None:
    books = Books(tmp_path)
    run = books.start(book_seconds=0.3)
    post_all(books)
    poll(lambda: sum(books.written().values()) >= 2, what="two bookings")
    assert run.stop(signal.SIGKILL) == -signal.SIGKILL
    assert books.journal_state().queued  # a queue was there when it was killed

    finish_the_queue(books)
    written, state = books.written(), books.journal_state()
    assert all(count == 1 for count in written.values())  # no write twice
    assert set(written) | state.waiting == set(range(EVENTS))  # each ran or waits
    assert len(state.waiting) <= 1  # at most the write the kill cut off
    assert state.dead == []
