"""An operator's stop of one process of a served runtime (`promptui stop NAME`, POST
/processes/{name}/stop) follows the hosts' rule (issue 31): its run in flight drains, its
queued events stay queued in the journal and run exactly once when it next starts, whether the
operator starts it again (`promptui start NAME`) or the server restarts. `--dead-letter-queued`
(`?queued=dead_letter`) gives the spec's stop: the queue is dead-lettered "process stopped"."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.helpers.cli import run_promptui
from tests.helpers.headless import SECRET, Books
from tests.helpers.polling import poll
from tests.helpers.serving import Served, start_serve

pytestmark = pytest.mark.slow
FIRST = 10  # 5 s of bookings: the stop, a subprocess, comes well before they are done
ALL = 20


def serve_books(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, books: Books,
                log_name: str = "serve.log") -> Served:
    for name, value in {"BOOKS_PORT": str(books.port), "BOOKS_SECRET": SECRET,
                        "BOOKS_LEDGER": str(books.ledger), "BOOK_SECONDS": "0.5"}.items():
        monkeypatch.setenv(name, value)
    return start_serve(tmp_path, str(books.agents), "--journal", str(books.journal),
                       log_name=log_name)


def cli(server: Served, *args: str) -> str:
    done = run_promptui(*args, "--url", server.url, "--token", server.token)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def inject(server: Served, numbers: range) -> None:
    client = server.client()
    for n in numbers:
        answer = client.post("/processes/books/inject", json={"payload": {"n": n}})
        assert answer.status_code == 202, answer.text


def status(server: Served) -> dict[str, int]:
    data = server.client().get("/processes/books").json()
    return {"queue": data["queue_size"], "dead": data["dead_letter_count"]}


def test_stop_keeps_the_queue_for_start_and_for_a_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    books = Books(tmp_path)
    server = serve_books(tmp_path, monkeypatch, books)
    inject(server, range(FIRST))
    poll(lambda: books.written(), what="the first booking")
    assert cli(server, "stop", "books", "--drain", "10") == \
        "books: draining, up to 10 s ...\nbooks: stopped"
    written = sum(books.written().values())
    assert status(server) == {"queue": FIRST - written, "dead": 0} and written < FIRST

    assert cli(server, "start", "books") == "books: running"  # the same runtime
    poll(lambda: sum(books.written().values()) == FIRST, 30, "the kept events to run")
    assert books.written() == {n: 1 for n in range(FIRST)}

    inject(server, range(FIRST, ALL))  # stopped again (no drain), then the server restarts
    poll(lambda: books.written()[FIRST], what="a booking of the second batch")
    assert cli(server, "stop", "books") == "books: stopped"
    assert status(server)["dead"] == 0 and status(server)["queue"] > 0
    assert server.stop(signal.SIGTERM) == 0, server.stderr()
    again = serve_books(tmp_path, monkeypatch, books, log_name="serve2.log")
    # Stopped without a drain: the write in flight was cut off, so it waits for an operator.
    poll(lambda: set(books.written()) | books.journal_state().waiting == set(range(ALL)), 30,
         "the kept events after a restart")
    assert len(books.journal_state().waiting) <= 1
    assert set(books.written().values()) == {1}  # each exactly once, none twice
    assert status(again) == {"queue": 0, "dead": 0}
    assert books.journal_state().dead == []
    assert again.stop() == 0


def test_dead_letter_queued_gives_the_spec_stop(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    books = Books(tmp_path)
    server = serve_books(tmp_path, monkeypatch, books)
    assert cli(server, "suspend", "books") == "books: suspended"
    inject(server, range(3))
    assert cli(server, "stop", "books", "--dead-letter-queued") == "books: stopped"
    assert status(server) == {"queue": 0, "dead": 3}
    assert sorted(books.journal_state().dead) == [(n, "process stopped") for n in range(3)]
    assert cli(server, "start", "books") == "books: running"
    assert status(server)["queue"] == 0 and books.written() == {}  # nothing comes back
    assert server.stop() == 0
