"""How long a journal's group commits take: a histogram's buckets, sum and count, kept by the
journal and read by ``/metrics`` (runtime_core/api/metrics.py) at scrape time. The writer
observes one duration per committed batch; an observe is a bisect and three additions under a
lock (a few hundred ns), cheap next to the commit's fsync."""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

#: Upper bounds in seconds: an fsync on an SSD is ~0.1-5 ms, a network commit a few ms,
#: a stalled disk or server seconds.
COMMIT_BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                     0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True, slots=True)
class CommitTimesSnapshot:
    """The histogram at one moment: per-bucket counts (not cumulative; the last one counts
    what was over every bound), the sum of the durations in seconds and their count."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    total_seconds: float
    count: int


class CommitTimes:
    """The commit durations of one journal. The writer (a thread or a task) observes; any
    thread may take a snapshot."""

    def __init__(self, bounds: tuple[float, ...] = COMMIT_BUCKETS) -> None:
        self._bounds = bounds
        self._counts = [0] * (len(bounds) + 1)
        self._sum = 0.0
        self._count = 0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        """Count one committed batch that took ``seconds``."""
        at = bisect.bisect_left(self._bounds, seconds)
        with self._lock:
            self._counts[at] += 1
            self._sum += seconds
            self._count += 1

    def snapshot(self) -> CommitTimesSnapshot:
        """A consistent copy of the histogram."""
        with self._lock:
            return CommitTimesSnapshot(self._bounds, tuple(self._counts), self._sum,
                                       self._count)
