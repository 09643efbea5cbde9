"""A group commit's index statements merged (runtime_core/journal/postgres/coalesce.py) leave
the queue and the open runs exactly as running them one by one does: random batches of queue
and run changes on a few keys (so the same rows come back within a batch), with statements
nothing may move across, run both ways on two schemas of one PostgreSQL and compared."""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

from runtime_core.journal.postgres.coalesce import (
    PENDING_ADD,
    PENDING_REMOVE,
    RUN_CLOSE,
    RUN_OPEN,
    RUN_STATE,
    coalesce,
)
from runtime_core.journal.postgres.schema import MIGRATIONS
from tests.helpers.postgres import PgServer

pytestmark = pytest.mark.slow

Statement = tuple[str, tuple[Any, ...]]
BARRIER = "DELETE FROM pending WHERE process = %s AND ord > %s"  # touches many rows


def make_tables(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for version in sorted(MIGRATIONS):
            for statement in MIGRATIONS[version]:
                conn.execute(statement)  # type: ignore[arg-type]


def random_batch(rng: random.Random, seq: int) -> list[Statement]:
    out: list[Statement] = []
    for n in range(rng.randint(1, 60)):
        process = rng.choice(["p", "q"])
        event, run = f"e{rng.randint(0, 6)}", f"r{rng.randint(0, 6)}"
        pick = rng.random()
        if pick < 0.25:
            out.append((PENDING_ADD, (process, event, (seq + n) * 1000, f'{{"n":{n}}}')))
        elif pick < 0.45:
            out.append((PENDING_REMOVE, (process, event)))
        elif pick < 0.65:
            out.append((RUN_OPEN, (process, run, event, rng.randint(1, 3), seq + n)))
        elif pick < 0.8:
            out.append((RUN_STATE, (rng.choice(["waiting", "running"]), process, run)))
        elif pick < 0.95:
            out.append((RUN_CLOSE, (process, run)))
        else:
            out.append((BARRIER, (process, rng.randint(0, 50) * 1000)))
    return out


def run(dsn: str, statements: list[Statement]) -> None:
    with psycopg.connect(dsn) as conn:  # one transaction, as a commit
        for sql, params in statements:
            conn.execute(sql, params)  # type: ignore[arg-type]


def tables(dsn: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    with psycopg.connect(dsn) as conn:
        pending = conn.execute("SELECT process, event_id, ord, event FROM pending "
                               "ORDER BY process, event_id").fetchall()
        runs = conn.execute("SELECT process, run_id, event_id, attempt, state, started_seq "
                            "FROM open_runs ORDER BY process, run_id").fetchall()
    return [tuple(r) for r in pending], [tuple(r) for r in runs]


def test_merged_statements_leave_the_tables_as_one_by_one_does(
        pg_server: PgServer, pg_dsn: str) -> None:
    merged_dsn = pg_server.create_schema()
    try:
        make_tables(pg_dsn)
        make_tables(merged_dsn)
        rng = random.Random(37)
        merged_any = 0
        for batch_no in range(60):
            batch = random_batch(rng, batch_no * 100)
            merged = coalesce(batch)
            merged_any += len(batch) - len(merged)
            run(pg_dsn, batch)
            run(merged_dsn, merged)
            assert tables(merged_dsn) == tables(pg_dsn), f"batch {batch_no}: {batch}"
        assert merged_any > 500  # it did merge, a lot
    finally:
        pg_server.drop_schema(merged_dsn)


def test_a_batch_of_distinct_rows_becomes_one_statement_per_kind() -> None:
    batch: list[Statement] = []
    for n in range(50):
        batch += [(PENDING_ADD, ("p", f"e{n + 50}", n, "{}")), (PENDING_REMOVE, ("p", f"e{n}")),
                  (RUN_OPEN, ("p", f"r{n}", f"e{n}", 1, n)), (RUN_CLOSE, ("p", f"r{n - 50}"))]
    merged = coalesce(batch)
    assert [sql.split(" (")[0] for sql, _ in merged] == [
        "INSERT INTO pending", "DELETE FROM pending WHERE process = %s AND event_id IN",
        "INSERT INTO open_runs", "DELETE FROM open_runs WHERE process = %s AND run_id IN"]
    assert coalesce(batch[:1]) == batch[:1]  # alone: exactly as made
