"""The cluster's errors: a node that cannot reach its database, a write fenced out; and how a
node tells a passing fault (the database down, a lost connection, a timeout) from a bug."""

from __future__ import annotations

import psycopg
from pydantic import ValidationError

from runtime_core.errors import RuntimeBaseError


class ClusterError(RuntimeBaseError):
    """Something about the cluster (its database, a node, a lease) an operator can act on."""


class FencedOut(ClusterError):
    """A write for ``process`` carried ``epoch``, but the lease moved on: another node (or a later
    term of this one) owns the process now, so this writer is a zombie and its write is refused.

    ``current_owner`` and ``current_epoch`` say who holds the lease now (None: no lease row)."""

    def __init__(self, process: str, epoch: int, current_owner: str | None,
                 current_epoch: int | None = None) -> None:
        self.process = process
        self.epoch = epoch
        self.current_owner = current_owner
        self.current_epoch = current_epoch
        if current_owner is None:
            now = "no node holds its lease"
        else:
            now = f"node {current_owner!r} holds it at epoch {current_epoch}"
        super().__init__(
            f"process {process!r}: write refused, epoch {epoch} is no longer current ({now}); "
            "this node lost ownership and must stop working on it")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.process, self.epoch, self.current_owner, self.current_epoch))


def is_passing(exc: BaseException) -> bool:
    """A fault a node waits out: the database down, a lost connection, a timeout."""
    return isinstance(exc, psycopg.OperationalError | TimeoutError | OSError)


def describe(exc: BaseException) -> str:
    """One line an operator can read."""
    if isinstance(exc, TimeoutError):
        return "PostgreSQL did not answer in time"
    if isinstance(exc, ValidationError):  # each field and why, not pydantic's headline
        return "; ".join(f"{'.'.join(str(part) for part in error['loc']) or 'config'}: "
                         f"{error['msg']}" for error in exc.errors())
    return (str(exc).strip() or type(exc).__name__).splitlines()[0]
