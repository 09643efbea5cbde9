"""How a SQL journal's run index finds a run's entries: by the first ``KEY_CHARS`` characters of
its id (SQLite schema 8, PostgreSQL schema 6), not the whole id.

A run id is 16 random hex characters, and the index held all of them for every entry of a run
(about a tenth of a run's bytes). Six characters tell 16.7 million runs apart; the rare runs
that share them are told apart by the whole id, which every query compares too. SQLite needs
that comparison kept off the index (a unary ``+``): it would otherwise put the id's value in
the indexed expression and no longer see the index.
"""

from __future__ import annotations

from collections.abc import Sequence

#: How many leading characters of a run id the run index holds.
KEY_CHARS = 6


def key_expression(column: str) -> str:
    """The indexed expression over ``column`` (SQLite's and PostgreSQL's ``substr`` alike)."""
    return f"substr({column}, 1, {KEY_CHARS})"


def runs_term(column: str, count: int = 1, mark: str = "?", *, plus: str = "+",
              key_mark: str | None = None) -> str:
    """The SQL term that finds the entries of ``count`` runs by the run index; its parameters
    are the ids twice over (``runs_params``). ``plus``: SQLite's unary plus that keeps the
    whole-id comparison off the index (empty for PostgreSQL); ``key_mark``: the parameter as
    the key's expression takes it (PostgreSQL's ``%s::text``), ``mark`` when not given."""
    keys = ", ".join(key_expression(key_mark or mark) for _ in range(count))
    marks = ", ".join(mark for _ in range(count))
    if count == 1:
        return f"{key_expression(column)} = {keys} AND {plus}{column} = {marks}"
    return f"{key_expression(column)} IN ({keys}) AND {plus}{column} IN ({marks})"


def runs_params(run_ids: Sequence[str]) -> tuple[str, ...]:
    """The parameters of ``runs_term`` for ``run_ids``."""
    return (*run_ids, *run_ids)
