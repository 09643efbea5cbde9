"""Behavioral health: spot an agent that runs but no longer does useful work.

Pure pattern matching over the tool calls, final replies and run outcomes a process records; no
LLM calls. Four detectors: stuck (same call over and over), loop (a sequence of calls repeating
back to back), empty_response (trivial final replies in a row) and high_error_rate (share of
failed runs over a full window). A per-anomaly cooldown keeps a persistent problem from being
reported on every call. The monitor only detects; the process decides what to do with it.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any, ClassVar, Protocol

from runtime_core.clock import SystemClock
from runtime_core.governance.config import EscalationTarget, HealthConfig

__all__ = [
    "Anomaly",
    "AnomalyType",
    "EscalationTarget",
    "HealthConfig",
    "HealthMonitor",
    "args_hash",
]

class AnomalyType(str, Enum):
    """The kinds of behavioral anomaly the health monitor reports: ``stuck`` (the same tool
    call repeated in one run), ``loop`` (a repeating sequence of calls), ``empty_response``
    (trivial final replies in a row) and ``high_error_rate`` (failed runs over the error
    window)."""

    STUCK = "stuck"
    LOOP = "loop"
    EMPTY_RESPONSE = "empty_response"
    HIGH_ERROR_RATE = "high_error_rate"


@dataclass
class Anomaly:
    """One behavioral anomaly the health monitor found: its ``anomaly_type``, a
    ``description`` an operator can read, when (UTC), and the evidence in ``details`` (e.g.
    ``tool_name`` and ``consecutive_count`` for stuck)."""

    anomaly_type: AnomalyType
    description: str
    timestamp: datetime
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.anomaly_type.value,
            "description": self.description,
            "timestamp": self.timestamp.isoformat(),
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Anomaly:
        return cls(
            anomaly_type=AnomalyType(data["type"]),
            description=str(data["description"]),
            timestamp=datetime.fromisoformat(data["timestamp"]),
            details=dict(data.get("details") or {}),
        )


class TimeSource(Protocol):
    """What the monitor needs from a clock (``runtime_core.clock.Clock`` satisfies it)."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...


_EMPTY_ARGS_HASH = hashlib.md5(b"{}", usedforsecurity=False).hexdigest()[:12]
# Separates tool name and args hash in a call key; a hash never contains it.
_SEP = "\x00"


