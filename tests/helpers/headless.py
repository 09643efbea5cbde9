"""``promptui run`` as a subprocess over a booking process: a GitHub-signed webhook feeds it,
its write tool appends one ledger line per execution (the payload's number and the call's
idempotency key), so a test counts how often each acknowledged event ran; and what the journal
holds afterwards (pending events, dead letters, runs waiting for an operator)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.helpers.cli import promptui_command
from tests.helpers.polling import poll
from tests.helpers.ports import free_port
from tests.helpers.webhooks import github

SECRET = "books-webhook-secret"
MANIFEST = """\
version: "1.0"
name: books
instructions: Book each payment once.
model:
  provider: scripted
  turns:
    - tool_calls: [{name: book, args: {n: $payload.n}}]
    - reply: booked
tools:
  - {path: "books_tools:book", effect: write}
triggers:
  - type: webhook
    webhook_host: 127.0.0.1
    webhook_port: ${BOOKS_PORT}
    webhook_path: /in
    signature_scheme: github
    hmac_secret: ${BOOKS_SECRET}
journal: {level: checkpoint}
"""
TOOLS = '''\
import asyncio
import os
from pathlib import Path

from runtime_core import ToolContext


async def book(n: int, ctx: ToolContext) -> str:
    """Takes BOOK_SECONDS, then appends the number and the idempotency key: one line a call."""
    await asyncio.sleep(float(os.environ.get("BOOK_SECONDS", "0")))
    with Path(os.environ["BOOKS_LEDGER"]).open("a", encoding="utf-8") as ledger:
        ledger.write(f"{n} {ctx.idempotency_key}\\n")
        ledger.flush()
        os.fsync(ledger.fileno())
    return f"booked {n}"
'''


@dataclass
class Books:
    """A folder with the booking manifest, its journal and ledger, and a port for its hook."""

    folder: Path
    port: int = field(default_factory=free_port)

    def __post_init__(self) -> None:
        self.agents.mkdir(parents=True, exist_ok=True)
        (self.agents / "books.agent").write_text(MANIFEST)
        (self.agents / "books_tools.py").write_text(TOOLS)

    @property
    def agents(self) -> Path:
        return self.folder / "agents"

    @property
    def journal(self) -> Path:
        return self.folder / ".promptui" / "journal.db"  # the default, under the cwd

    @property
    def ledger(self) -> Path:
        return self.folder / "ledger.txt"

    def start(self, *args: str, book_seconds: float = 0.0, log: str = "run") -> HeadlessRun:
        """``promptui run`` on the folder (``args``: --seconds, --json, --drain-timeout...),
        its output in ``log``.out and ``log``.err; returns once its webhook answers."""
        env = {**os.environ, "BOOKS_PORT": str(self.port), "BOOKS_SECRET": SECRET,
               "BOOKS_LEDGER": str(self.ledger), "BOOK_SECONDS": str(book_seconds),
               "PROMPTUI_URL": "", "PROMPTUI_TOKEN": ""}
        out, err = self.folder / f"{log}.out", self.folder / f"{log}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            proc = subprocess.Popen(
                [*promptui_command(), "run", str(self.agents), *args], cwd=self.folder,
                env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        run = HeadlessRun(proc, self, out, err)
        poll(run.listening, timeout=30, what="promptui run's webhook")
        return run

    def post(self, n: int, *, timeout: float = 5.0) -> int:
        """Post event ``n`` as GitHub would (delivery id ``n``): the answer's status."""
        body = json.dumps({"n": n}).encode()
        answer = httpx.post(f"http://127.0.0.1:{self.port}/in", content=body,
                            headers=github(body, SECRET, f"delivery-{n}"), timeout=timeout,
                            trust_env=False)
        return answer.status_code

    def written(self) -> Counter[int]:
        """How many times the tool wrote each number."""
        text = self.ledger.read_text() if self.ledger.exists() else ""
        return Counter(int(line.split()[0]) for line in text.splitlines() if line.strip())

    def journal_state(self) -> JournalState:
        with sqlite3.connect(f"file:{self.journal}?mode=ro", uri=True) as conn:
            pending = {json.loads(e)["payload"]["n"] for (e,) in conn.execute(
                "SELECT event FROM pending WHERE process = 'books'")}
            dead = [(json.loads(e)["payload"]["n"], r) for e, r in conn.execute(
                "SELECT event, reason FROM dead_letters WHERE process = 'books'")]
            waiting_ids = {e for (e,) in conn.execute(
                "SELECT event_id FROM open_runs WHERE process = 'books' AND state = 'waiting'")}
            waiting = {json.loads(e)["payload"]["n"] for i, e in conn.execute(
                "SELECT event_id, event FROM pending WHERE process = 'books'")
                if i in waiting_ids}
        return JournalState(pending - waiting, waiting, dead)


@dataclass
class JournalState:
    queued: set[int]  # accepted, not finished, not waiting: the next start runs them
    waiting: set[int]  # a run waits for an operator (a write a kill left unknown)
    dead: list[tuple[int, str]]  # (number, reason)


@dataclass
class HeadlessRun:
    proc: subprocess.Popen[bytes]
    books: Books
    out_path: Path
    err_path: Path

    def listening(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"promptui run exited {self.proc.returncode}:\n{self.err}")
        try:
            return httpx.get(f"http://127.0.0.1:{self.books.port}/health", timeout=1,
                             trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    @property
    def out(self) -> str:
        return self.out_path.read_text(errors="replace")

    @property
    def err(self) -> str:
        return self.err_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """Send ``sig`` and wait for the exit status."""
        self.proc.send_signal(sig)
        return self.wait(timeout)

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"promptui run did not exit:\n{self.err}") from None
