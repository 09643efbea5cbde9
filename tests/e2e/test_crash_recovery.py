"""SIGKILL a journaled runtime at named crash points and at random, then check what survived.

After every restart: no acknowledged event is lost, no write ran twice for one idempotency key,
the context counter equals what the ledger implies, and a run caught mid-write waits with
``unknown_write_outcome`` until it is reconciled.

PROMPTUI_SOAK_KILLS sets how many times the random soak kills the runtime (default 25; the MCP
soak kills a third as often, at least 8): the defaults keep the suite under ten minutes on two
cores; a larger value soaks longer.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SOAK_KILLS = int(os.environ.get("PROMPTUI_SOAK_KILLS", "25"))
MCP_SOAK_KILLS = max(8, SOAK_KILLS // 3)


@dataclass
class WorkerResult:
    returncode: int
    acks: list[str] = field(default_factory=list)
    ready: dict[str, Any] | None = None
    idle: dict[str, Any] | None = None


async def run_worker(
    tmp: Path, *, inject: int = 0, prefix: str = "ev", crash: str | None = None,
    reconcile: bool = False, kill_after: float | None = None, timeout: float = 60.0,
    mcp: bool = False, reply_only: bool = False, kill_after_an_ack: bool = False,
) -> WorkerResult:
    """Run the crash worker; with ``kill_after``, SIGKILL it that long after it is ready
    (with ``kill_after_an_ack``, that long after its first acknowledgement if none had come by
    then, so every incarnation accepts work before it dies)."""
    env = dict(os.environ)
    env.pop("PROMPTUI_CRASH_AT", None)
    if crash is not None:
        env["PROMPTUI_CRASH_AT"] = crash
    cmd = [sys.executable, "-m", "tests.helpers.workers.crash_worker",
           "--db", str(tmp / "journal.db"), "--ledger", str(tmp / "ledger.txt"),
           "--inject", str(inject), "--prefix", prefix]
    if reconcile:
        cmd.append("--reconcile")
    if mcp:
        cmd.append("--mcp")
    if reply_only:
        cmd.append("--reply-only")
    if kill_after is None:
        cmd.append("--exit-when-idle")
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    result = WorkerResult(returncode=0)
    assert proc.stdout is not None
    loop = asyncio.get_running_loop()
    ready_at = [float("inf")]

    def kill_when_due() -> None:
        if kill_after_an_ack and not result.acks:
            return  # the first acknowledgement schedules the kill instead
        _kill(proc)

    async def read_lines() -> None:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            if not raw.endswith(b"\n"):
                continue  # a line cut short by the kill: it was never fully said
            line = raw.decode().strip()
            kind, _, rest = line.partition(" ")
            if kind == "ACK":
                result.acks.append(rest)
                if kill_after is not None and kill_after_an_ack and len(result.acks) == 1 \
                        and loop.time() >= ready_at[0] + kill_after:
                    loop.call_later(kill_after, _kill, proc)
            elif kind == "READY":
                result.ready = json.loads(rest)
                if kill_after is not None:
                    ready_at[0] = loop.time()
                    loop.call_later(kill_after, kill_when_due)
            elif kind == "IDLE":
                result.idle = json.loads(rest)

    try:
        await asyncio.wait_for(asyncio.gather(read_lines(), proc.wait()), timeout)
    except TimeoutError:
        _kill(proc)
        await proc.wait()
        pytest.fail(f"crash worker did not finish within {timeout}s")
    assert proc.stderr is not None
    stderr = (await proc.stderr.read()).decode()
    result.returncode = proc.returncode if proc.returncode is not None else 0
    if result.returncode not in (0, -signal.SIGKILL):
        pytest.fail(f"crash worker failed ({result.returncode}):\n{stderr}")
    return result


def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGKILL)


def ledger(tmp: Path) -> list[str]:
    path = tmp / "ledger.txt"
    if not path.exists():
        return []
    return [line for line in path.read_text().splitlines() if line]


def journal_facts(tmp: Path) -> dict[str, Any]:
    conn = sqlite3.connect(tmp / "journal.db")
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        succeeded = [row[0] for row in conn.execute(
            "SELECT json_extract(data, '$.event_id') FROM entries WHERE process = 'crashy' "
            "AND entry_type = 'run_finished' AND json_extract(data, '$.state') = 'succeeded'")]
        applied = conn.execute(
            "SELECT count(*) FROM entries WHERE entry_type = 'reconciled' "
            "AND json_extract(data, '$.outcome') = 'applied'").fetchone()[0]
        seqs = [row[0] for row in conn.execute(
            "SELECT seq FROM entries WHERE process = 'crashy' ORDER BY seq")]
    finally:
        conn.close()
    return {"integrity": integrity, "succeeded": succeeded, "applied": applied, "seqs": seqs}


def check_invariants(tmp: Path, acked: list[str], final: WorkerResult, *, mcp: bool = False,
                     reply_only: bool = False) -> dict[str, Any]:
    """The final run reconciled everything and ran until idle; check what survived."""
    assert final.idle is not None, "the final run never became idle"
    facts = journal_facts(tmp)
    assert facts["integrity"] == "ok"
    assert facts["seqs"] == list(range(1, len(facts["seqs"]) + 1)), "gap or duplicate seq"
    lines = ledger(tmp)
    keys = [line.split()[0] for line in lines]
    assert len(keys) == len(set(keys)), f"a write ran twice for one key: {sorted(keys)}"
    events = [line.split()[1] for line in lines]
    assert len(events) == len(set(events)), "one event's write ran twice"
    succeeded = facts["succeeded"]
    assert len(succeeded) == len(set(succeeded)), "an event succeeded twice"
    dead = {d["event_id"] for d in final.idle["dead_letters"]}
    missing = [e for e in acked if e not in set(succeeded) and e not in dead]
    assert not missing, f"acknowledged events lost: {missing}"
    assert final.idle["waiting"] == []
    if mcp or reply_only:  # an MCP tool cannot write the context: the ledger is the record
        return facts
    assert final.idle["count"] == len(lines) - facts["applied"], (
        "context counter does not match the ledger", final.idle["count"], len(lines),
        facts["applied"])
    return facts


TOOL_KINDS = pytest.mark.parametrize("mcp", [False, True], ids=["python-tool", "mcp-tool"])


@TOOL_KINDS
@pytest.mark.parametrize("point", ["event_acknowledged", "tool_result", "run_end",
                                   "group_commit"])
async def test_named_crash_point_loses_nothing_and_repeats_no_write(
    tmp_path: Path, point: str, mcp: bool
) -> None:
    crashed = await run_worker(tmp_path, inject=6, prefix="a", crash=f"{point}:3", mcp=mcp)
    assert crashed.returncode == -signal.SIGKILL, f"{point} was never reached"
    restarted = await run_worker(tmp_path, inject=2, prefix="b", reconcile=True, mcp=mcp)
    assert restarted.ready is not None and restarted.ready["lifecycle_state"] != "stopped"
    check_invariants(tmp_path, crashed.acks + restarted.acks, restarted, mcp=mcp)


@pytest.mark.parametrize("reply_only", [False, True], ids=["write-tool", "reply-only"])
@pytest.mark.parametrize("point", ["model_turn", "run_end_submitted"])
async def test_crash_where_nothing_waited_loses_no_acknowledged_event(
    tmp_path: Path, point: str, reply_only: bool
) -> None:
    """The points where entries are submitted without waiting (a model turn held or submitted,
    a run's end submitted before it is durable): a kill there loses only what nobody outside
    saw. Every acknowledged event still runs to success exactly once, no write runs twice,
    and the recovered state is the journal's (the context counter matches the ledger)."""
    crashed = await run_worker(tmp_path, inject=6, prefix="a", crash=f"{point}:3",
                               reply_only=reply_only)
    assert crashed.returncode == -signal.SIGKILL, f"{point} was never reached"
    restarted = await run_worker(tmp_path, inject=2, prefix="b", reconcile=True,
                                 reply_only=reply_only)
    assert restarted.ready is not None
    facts = check_invariants(tmp_path, crashed.acks + restarted.acks, restarted,
                             reply_only=reply_only)
    # Every acknowledged event succeeded once (one accepted and not yet acknowledged when the
    # kill came may have run too: it was durable, so it was not lost either).
    assert set(crashed.acks + restarted.acks) <= set(facts["succeeded"])
    assert restarted.idle is not None
    assert restarted.idle["invocation_count"] == len(facts["succeeded"])


@TOOL_KINDS
async def test_crash_after_a_write_intent_parks_the_run_until_reconciled(
    tmp_path: Path, mcp: bool
) -> None:
    crashed = await run_worker(tmp_path, inject=4, prefix="a", crash="tool_intent:2", mcp=mcp)
    assert crashed.returncode == -signal.SIGKILL
    # The intent of the 2nd write is durable, the tool never ran: its outcome is unknown.
    parked = await run_worker(tmp_path, mcp=mcp)
    assert parked.idle is not None
    waiting = parked.idle["waiting"]
    assert len(waiting) == 1
    assert waiting[0]["reason"] == "unknown_write_outcome"
    assert waiting[0]["tool"] == "record"
    assert waiting[0]["idempotency_key"] not in {line.split()[0] for line in ledger(tmp_path)}
    if mcp:  # the intent says where the tool lives
        assert waiting[0]["mcp_server"] == "ledger"
    # Not dispatched again on its own: still waiting after another restart.
    again = await run_worker(tmp_path, mcp=mcp)
    assert again.idle is not None and len(again.idle["waiting"]) == 1
    # Reconciled (not applied, per the ledger) it continues and succeeds.
    final = await run_worker(tmp_path, reconcile=True, mcp=mcp)
    assert final.idle is not None
    assert [r["outcome"] for r in final.idle["reconciled"]] == ["not_applied"]
    check_invariants(tmp_path, crashed.acks, final, mcp=mcp)


@TOOL_KINDS
async def test_a_write_that_ran_before_the_crash_is_reconciled_as_applied(
    tmp_path: Path, mcp: bool
) -> None:
    # Crash after the 2nd write ran but before its result was journaled: kill inside the
    # group commit that carries the result (the tool_result entry is the durable one).
    crashed = await run_worker(tmp_path, inject=3, prefix="a", crash="tool_result:2", mcp=mcp)
    assert crashed.returncode == -signal.SIGKILL
    final = await run_worker(tmp_path, reconcile=True, mcp=mcp)
    facts = check_invariants(tmp_path, crashed.acks, final, mcp=mcp)
    assert len(ledger(tmp_path)) == 3 and facts["applied"] == 0


@TOOL_KINDS
async def test_a_crash_before_a_write_result_commits_parks_the_run_and_repeats_no_write(
    tmp_path: Path, mcp: bool
) -> None:
    """The window between a write's return and the commit that carries its result (with the
    run's end, issue 37): the write took effect, its result is not durable. The run waits
    with unknown_write_outcome, as after a crash inside the tool, and is never run again;
    reconciled as applied (per the ledger), it goes on."""
    crashed = await run_worker(tmp_path, inject=3, prefix="a", crash="tool_returned:2", mcp=mcp)
    assert crashed.returncode == -signal.SIGKILL, "tool_returned was never reached"
    parked = await run_worker(tmp_path, mcp=mcp)
    assert parked.idle is not None
    waiting = parked.idle["waiting"]
    assert [w["reason"] for w in waiting] == ["unknown_write_outcome"]
    assert waiting[0]["idempotency_key"] in {line.split()[0] for line in ledger(tmp_path)}
    final = await run_worker(tmp_path, reconcile=True, mcp=mcp)
    facts = check_invariants(tmp_path, crashed.acks, final, mcp=mcp)
    # The third event may not have been accepted yet when the second write's return killed
    # the worker (a loaded machine): then it never existed, and the ledger has two lines.
    assert len(ledger(tmp_path)) in (2, 3) and len(ledger(tmp_path)) >= len(crashed.acks)
    assert facts["applied"] == 1


async def test_random_sigkill_soak(tmp_path: Path) -> None:
    """SOAK_KILLS kills at seeded random moments under load; nothing acknowledged is lost."""
    rng = random.Random(20261202)
    acked: list[str] = []
    kills = 0
    for i in range(SOAK_KILLS):
        result = await run_worker(tmp_path, inject=4, prefix=f"s{i}", reconcile=True,
                                  kill_after=rng.uniform(0.0, 0.08))
        acked.extend(result.acks)
        kills += result.returncode == -signal.SIGKILL
    assert kills >= SOAK_KILLS
    final = await run_worker(tmp_path, reconcile=True)
    facts = check_invariants(tmp_path, acked, final)
    assert len(acked) > SOAK_KILLS  # the runtime made progress between kills
    assert len(facts["succeeded"]) >= len(acked)
    print(f"soak: {kills} kills, {len(acked)} acknowledged, {len(facts['succeeded'])} succeeded, "
          f"{facts['applied']} reconciled as applied, {len(ledger(tmp_path))} writes")


async def test_random_sigkill_soak_with_an_mcp_write_tool(tmp_path: Path) -> None:
    """The same soak, shorter, with the write going through an MCP stdio server: a kill can
    land while the server is mid-write; nothing is written twice and nothing is lost."""
    rng = random.Random(20261203)
    acked: list[str] = []
    kills = 0
    for i in range(MCP_SOAK_KILLS):
        result = await run_worker(tmp_path, inject=4, prefix=f"m{i}", reconcile=True,
                                  kill_after=rng.uniform(0.0, 0.15), mcp=True,
                                  kill_after_an_ack=True)
        acked.extend(result.acks)
        kills += result.returncode == -signal.SIGKILL
    assert kills >= MCP_SOAK_KILLS
    final = await run_worker(tmp_path, reconcile=True, mcp=True)
    facts = check_invariants(tmp_path, acked, final, mcp=True)
    assert len(acked) > MCP_SOAK_KILLS
    assert len(facts["succeeded"]) >= len(acked)
    print(f"mcp soak: {kills} kills, {len(acked)} acknowledged, {len(facts['succeeded'])} "
          f"succeeded, {facts['applied']} reconciled as applied, {len(ledger(tmp_path))} writes")
