"""Cluster nodes as real OS processes (helpers/workers/node_worker.py): one paused past its TTL
(SIGSTOP) loses its processes and, once resumed, cannot write for them; one killed (SIGKILL)
is replaced within the TTL; one told to stop (SIGTERM) hands over and exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.helpers.polling import wait_for
from tests.helpers.workers.node_worker import WRITES_DDL

pytestmark = pytest.mark.slow

TTL = 1.0
NAMES = [f"p{i}" for i in range(6)]
ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """One node_worker process and the events it printed."""

    def __init__(self, dsn: str, node_id: str) -> None:
        self.node_id = node_id
        self.events: list[dict[str, Any]] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.workers.node_worker", dsn, node_id, str(TTL),
             ",".join(NAMES)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.append(json.loads(line))

    def seen(self, event: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["event"] == event]

    @property
    def held(self) -> set[str]:
        """What it runs now, from its own gain and lose events."""
        running: set[str] = set()
        for e in list(self.events):
            if e["event"] == "gain":
                running.add(e["process"])
            elif e["event"] == "lose":
                running.discard(e["process"])
        return running

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._reader.join(timeout=10)


@pytest.fixture
def workers(pg_dsn: str) -> Iterator[dict[str, Worker]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(WRITES_DDL)
    started: dict[str, Worker] = {}
    try:
        yield started
    finally:
        for worker in started.values():
            if worker.proc.poll() is None:
                os.kill(worker.proc.pid, signal.SIGCONT)  # a paused one cannot die of SIGKILL
            worker.end()


def split(*workers: Worker, shares: list[int]) -> bool:
    held = [w.held for w in workers]
    return sorted(map(len, held)) == sorted(shares) and len(set().union(*held)) == len(NAMES)


async def test_paused_killed_and_stopped_nodes(workers: dict[str, Worker], pg_dsn: str) -> None:
    a = workers["a"] = Worker(pg_dsn, "a")
    b = workers["b"] = Worker(pg_dsn, "b")
    await wait_for(lambda: split(a, b, shares=[3, 3]), timeout=30, what="a 3/3 split")

    # a is paused past its TTL: b takes everything over
    paused = a.held
    os.kill(a.proc.pid, signal.SIGSTOP)
    try:
        await wait_for(lambda: len(b.held) == 6, timeout=10 * TTL, what="b taking over")
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    # resumed, a learns at once that it lost them (a write it tries first for them is fenced)
    await wait_for(lambda: not (paused & a.held) and
                   {e["process"] for e in a.seen("lose")} >= paused, timeout=5 * TTL,
                   what="a giving its processes up")
    await wait_for(lambda: split(a, b, shares=[3, 3]), timeout=10, what="a 3/3 split again")

    # b is killed: a takes everything once b's leases expire
    b.proc.kill()
    b.proc.wait(timeout=10)
    await wait_for(lambda: len(a.held) == 6, timeout=5 * TTL, what="a taking over from b")

    # a is told to stop: it hands over (no one is left) and exits
    a.proc.terminate()
    assert a.proc.wait(timeout=10) == 0
    a.end()
    assert a.seen("stopped")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM cluster_leases "
                            "WHERE expires_at > clock_timestamp()").fetchone() == (0,)
        rows = conn.execute("SELECT process, epoch, node_id FROM fenced_writes "
                            "ORDER BY id").fetchall()

    # the fence: per process, no write of an older epoch landed after one of a newer epoch,
    # and each epoch belongs to one node
    assert rows
    last: dict[str, int] = {}
    writer_of: dict[tuple[str, int], str] = {}
    for process, epoch, node in rows:
        assert epoch >= last.get(process, 0), f"{process}: epoch {epoch} written after newer"
        last[process] = epoch
        assert writer_of.setdefault((process, epoch), node) == node
