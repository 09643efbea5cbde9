"""A stateful property test of SQLiteJournal against a plain in-memory model.

The model is an independent re-statement of the journal's contract: a list of entries (seq 1, 2,
3... per process) plus the three indexes (pending events, dead letters, open runs). Every rule
appends to the real journal and applies the same change to the model; after every step the whole
log, every index and the newest checkpoint must match. "Crash and reopen" closes the journal and
opens a new SQLiteJournal on the same file: everything appended must still be there, and seq
numbering must carry on.
"""

from __future__ import annotations

import asyncio
import copy
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from runtime_core.journal import (
    EntryType,
    JournalEntry,
    OpenRun,
    ReadFilter,
    SQLiteJournal,
    StoredDeadLetter,
)

pytestmark = pytest.mark.slow

PROCESSES = ("alpha", "beta")
EVENT_IDS = tuple(f"e{i}" for i in range(5))  # a small pool, so ids collide and get reused
ENTRY_TYPES = (
    EntryType.EVENT_ACCEPTED, EntryType.RUN_STARTED, EntryType.RUN_WAITING, EntryType.RECONCILED,
    EntryType.RUN_FINISHED, EntryType.DEAD_LETTERED, EntryType.REDELIVERED,
    EntryType.DEAD_LETTERS_CLEARED, EntryType.CHECKPOINT, "note",
)

processes = st.sampled_from(PROCESSES)
event_ids = st.sampled_from(EVENT_IDS)


class Model:
    """What the journal should hold: the log and, per process, the three indexes."""

    def __init__(self) -> None:
        self.log: list[dict[str, Any]] = []  # to_dict() of every entry, in commit order
        self.pending: dict[str, dict[str, dict[str, Any]]] = {p: {} for p in PROCESSES}
        self.dead: dict[str, dict[str, StoredDeadLetter]] = {p: {} for p in PROCESSES}
        self.runs: dict[str, dict[str, OpenRun]] = {p: {} for p in PROCESSES}

    def next_seq(self, process: str) -> int:
        return sum(1 for e in self.log if e["process"] == process) + 1

    def apply(self, entry: JournalEntry, attachment: Any) -> None:
        p, data, kind = entry.process, entry.data, entry.entry_type
        assert entry.seq == self.next_seq(p), (entry.seq, self.next_seq(p))
        self.log.append(copy.deepcopy(entry.to_dict()))
        pending, dead, runs = self.pending[p], self.dead[p], self.runs[p]
        if kind == EntryType.EVENT_ACCEPTED:
            pending.pop(attachment["event_id"], None)  # re-accepting moves it to the back
            pending[attachment["event_id"]] = copy.deepcopy(attachment)
        elif kind == EntryType.RUN_STARTED:
            assert entry.run_id is not None
            runs[entry.run_id] = OpenRun(entry.run_id, data["event_id"], data.get("attempt", 1),
                                         "running", entry.seq)
        elif kind in (EntryType.RUN_WAITING, EntryType.RECONCILED):
            run = runs.get(entry.run_id or "")
            if run is not None:
                state = "waiting" if kind == EntryType.RUN_WAITING else "running"
                runs[run.run_id] = OpenRun(run.run_id, run.event_id, run.attempt, state,
                                           run.started_seq)
        elif kind == EntryType.RUN_FINISHED:
            runs.pop(entry.run_id or "", None)
            # event_done as written, else the run's state (schema 8 leaves it out when it
            # says what the state does)
            if data.get("event_done", data.get("state") == "succeeded"):
                pending.pop(data["event_id"], None)
        elif kind == EntryType.DEAD_LETTERED:
            event_id = data["event_id"]
            pending.pop(event_id, None)
            dead.pop(event_id, None)
            dead[event_id] = StoredDeadLetter(copy.deepcopy(attachment), data.get("reason", ""),
                                              data.get("error", ""), data.get("attempts", 0),
                                              entry.timestamp)
            if "keep" in data:
                while len(dead) > data["keep"]:
                    del dead[next(iter(dead))]  # the oldest goes first
        elif kind == EntryType.REDELIVERED:
            for event_id in data["event_ids"]:
                if event_id in dead:
                    letter = dead.pop(event_id)
                    pending.pop(event_id, None)
                    pending[event_id] = letter.event
        elif kind == EntryType.DEAD_LETTERS_CLEARED:
            if data.get("event_ids") is None:
                dead.clear()
            else:
                for event_id in data["event_ids"]:
                    dead.pop(event_id, None)

    def read(self, f: ReadFilter) -> list[dict[str, Any]]:
        out = [
            e for e in self.log
            if (f.process is None or e["process"] == f.process)
            and (f.entry_type is None or e["entry_type"] == f.entry_type)
            and (f.run_id is None or e["run_id"] == f.run_id)
            and (f.since_seq is None or e["seq"] > f.since_seq)
            and (f.since_time is None or e["timestamp"] >= f.since_time)
        ]
        if f.newest_first:
            out.reverse()
        return out if f.limit is None else out[: f.limit]

    def last_checkpoint(self, process: str) -> dict[str, Any] | None:
        for e in reversed(self.log):
            if e["process"] == process and e["entry_type"] == EntryType.CHECKPOINT:
                return e
        return None


class JournalMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp(prefix="journal-model-"))
        self.path = self.dir / "journal.db"
        self.journal: SQLiteJournal | None = None
        self.journal = self.run(self._open())
        self.model = Model()
        self.counter = 0

    # -- plumbing ----------------------------------------------------------------------------------
    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)

    async def _open(self) -> SQLiteJournal:
        journal = SQLiteJournal(self.path)
        await journal.open()
        assert journal.damage is None
        return journal

    @property
    def j(self) -> SQLiteJournal:
        assert self.journal is not None
        return self.journal

    def teardown(self) -> None:
        try:
            if self.journal is not None:
                self.run(self.journal.close())
        finally:
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def next_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def append(self, process: str, entry_type: str, data: dict[str, Any],
               run_id: str | None = None, attachment: Any = None) -> JournalEntry:
        entry = JournalEntry(process=process, entry_type=entry_type, data=data, run_id=run_id,
                             process_id=f"pid-{process}")
        returned = self.run(self.j.append(entry, attachment=attachment))
        assert returned is entry
        self.model.apply(entry, attachment)
        return entry

    # -- rules -------------------------------------------------------------------------------------
    @rule(process=processes, event_id=event_ids, n=st.integers(0, 9))
    def accept_event(self, process: str, event_id: str, n: int) -> None:
        event = {"event_id": event_id, "payload": {"n": n, "k": self.next_id("k")}}
        self.append(process, EntryType.EVENT_ACCEPTED, {"event_id": event_id}, attachment=event)

    @rule(process=processes, event_id=event_ids, attempt=st.none() | st.integers(1, 3),
          data=st.data())
    def start_run(self, process: str, event_id: str, attempt: int | None,
                  data: st.DataObject) -> None:
        # usually a new run; sometimes a run id that is already open (restarted in place)
        run_id = data.draw(st.sampled_from([self.next_id("r"), *self.model.runs[process]]))
        payload: dict[str, Any] = {"event_id": event_id}
        if attempt is not None:
            payload["attempt"] = attempt
        self.append(process, EntryType.RUN_STARTED, payload, run_id=run_id)

    def _some_run(self, process: str, data: st.DataObject) -> str:
        return data.draw(st.sampled_from([*self.model.runs[process], "ghost-run"]))

    @rule(process=processes, data=st.data())
    def run_waiting(self, process: str, data: st.DataObject) -> None:
        self.append(process, EntryType.RUN_WAITING, {}, run_id=self._some_run(process, data))

    @rule(process=processes, data=st.data())
    def reconcile(self, process: str, data: st.DataObject) -> None:
        self.append(process, EntryType.RECONCILED, {}, run_id=self._some_run(process, data))

    @rule(process=processes, event_done=st.none() | st.booleans(), fallback=event_ids,
          state=st.none() | st.sampled_from(["succeeded", "failed"]), data=st.data())
    def finish_run(self, process: str, event_done: bool | None, fallback: str,
                   state: str | None, data: st.DataObject) -> None:
        run_id = self._some_run(process, data)
        run = self.model.runs[process].get(run_id)
        payload: dict[str, Any] = {"event_id": run.event_id if run else fallback}
        if state is not None:
            payload["state"] = state
        if event_done is not None:
            payload["event_done"] = event_done
        self.append(process, EntryType.RUN_FINISHED, payload, run_id=run_id)

    @rule(process=processes, event_id=event_ids, keep=st.none() | st.integers(0, 4),
          attempts=st.integers(0, 5))
    def dead_letter(self, process: str, event_id: str, keep: int | None, attempts: int) -> None:
        event = self.model.pending[process].get(event_id) or {"event_id": event_id, "fresh": True}
        payload: dict[str, Any] = {"event_id": event_id, "reason": f"reason-{attempts}",
                                   "error": "Boom", "attempts": attempts}
        if keep is not None:
            payload["keep"] = keep
        self.append(process, EntryType.DEAD_LETTERED, payload, attachment=event)

    @rule(process=processes, ids=st.lists(event_ids, max_size=4))
    def redeliver(self, process: str, ids: list[str]) -> None:
        self.append(process, EntryType.REDELIVERED, {"event_ids": ids})

    @rule(process=processes, ids=st.none() | st.lists(event_ids, max_size=3))
    def clear_dead_letters(self, process: str, ids: list[str] | None) -> None:
        self.append(process, EntryType.DEAD_LETTERS_CLEARED,
                    {} if ids is None else {"event_ids": ids})

    @rule(process=processes, n=st.integers(0, 100))
    def checkpoint(self, process: str, n: int) -> None:
        self.append(process, EntryType.CHECKPOINT, {"state": {"n": n}, "id": self.next_id("c")})

    @rule(batch=st.lists(st.tuples(processes, st.integers(0, 9)), min_size=1, max_size=8),
          flush=st.booleans())
    def submit_burst(self, batch: list[tuple[str, int]], flush: bool) -> None:
        """Several producers' entries queued at once; they commit together, in order."""
        entries = [JournalEntry(process=p, entry_type="note", data={"n": n}) for p, n in batch]

        async def submit_all() -> list[asyncio.Future[None]]:
            futures = [self.j.submit(e) for e in entries]  # submit needs the running loop
            assert all(e.seq > 0 for e in entries)  # assigned at submission
            if flush:
                await self.j.flush()
            else:
                await futures[-1]  # the last one being durable covers the rest
            return futures

        futures = self.run(submit_all())
        assert all(f.done() and f.exception() is None for f in futures)
        for entry in entries:
            self.model.apply(entry, None)

    @rule(same_object=st.booleans())
    def crash_and_reopen(self, same_object: bool) -> None:
        """Close, then open the file again: usually with a brand-new SQLiteJournal, sometimes by
        reopening the closed object."""
        journal = self.j
        self.run(journal.close())
        self.journal = None
        if same_object:
            self.run(journal.open())
            assert journal.damage is None
            self.journal = journal
        else:
            self.journal = self.run(self._open())

    @rule(process=st.none() | processes, entry_type=st.none() | st.sampled_from(ENTRY_TYPES),
          since_seq=st.none() | st.integers(0, 30), limit=st.none() | st.integers(0, 6),
          newest_first=st.booleans(), data=st.data())
    def random_read(self, process: str | None, entry_type: str | None, since_seq: int | None,
                    limit: int | None, newest_first: bool, data: st.DataObject) -> None:
        run_ids = sorted({e["run_id"] for e in self.model.log if e["run_id"] is not None})
        times = [e["timestamp"] for e in self.model.log]
        f = ReadFilter(
            process=process,
            entry_type=entry_type,
            run_id=data.draw(st.none() | st.sampled_from([*run_ids, "no-such-run"])),
            since_seq=since_seq,
            since_time=data.draw(st.none() | st.sampled_from(times)) if times else None,
            limit=limit,
            newest_first=newest_first,
        )
        got = [e.to_dict() for e in self.run(self.j.read(f))]
        assert got == self.model.read(f), f

    # -- invariants --------------------------------------------------------------------------------
    @invariant()
    def seqs_are_contiguous_per_process(self) -> None:
        for p in PROCESSES:
            seqs = [e.seq for e in self.run(self.j.read(ReadFilter(process=p)))]
            assert seqs == list(range(1, len(seqs) + 1)), (p, seqs)

    @invariant()
    def log_matches_model(self) -> None:
        got = [e.to_dict() for e in self.run(self.j.read(ReadFilter()))]
        assert got == self.model.log
        used = sorted({e["process"] for e in self.model.log})
        assert self.run(self.j.processes()) == used

    @invariant()
    def indexes_match_model(self) -> None:
        for p in PROCESSES:
            assert self.run(self.j.pending_events(p)) == list(self.model.pending[p].values()), p
            assert self.run(self.j.dead_letters(p)) == list(self.model.dead[p].values()), p
            expected_runs = sorted(self.model.runs[p].values(), key=lambda r: r.started_seq)
            assert self.run(self.j.open_runs(p)) == expected_runs, p

    @invariant()
    def last_checkpoint_matches_model(self) -> None:
        for p in PROCESSES:
            got = self.run(self.j.last_checkpoint(p))
            assert (got.to_dict() if got else None) == self.model.last_checkpoint(p), p


JournalMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestJournalModel = JournalMachine.TestCase