def args_hash(args: Any) -> str:
    """Stable 12-hex-digit hash of tool arguments (key order does not matter)."""
    if not args:
        # Common case (no arguments) without encoding; {} and None hash alike on purpose.
        return _EMPTY_ARGS_HASH
    try:
        encoded = json.dumps(
            args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        )
    except (TypeError, ValueError):
        # Mixed-type keys cannot be sorted, or a circular structure: fall back to repr.
        encoded = repr(args)
    return hashlib.md5(encoded.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()[
        :12
    ]


def _split_key(key: str) -> tuple[str, str]:
    name, _, digest = key.rpartition(_SEP)
    return name, digest


def _identity(*parts: Any) -> str:
    # Cooldown identities are JSON strings so they are hashable and survive to_dict().
    return json.dumps(parts, separators=(",", ":"))


def _canonical_rotation(block: list[str]) -> tuple[str, ...]:
    # A loop A,B,C is the same loop as B,C,A: pick the smallest rotation as its identity.
    return min(tuple(block[i:] + block[:i]) for i in range(len(block)))


class HealthMonitor:
    """Records one process's signals and reports behavioral anomalies.

    The ``record_*`` methods are coroutines for the process's async callback handler; they never
    suspend, so each call updates the state atomically with respect to other tasks.
    """

    MAX_ANOMALIES: ClassVar[int] = 1000
    _STATE_VERSION: ClassVar[int] = 1

    def __init__(
        self, config: HealthConfig, process_id: str = "", clock: TimeSource | None = None
    ) -> None:
        self._config = config
        self.process_id = process_id
        self._clock: TimeSource = clock if clock is not None else SystemClock()
        # Tool calls of the current run as "name\0hash" keys (one string compares fastest).
        self._calls: deque[str] = deque()
        self._run_len = 0  # consecutive identical calls ending at the latest one
        self._run_calls = 0  # calls recorded in this run
        # _matches[p]: how many latest calls equal the call p positions earlier. The tail is
        # periodic with period p over m + p calls, so a loop check costs O(window / repeats).
        self._matches: list[int] = [0, 0]
        self._reply_lengths: deque[int] = deque()
        self._outcomes: deque[bool] = deque()  # True = failed run
        self._anomalies: deque[Anomaly] = deque(maxlen=self.MAX_ANOMALIES)
        self._new: deque[Anomaly] = deque(maxlen=self.MAX_ANOMALIES)
        self._count = 0
        self._by_type: dict[AnomalyType, int] = dict.fromkeys(AnomalyType, 0)
        self._last_reported: dict[str, float] = {}  # identity -> monotonic time
        self._last_anomaly_at: float | None = None  # monotonic
        self._recovery_pending = False
        self._sizes: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)
        self._sync_windows()

    # -- configuration -------------------------------------------------------------------------

    @property
    def config(self) -> HealthConfig:
        return self._config

    def apply_config(self, config: HealthConfig) -> None:
        """Switch config; resize windows keeping the latest data, history and cooldowns."""
        self._config = config
        self._sync_windows()

    def _sync_windows(self) -> None:
        # Called on every signal, so sizes changed directly on the config object apply as well.
        cfg = self._config
        sizes = (
            cfg.loop_window,
            cfg.loop_min_repeats,
            cfg.stuck_threshold,
            cfg.empty_threshold,
            cfg.error_window,
        )
        if sizes == self._sizes:
            return
        self._sizes = sizes
        loop_window, repeats, stuck, empty, errors = sizes
        tool_len = max(loop_window, stuck)
        if self._calls.maxlen != tool_len:
            self._calls = deque(self._calls, maxlen=tool_len)
        if self._reply_lengths.maxlen != empty:
            self._reply_lengths = deque(self._reply_lengths, maxlen=empty)
        if self._outcomes.maxlen != errors:
            self._outcomes = deque(self._outcomes, maxlen=errors)
        self._rebuild_matches(loop_window // repeats)

    def _rebuild_matches(self, max_period: int) -> None:
        calls = list(self._calls)
        n = len(calls)
        matches = [0] * (max_period + 1)
        for p in range(2, max_period + 1):
            m = 0
            i = n - 1
            while i - p >= 0 and calls[i] == calls[i - p]:
                m += 1
                i -= 1
            matches[p] = m
        self._matches = matches

    # -- signals -------------------------------------------------------------------------------

    def begin_invocation(self) -> None:
        """Start a run: stuck and loop detection only look at the calls of one run."""
        self._calls.clear()
        self._run_len = 0
        self._run_calls = 0
        self._matches = [0] * len(self._matches)

    async def record_tool_call(self, tool_name: str, args: Any = None) -> Anomaly | None:
        """Record a call; return the anomaly it completes unless it is still in cooldown.

        If one call completes both a stuck and a loop anomaly, the stuck one is returned and
        both are recorded.
        """
        self._sync_windows()
        key = tool_name + _SEP + args_hash(args)
        calls = self._calls
        n = len(calls)
        self._run_len = self._run_len + 1 if n and calls[-1] == key else 1
        self._run_calls += 1
        run_len = self._run_len
        cfg = self._config
        needed_extra = cfg.loop_min_repeats - 1
        matches = self._matches
        period = 0
        for p in range(2, len(matches)):
            if n >= p and calls[-p] == key:
                m = matches[p] + 1
                matches[p] = m
                # Smallest period wins; a constant block (A,A) is stuck, not a loop.
                if not period and m >= p * needed_extra and run_len < p:
                    period = p
            else:
                matches[p] = 0
        calls.append(key)

        found: Anomaly | None = None
        if run_len >= cfg.stuck_threshold:
            found = self._report_stuck(tool_name, key)
        if period:
            loop = self._report_loop(period)
            if found is None:
                found = loop
        return found

    def _report_stuck(self, tool_name: str, key: str) -> Anomaly | None:
        count = self._run_len
        return self._report(
            _identity(AnomalyType.STUCK.value, key),
            AnomalyType.STUCK,
            f"Agent stuck: tool {tool_name!r} called {count} times consecutively "
            "with identical arguments",
            {"tool_name": tool_name, "consecutive_count": count},
        )

    def _report_loop(self, period: int) -> Anomaly | None:
        window = min(self._config.loop_window, self._run_calls, len(self._calls))
        periodic = min(self._matches[period] + period, window)
        repeat_count = periodic // period
        calls = self._calls
        # The pattern as it first appears in the periodic tail, for a readable report.
        block = [calls[-periodic + i] for i in range(period)]
        names = [_split_key(k)[0] for k in block]
        return self._report(
            _identity(AnomalyType.LOOP.value, _canonical_rotation(block)),
            AnomalyType.LOOP,
            f"Agent in a loop: pattern {' -> '.join(names)} repeated {repeat_count} times",
            {"pattern": names, "repeat_count": repeat_count, "pattern_length": period},
        )

    async def record_response(self, text: str) -> Anomaly | None:
        """Record the agent's final reply of a run (never a tool result)."""
        self._sync_windows()
        lengths = self._reply_lengths
        lengths.append(len(text.strip()))
        cfg = self._config
        max_chars = cfg.empty_max_chars
        # Lengths, not verdicts, are kept, so a new empty_max_chars applies to the next check.
        if len(lengths) < cfg.empty_threshold or any(n > max_chars for n in lengths):
            return None
        return self._report(
            _identity(AnomalyType.EMPTY_RESPONSE.value),
            AnomalyType.EMPTY_RESPONSE,
            f"Agent gave {len(lengths)} consecutive empty or trivial replies "
            f"(at most {max_chars} characters)",
            {"consecutive_count": len(lengths), "max_chars": max_chars, "lengths": list(lengths)},
        )

    async def record_success(self) -> bool:
        """Record a run that finished without raising; True once, on the first after an anomaly."""
        self._sync_windows()
        self._outcomes.append(False)
        if self._recovery_pending:
            self._recovery_pending = False
            return True
        return False

    async def record_error(self, error: BaseException | str | None = None) -> Anomaly | None:
        """Record a run that failed for good; return the high_error_rate anomaly, if any.

        ``error`` is accepted for the caller's convenience; only the outcome is kept.
        """
        self._sync_windows()
        outcomes = self._outcomes
        outcomes.append(True)
        cfg = self._config
        window = cfg.error_window
        if len(outcomes) < window:
            return None  # silent until the window is full
        failed = sum(outcomes)
        rate = failed / window
        if rate < cfg.error_rate_threshold:
            return None
        return self._report(
            _identity(AnomalyType.HIGH_ERROR_RATE.value),
            AnomalyType.HIGH_ERROR_RATE,
            f"High error rate: {failed} of the last {window} runs failed ({rate:.0%})",
            {
                "error_rate": rate,
                "error_count": failed,
                "window_size": window,
                "threshold": cfg.error_rate_threshold,
            },
        )

    # -- reporting -----------------------------------------------------------------------------

    def _report(
        self, identity: str, kind: AnomalyType, description: str, details: dict[str, Any]
    ) -> Anomaly | None:
        now = self._clock.monotonic()
        last = self._last_reported.get(identity)
        if last is not None and now - last < self._config.cooldown:
            return None
        self._remember(identity, now)
        anomaly = Anomaly(
            anomaly_type=kind,
            description=description,
            timestamp=datetime.fromtimestamp(self._clock.time(), UTC),
            details=details,
        )
        self._anomalies.append(anomaly)
        self._new.append(anomaly)
        self._count += 1
        self._by_type[kind] += 1
        self._last_anomaly_at = now
        self._recovery_pending = True
        return anomaly

    def _remember(self, identity: str, now: float) -> None:
        reported = self._last_reported
        reported.pop(identity, None)  # re-insert so dict order is oldest report first
        reported[identity] = now
        if len(reported) > self.MAX_ANOMALIES:
            # Distinct stuck calls are unbounded: forget expired cooldowns, then the oldest.
            cooldown = self._config.cooldown
            for key in [k for k, t in reported.items() if now - t >= cooldown]:
                del reported[key]
            while len(reported) > self.MAX_ANOMALIES:
                del reported[next(iter(reported))]

    def take_new_anomalies(self) -> list[Anomaly]:
        """Anomalies detected since the previous call, each returned once."""
        new = list(self._new)
        self._new.clear()
        return new

    def clear_anomalies(self) -> int:
        """Forget history, counts and cooldowns; return how many anomalies the history held."""
        cleared = len(self._anomalies)
        self._anomalies.clear()
        self._new.clear()
        self._count = 0
        self._by_type = dict.fromkeys(AnomalyType, 0)
        self._last_reported.clear()
        self._last_anomaly_at = None
        self._recovery_pending = False
        return cleared

    # -- reading -------------------------------------------------------------------------------

    @property
    def anomalies(self) -> list[Anomaly]:
        """Detected anomalies, oldest first (the latest MAX_ANOMALIES)."""
        return list(self._anomalies)

    @property
    def latest_anomaly(self) -> Anomaly | None:
        return self._anomalies[-1] if self._anomalies else None

    @property
    def tool_history(self) -> list[tuple[str, str]]:
        """The run's recorded calls (the latest ``max(loop_window, stuck_threshold)``)."""
        return [_split_key(k) for k in self._calls]

    def health_status(self) -> dict[str, Any]:
        latest = self.latest_anomaly
        recent = self._last_anomaly_at is not None and (
            self._clock.monotonic() - self._last_anomaly_at < self._config.cooldown
        )
        return {
            "is_healthy": not recent,
            "anomaly_count": self._count,
            "anomalies_by_type": {t.value: n for t, n in self._by_type.items()},
            "latest_anomaly": None
            if latest is None
            else {
                "type": latest.anomaly_type.value,
                "description": latest.description,
                "timestamp": latest.timestamp.isoformat(),
            },
        }

    # -- persistence ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state: windows, counts, history and cooldowns (as wall-clock times)."""
        mono, wall = self._clock.monotonic(), self._clock.time()

        def to_wall(t: float) -> float:
            # Monotonic readings mean nothing after a restart; wall time does.
            return wall - (mono - t)

        return {
            "version": self._STATE_VERSION,
            "process_id": self.process_id,
            "tool_calls": [list(_split_key(k)) for k in self._calls],
            "run_len": self._run_len,
            "run_calls": self._run_calls,
            "reply_lengths": list(self._reply_lengths),
            "outcomes": list(self._outcomes),
            "anomalies": [a.to_dict() for a in self._anomalies],
            "new_anomalies": [a.to_dict() for a in self._new],
            "anomaly_count": self._count,
            "anomalies_by_type": {t.value: n for t, n in self._by_type.items()},
            "cooldowns": [[k, to_wall(t)] for k, t in self._last_reported.items()],
            "last_anomaly_at": None
            if self._last_anomaly_at is None
            else to_wall(self._last_anomaly_at),
            "recovery_pending": self._recovery_pending,
        }

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        config: HealthConfig,
        *,
        process_id: str | None = None,
        clock: TimeSource | None = None,
    ) -> HealthMonitor:
        """Restore a monitor saved with :meth:`to_dict`; windows are fitted to ``config``."""
        version = data.get("version")
        if version != cls._STATE_VERSION:
            raise ValueError(f"unsupported health state version {version!r}")
        monitor = cls(
            config,
            process_id=str(data.get("process_id", "")) if process_id is None else process_id,
            clock=clock,
        )
        mono, wall = monitor._clock.monotonic(), monitor._clock.time()

        def to_mono(t: float) -> float:
            return mono - (wall - float(t))

        monitor._calls.extend(name + _SEP + digest for name, digest in data["tool_calls"])
        monitor._run_len = int(data["run_len"])
        monitor._run_calls = int(data["run_calls"])
        monitor._reply_lengths.extend(int(n) for n in data["reply_lengths"])
        monitor._outcomes.extend(bool(x) for x in data["outcomes"])
        monitor._anomalies.extend(Anomaly.from_dict(a) for a in data["anomalies"])
        monitor._new.extend(Anomaly.from_dict(a) for a in data.get("new_anomalies", ()))
        monitor._count = int(data["anomaly_count"])
        by_type: Mapping[str, int] = data["anomalies_by_type"]
        monitor._by_type = {t: int(by_type.get(t.value, 0)) for t in AnomalyType}
        cooldowns: Iterable[tuple[str, float]] = data["cooldowns"]
        monitor._last_reported = {str(k): to_mono(t) for k, t in cooldowns}
        last = data.get("last_anomaly_at")
        monitor._last_anomaly_at = None if last is None else to_mono(last)
        monitor._recovery_pending = bool(data["recovery_pending"])
        monitor._rebuild_matches(len(monitor._matches) - 1)
        return monitor
