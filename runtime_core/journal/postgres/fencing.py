"""Fencing a PostgreSQL journal: the writes of one process carry the epoch of the lease its
node holds on it, and are refused once another node (or a later term) took the process over.

A scale-out node (runtime_core.cluster) owns each process through a lease row with a fencing
epoch. The journal it gives an owned process is fenced to ``(process, epoch)``: every batch that
holds entries of that process first runs ``SELECT cluster_fence(process, epoch)`` in its own
transaction. That SQL function (made by the cluster's schema; called here by name, as the
journal sits below the cluster) share-locks the lease row until the batch commits, so a takeover
waits for a write in flight instead of slipping in under it, and raises SQLSTATE ``PU409`` when
the epoch moved on: the batch fails, nothing of it is written, and the journal is fenced for
good (:class:`JournalFenced`), so a node that was paused past its lease (SIGSTOP, a long GC)
can never write over its successor.
"""

from __future__ import annotations

import json
from typing import Any

from runtime_core.journal.provider import JournalError

__all__ = ["FENCE_SQL", "FENCE_SQLSTATE", "JournalFenced", "fenced_error"]

#: the SQLSTATE ``cluster_fence`` raises for a write whose epoch is no longer current
FENCE_SQLSTATE = "PU409"
#: the check each fenced batch runs first, inside its transaction
FENCE_SQL = "SELECT cluster_fence(%s, %s)"


class JournalFenced(JournalError):
    """The journal of ``process`` may no longer be written under ``epoch``: another node
    (``owner``, at ``owner_epoch``; None when unknown) owns the process now, or this node gave it
    up (``reason``). Nothing more is written through this journal."""

    def __init__(self, process: str, epoch: int, owner: str | None = None,
                 owner_epoch: int | None = None, *, reason: str = "") -> None:
        self.process, self.epoch = process, epoch
        self.owner, self.owner_epoch = owner, owner_epoch
        self.reason = reason
        if reason:
            why = reason
        elif owner is None:
            why = "its lease moved on and no node holds it now"
        else:
            why = f"node {owner!r} owns it now at epoch {owner_epoch}"
        super().__init__(f"process {process!r}: journal write refused under epoch {epoch}: "
                         f"{why}; this node stopped its copy of the process")

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.process, self.epoch, self.owner, self.owner_epoch,
                           self.reason))


def _rebuild(process: str, epoch: int, owner: str | None, owner_epoch: int | None,
             reason: str) -> JournalFenced:
    return JournalFenced(process, epoch, owner, owner_epoch, reason=reason)


def fenced_error(exc: BaseException, process: str, epoch: int) -> JournalFenced | None:
    """The JournalFenced a failed batch stands for (``exc`` carries SQLSTATE PU409), with the
    owner the fence function reported; None for any other error."""
    if getattr(exc, "sqlstate", None) != FENCE_SQLSTATE:
        return None
    detail: dict[str, Any] = {}
    diag = getattr(exc, "diag", None)
    try:
        loaded = json.loads(getattr(diag, "message_detail", None) or "{}")
        if isinstance(loaded, dict):
            detail = loaded
    except ValueError:
        pass
    owner, owner_epoch = detail.get("owner"), detail.get("owner_epoch")
    return JournalFenced(process, epoch, None if owner is None else str(owner),
                         None if owner_epoch is None else int(owner_epoch))
