"""How a node shows the processes other nodes run, without a database: which rows a node
publishes each round, how a published row becomes a process-table row (its owner from the
leases, how old its figures are, the journal's state between owners), and what the views say
of old or missing figures."""

from __future__ import annotations

from dataclasses import replace

from promptui.widgets.process_table import cells
from runtime_core.cluster.leases import Lease
from runtime_core.cluster.status_board import Published, due
from runtime_core.control.cluster_figures import (
    FiguresSeen,
    elsewhere_row,
    needs_journal_state,
    published_status,
)
from runtime_core.control.views import WaitingRunView, figures_note
from runtime_core.control.wire import dump
from tests.helpers.scenes import summary

WAITING = (WaitingRunView("r1", "e1", "unknown_write_outcome", "send (r1:2)", 10.0),
           WaitingRunView("r2", "e2", "missing_completion_evidence"))
ROW = summary("p0", "suspended", suspend_reason="operator", queue_depth=3, dead_letters=2,
              waiting_runs=2, waiting=WAITING, node="b")


def published(age_s: float = 0.4, node: str = "b", epoch: int = 7) -> Published:
    return Published(node, epoch, dump(ROW), age_s)


def test_a_round_writes_what_is_new_changed_or_old() -> None:
    sent = {"same": (1, "{}", 100.0), "changed": (1, "{}", 100.0), "moved": (1, "{}", 100.0),
            "old": (1, "{}", 97.0), "gone": (1, "{}", 100.0)}
    current = {"same": (1, "{}"), "changed": (1, '{"a": 1}'), "moved": (2, "{}"),
               "old": (1, "{}"), "new": (1, "{}")}
    assert due(current, sent, now=100.5, confirm_s=2.0) == ["changed", "moved", "new", "old"]
    assert due({}, sent, now=100.5) == []


def test_a_row_another_node_runs_shows_its_published_counts_and_owner() -> None:
    row = elsewhere_row("p0", published(), Lease("b", 7, 5.0), journal_state=None)
    assert row == replace(ROW, as_of_age_s=0.4)
    assert (row.node, row.waiting_runs, row.waiting, row.queue_depth, row.dead_letters) == (
        "b", 2, WAITING, 3, 2)
    assert figures_note(row) == ""  # fresh


def test_between_owners_the_last_figures_stay_with_no_node_and_the_journal_s_state() -> None:
    row = elsewhere_row("p0", published(age_s=42.0), None, journal_state="stopped")
    assert (row.node, row.state, row.suspend_reason, row.as_of_age_s) == (
        None, "stopped", "", 42.0)
    assert (row.waiting_runs, row.waiting, row.queue_depth) == (2, WAITING, 3)
    assert figures_note(row) == "as of 42s ago"
    # a new owner that has not published yet: its node, the last figures, the journal's state
    moved = elsewhere_row("p0", published(), Lease("c", 8, 5.0), journal_state="starting")
    assert (moved.node, moved.state, moved.waiting_runs) == ("c", "starting", 2)


def test_a_process_nobody_published_is_marked_not_shown_as_zeros() -> None:
    row = elsewhere_row("p0", None, Lease("b", 1, 5.0), journal_state="running")
    assert (row.node, row.state, row.figures_known) == ("b", "running", False)
    assert figures_note(row) == "no figures yet"
    broken = Published("b", 1, {"state": 3}, 0.1)  # a node of another version, say
    assert elsewhere_row("p0", broken, None, None).figures_known is False
    assert elsewhere_row("p0", None, None, None).state == "unknown"


def test_the_journal_is_read_only_for_rows_not_published_under_the_current_lease() -> None:
    rows = {"current": published(), "old_epoch": published(epoch=6), "no_lease": published()}
    leases = {"current": Lease("b", 7, 5.0), "old_epoch": Lease("b", 7, 5.0),
              "unpublished": Lease("b", 1, 5.0)}
    assert [name for name in ("current", "old_epoch", "no_lease", "unpublished")
            if needs_journal_state(name, rows, leases)] == ["old_epoch", "no_lease",
                                                           "unpublished"]


def test_figures_last_read_grow_older_while_the_database_cannot_be_read() -> None:
    seen = FiguresSeen()
    seen.keep({"p0": published(age_s=1.0)})
    aged = seen.aged(["p0", "p1"])
    assert list(aged) == ["p0"] and aged["p0"].age_s >= 1.0
    assert aged["p0"].summary == dump(ROW)


def test_the_status_of_a_process_elsewhere_speaks_the_status_keys() -> None:
    row = elsewhere_row("p0", published(age_s=3.0), Lease("b", 7, 5.0), None)
    status = published_status(row, Lease("b", 7, 5.0))
    assert {k: status[k] for k in ("state", "node", "epoch", "queue_size",
                                   "dead_letter_count", "waiting_runs", "as_of_age_s")} == {
        "state": "suspended", "node": "b", "epoch": 7, "queue_size": 3,
        "dead_letter_count": 2, "waiting_runs": 2, "as_of_age_s": 3.0}
    assert [run["run_id"] for run in status["waiting"]] == ["r1", "r2"]


def test_the_room_dims_old_figures_and_marks_missing_ones() -> None:
    fresh = replace(ROW, as_of_age_s=1.0)
    assert cells(fresh, 0.0)["state"] == ("suspended*", "bold yellow")
    assert cells(ROW, 0.0)["state"] == ("suspended*", "bold yellow")  # read live here
    assert cells(replace(ROW, as_of_age_s=12.0), 0.0)["state"] == ("suspended* 12s", "dim")
    assert cells(replace(ROW, figures_known=False), 0.0)["state"] == ("suspended*?", "dim")
    assert cells(fresh, 0.0)["name"] == ("p0 @b", "bold")  # its node; runs waiting: bold
