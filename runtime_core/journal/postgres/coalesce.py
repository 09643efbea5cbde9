"""A group commit's index statements, merged: the rows of many queue and open-run changes in a
few multi-row statements instead of one statement each.

A batch of 50 producers' runs carried some 65 of them (an event queued, a run opened, an event
taken, a run closed, each its own INSERT or DELETE), each parsed, planned and run on its own:
merged, the server's time for a run's commits fell by more than a third (issue 37's replay of
2,000 runs' batches: 0.79 s -> 0.49 s).

Merging never changes what the batch leaves behind. A statement touches one row, named by its
table, process and key (event id, run id); two statements on different rows commute, two on
the same row keep their order. So a statement joins an earlier statement of its own kind only
if nothing between them touched its row; else it starts a new statement, after. A statement of
any other kind (a dead letter, a trim, a delivery, a redelivery) is left as it is, in its
place, and nothing moves across it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PENDING_ADD", "PENDING_REMOVE", "RUN_CLOSE", "RUN_OPEN", "RUN_STATE", "coalesce"]

Statement = tuple[str, tuple[Any, ...]]

_PENDING_ADD = ("INSERT INTO pending (process, event_id, ord, event) VALUES ",
                " ON CONFLICT (process, event_id) DO UPDATE SET ord = excluded.ord, "
                "event = excluded.event")
_RUN_OPEN = ("INSERT INTO open_runs (process, run_id, event_id, attempt, state, started_seq) "
             "VALUES ", " ON CONFLICT (process, run_id) DO UPDATE SET event_id = "
             "excluded.event_id, attempt = excluded.attempt, state = 'running', "
             "started_seq = excluded.started_seq")
PENDING_ADD = _PENDING_ADD[0] + "(%s, %s, %s, %s)" + _PENDING_ADD[1]
PENDING_REMOVE = "DELETE FROM pending WHERE process = %s AND event_id = %s"
RUN_OPEN = _RUN_OPEN[0] + "(%s, %s, %s, %s, 'running', %s)" + _RUN_OPEN[1]
RUN_STATE = "UPDATE open_runs SET state = %s WHERE process = %s AND run_id = %s"
RUN_CLOSE = "DELETE FROM open_runs WHERE process = %s AND run_id = %s"


@dataclass(frozen=True, slots=True)
class _Shape:
    """How one kind of statement merges: ``head`` + rows joined by ", " + ``tail``, where the
    parameters at ``shared`` are said once (before the rows: merged statements have them
    equal) and those at ``per_row`` once per row, as ``row``. The table row it touches is
    named by its ``table`` and the parameters at ``process`` and ``key``."""

    table: str
    process: int
    key: int
    head: str
    row: str
    tail: str
    shared: tuple[int, ...] = ()
    per_row: tuple[int, ...] = ()


_SHAPES: dict[str, _Shape] = {
    PENDING_ADD: _Shape("pending", 0, 1, _PENDING_ADD[0], "(%s, %s, %s, %s)", _PENDING_ADD[1],
                        per_row=(0, 1, 2, 3)),
    PENDING_REMOVE: _Shape("pending", 0, 1, "DELETE FROM pending WHERE process = %s AND "
                           "event_id IN (", "%s", ")", shared=(0,), per_row=(1,)),
    RUN_OPEN: _Shape("open_runs", 0, 1, _RUN_OPEN[0], "(%s, %s, %s, %s, 'running', %s)",
                     _RUN_OPEN[1], per_row=(0, 1, 2, 3, 4)),
    RUN_STATE: _Shape("open_runs", 1, 2, "UPDATE open_runs SET state = %s WHERE process = %s "
                      "AND run_id IN (", "%s", ")", shared=(0, 1), per_row=(2,)),
    RUN_CLOSE: _Shape("open_runs", 0, 1, "DELETE FROM open_runs WHERE process = %s AND "
                      "run_id IN (", "%s", ")", shared=(0,), per_row=(1,)),
}


@dataclass(slots=True)
class _Group:
    """Statements merged into one: the first one's SQL and parameters, and every row."""

    sql: str
    params: tuple[Any, ...]
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def statement(self) -> Statement:
        shape = _SHAPES.get(self.sql)
        if shape is None or len(self.rows) == 1:
            return self.sql, self.params  # alone: exactly as it was made
        shared = tuple(self.params[i] for i in shape.shared)
        values = tuple(value for row in self.rows for value in row)
        return (shape.head + ", ".join([shape.row] * len(self.rows)) + shape.tail,
                shared + values)


def coalesce(statements: list[Statement]) -> list[Statement]:
    """``statements`` (in the order they must take effect) as fewer statements that leave
    the tables exactly as running them one by one would."""
    groups: list[_Group] = []
    last_on_row: dict[tuple[str, Any, Any], int] = {}  # a row -> the last group touching it
    last_of_kind: dict[tuple[Any, ...], int] = {}  # (sql, shared values) -> its last group
    barrier = -1  # the last statement left as it is: nothing moves across it
    for sql, params in statements:
        shape = _SHAPES.get(sql)
        if shape is None:
            groups.append(_Group(sql, params, [()]))
            barrier = len(groups) - 1
            continue
        row = (shape.table, params[shape.process], params[shape.key])
        kind = (sql, *(params[i] for i in shape.shared))
        after = max(barrier, last_on_row.get(row, -1))
        at = last_of_kind.get(kind, -1)
        if at > after:  # nothing since that group touched this row: merged into it
            groups[at].rows.append(tuple(params[i] for i in shape.per_row))
        else:
            groups.append(_Group(sql, params, [tuple(params[i] for i in shape.per_row)]))
            at = last_of_kind[kind] = len(groups) - 1
        last_on_row[row] = at
    return [group.statement() for group in groups]
