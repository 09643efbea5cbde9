"""The journal read behind ``ControlPlane.pulse``: a process's runs, failures, run times,
tokens and cost by the minute over a window. A SQLite journal groups them in SQL (one row per
minute and type, one per run whose start was journaled), so an hour of a busy process does not
ship every entry; other journals are read entry by entry (capped) and folded here."""

from __future__ import annotations

import dataclasses
from typing import Any

from runtime_core.control.pulse import FAILED_STATES, PulseBuckets, PulseView
from runtime_core.journal.entry import EntryType
from runtime_core.journal.left_out import sqlite_carries_start
from runtime_core.journal.provider import JournalProvider, ReadFilter
from runtime_core.journal.run_key import key_expression
from runtime_core.journal.sqlite.journal import SQLiteJournal

#: A journal without the SQL read is folded from at most this many entries of each type.
FOLD_LIMIT = 50_000

_FAILED = ", ".join(f"'{state}'" for state in sorted(FAILED_STATES))
# Per minute and type: entries, failures among run ends, tokens (a usage entry's own, those a
# tool intent or a run end carries (schema 7 on), or those a run end folded in when its start
# was never written), cost when an entry recorded one.
_CARRIED = "(SELECT SUM({term}) FROM json_each(data, '$.usage') AS u)"
_FOLDED = "(SELECT SUM({term}) FROM json_each(data, '$.started.usage') AS u)"
_TOKENS = ("COALESCE(json_extract(u.value, '$.input_tokens'), 0) "
           "+ COALESCE(json_extract(u.value, '$.output_tokens'), 0)")
_COST = "json_extract(u.value, '$.cost')"
_GROUPED = f"""
SELECT CAST(ts / ? AS INTEGER) AS minute, entry_type, COUNT(*),
       SUM(CASE WHEN json_extract(data, '$.state') IN ({_FAILED}) THEN 1 ELSE 0 END),
       SUM(COALESCE(json_extract(data, '$.input_tokens'), 0)
           + COALESCE(json_extract(data, '$.output_tokens'), 0)
           + COALESCE({_FOLDED.format(term=_TOKENS)}, 0)
           + COALESCE({_CARRIED.format(term=_TOKENS)}, 0)),
       SUM(COALESCE(json_extract(data, '$.cost'), {_FOLDED.format(term=_COST)},
                    {_CARRIED.format(term=_COST)}))
FROM entries
WHERE process = ? AND ts >= ? AND entry_type IN ('{EntryType.RUN_FINISHED}',
                                                 '{EntryType.MODEL_USAGE}',
                                                 '{EntryType.TOOL_INTENT}')
GROUP BY minute, entry_type
"""
# A run time is known for a run whose start was written before its end (the end minus the
# start): as its own entry, or carried by its first tool intent.
_DURATIONS = f"""
SELECT f.ts, (f.ts - s.ts) * 1000.0
FROM entries AS f JOIN entries AS s
  ON {key_expression('s.run_id')} = {key_expression('f.run_id')} AND s.run_id = f.run_id
  AND s.process = f.process AND (s.entry_type = '{EntryType.RUN_STARTED}' OR (
    s.entry_type = '{EntryType.TOOL_INTENT}' AND {sqlite_carries_start('s')}))
WHERE f.process = ? AND f.ts >= ? AND f.entry_type = '{EntryType.RUN_FINISHED}'
"""


async def read_pulse(journal: JournalProvider, process: str, now: float, window: int,
                     bucket: int) -> PulseView:
    """``process``'s minutes over the ``window`` seconds ending at ``now``."""
    buckets = PulseBuckets(process, window=window, bucket=bucket)
    since = (int(now // bucket) - window // bucket + 1) * bucket
    if isinstance(journal, SQLiteJournal):
        await _grouped(journal, buckets, since)
    else:
        await _folded(journal, buckets, since)
    return buckets.view(now)


async def _grouped(journal: SQLiteJournal, buckets: PulseBuckets, since: float) -> None:
    rows: list[Any] = await journal._fetch(_GROUPED, (buckets.bucket, buckets.process, since))
    for minute, entry_type, count, failures, tokens, cost in rows:
        ts = float(minute * buckets.bucket)
        if entry_type == EntryType.RUN_FINISHED:
            buckets.run(ts, "", count=int(count), failures=int(failures or 0))
        if tokens or cost is not None:
            buckets.usage(ts, int(tokens or 0), None if cost is None else float(cost))
    for ts, duration_ms in await journal._fetch(_DURATIONS, (buckets.process, since)):
        buckets.duration(float(ts), float(duration_ms))


async def _folded(journal: JournalProvider, buckets: PulseBuckets, since: float) -> None:
    starts: dict[str, float] = {}
    for entry_type in (EntryType.RUN_STARTED, EntryType.MODEL_USAGE, EntryType.RUN_FINISHED):
        entries = await journal.read(ReadFilter(process=buckets.process, entry_type=entry_type,
                                                since_time=since, limit=FOLD_LIMIT))
        for entry in entries:
            data = entry.data
            if entry_type == EntryType.RUN_STARTED:
                if entry.run_id:
                    starts[entry.run_id] = entry.timestamp
                continue
            if entry_type == EntryType.MODEL_USAGE:  # with those intents and ends carry
                buckets.usage(entry.timestamp, _tokens(data), _cost(data))
                continue
            started = starts.get(entry.run_id or "")
            took = (entry.timestamp - started) * 1000.0 if started is not None else None
            buckets.run(entry.timestamp, str(data.get("state", "")), took)


def _tokens(data: Any) -> int:
    if not isinstance(data, dict):
        return 0
    return int(data.get("input_tokens") or 0) + int(data.get("output_tokens") or 0)


def _cost(data: Any) -> float | None:
    cost = data.get("cost") if isinstance(data, dict) else None
    return float(cost) if isinstance(cost, int | float) else None


def pulse_json(view: PulseView) -> dict[str, Any]:
    """The view as the HTTP API answers it."""
    return dataclasses.asdict(view)
