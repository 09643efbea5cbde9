"""A served runtime killed mid-write (SIGKILL right after a write tool's intent is durable):
the next 'promptui serve' holds the run waiting with unknown_write_outcome, and an operator
settles it over the HTTP API; the write is not done twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.polling import poll
from tests.helpers.serving import WRITER, WRITER_TOOLS, start_serve

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("outcome", "final"), [
    ("applied", "succeeded"),  # the model sees the operator's result as the tool's output
    ("not_applied", "succeeded"),  # the model is told it did not happen, and goes on
    ("failed", "failed"),  # the run fails with the operator's reason
])
def test_a_run_killed_mid_write_is_reconciled_over_the_api(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outcome: str, final: str) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "writer.agent").write_text(WRITER)
    (agents / "ledger_tools.py").write_text(WRITER_TOOLS)
    args = (str(agents), "--journal", str(tmp_path / "journal.db"))

    monkeypatch.setenv("PROMPTUI_CRASH_AT", "tool_intent:1")
    doomed = start_serve(tmp_path, *args)
    answer = doomed.client().post("/processes/writer/inject", json={"payload": {"ref": "P-1"}})
    assert answer.status_code == 202
    assert doomed.proc.wait(30) == -9  # SIGKILL at the write's intent, before the tool ran
    monkeypatch.delenv("PROMPTUI_CRASH_AT")

    server = start_serve(tmp_path, *args, log_name="serve2.log")
    client = server.client()
    waiting = poll(lambda: client.get("/processes/writer/runs",
                                      params={"state": "waiting"}).json(),
                   what="the run waiting for an operator")
    [run] = waiting
    assert run["waiting_reason"] == "unknown_write_outcome"
    detail = poll(lambda: (lambda r: r.json() if r.status_code == 200 else None)(
        client.get(f"/processes/writer/runs/{run['run_id']}/waiting")),
        what="the waiting run's detail")
    assert "book_payment" in str(detail)
    settled = client.post(f"/processes/writer/runs/{run['run_id']}/reconcile",
                          json={"outcome": outcome, "result": "booked P-1 (checked by hand)",
                                "note": "checked in the bank's statement"})
    assert settled.status_code == 200, settled.text
    done = poll(lambda: [r for r in client.get("/processes/writer/runs").json()
                         if r["run_id"] == run["run_id"] and r["state"] == final],
                what=f"the reconciled run {final}")
    assert done
    # Never re-dispatched blindly: whatever the outcome, the tool did not run again.
    assert not (tmp_path / "ledger.txt").exists()
    entries = client.get("/processes/writer/journal", params={"limit": 100}).json()
    assert any(e["entry_type"] == "run_waiting" for e in entries)
    [settlement] = [e for e in entries if e["entry_type"] == "reconciled"]
    assert outcome in settlement["summary"]
    assert server.stop() == 0, server.stderr()
