"""The autonomy budget: limits per run and per day, checked before each tool call.

A call that would go over a limit is not executed; the model sees why. Daily counters reset at
the day boundary (on the process clock) and survive restarts through journal checkpoints."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from runtime_core.clock import Clock
from runtime_core.errors import RuntimeBaseError
from runtime_core.governance.config import BudgetConfig, ToolCostAnnotation


@dataclass(frozen=True, slots=True)
class BudgetViolation:
    limit: str
    limit_value: float
    would_be: float
    tool: str = ""

    def message(self) -> str:
        what = f"; tool call {self.tool!r} was not executed" if self.tool else ""
        return (f"budget limit {self.limit} reached (limit {self.limit_value:g}){what}. "
                "Stop calling tools and give your final answer.")


class BudgetExceededError(RuntimeBaseError):
    """A tool call (or model call) an autonomy budget limit stopped: the reference runtime's
    name. The runtime does not raise it into a run: the call is not made and the model is told
    ``str(error)`` as the tool's result (the same message). ``violation`` is the
    BudgetViolation."""

    def __init__(self, violation: BudgetViolation) -> None:
        self.violation = violation
        message = violation.message()
        super().__init__(message[:1].upper() + message[1:])


@dataclass(frozen=True, slots=True)
class BudgetWarning:
    limit: str
    limit_value: float
    current: float


_DAILY = ("runs", "tool_calls", "cost", "irreversible")


class Budget:
    def __init__(self, config: BudgetConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.run_tool_calls = 0
        self.run_model_calls = 0
        self.run_cost = 0.0
        self.run_irreversible = 0
        self.day = self._day_key()
        self.daily: dict[str, float] = dict.fromkeys(_DAILY, 0.0)
        self._warned: set[str] = set()
        self.pending_warnings: list[BudgetWarning] = []
        self.violations: list[BudgetViolation] = []

    # -- days --------------------------------------------------------------------------------
    def _day_key(self) -> str:
        shifted = datetime.fromtimestamp(self.clock.time(), UTC) - timedelta(
            hours=self.config.daily_reset_hour_utc)
        return shifted.date().isoformat()

    def _roll_day(self) -> None:
        today = self._day_key()
        if today != self.day:
            self.day = today
            self.daily = dict.fromkeys(_DAILY, 0.0)
            self._warned.clear()

    # -- checks ------------------------------------------------------------------------------
    def _limits(self) -> dict[str, tuple[float | None, float]]:
        c = self.config
        return {
            "max_tool_calls_per_run": (c.max_tool_calls_per_run, self.run_tool_calls),
            "max_model_calls_per_run": (c.max_model_calls_per_run, self.run_model_calls),
            "max_cost_per_run": (c.max_cost_per_run, self.run_cost),
            "max_irreversible_per_run": (c.max_irreversible_per_run, self.run_irreversible),
            "max_runs_per_day": (c.max_runs_per_day, self.daily["runs"]),
            "max_tool_calls_per_day": (c.max_tool_calls_per_day, self.daily["tool_calls"]),
            "max_cost_per_day": (c.max_cost_per_day, self.daily["cost"]),
            "max_irreversible_per_day": (c.max_irreversible_per_day,
                                         self.daily["irreversible"]),
        }

    def _over(self, name: str, would_be: float, tool: str = "") -> BudgetViolation | None:
        limit = self._limits()[name][0]
        if limit is not None and would_be > limit + 1e-9:
            violation = BudgetViolation(name, float(limit), would_be, tool)
            self.violations.append(violation)
            return violation
        return None

    def begin_run(self) -> BudgetViolation | None:
        """A new run: refused (not counted) when the day's runs are used up."""
        self._roll_day()
        self.run_tool_calls = 0
        self.run_model_calls = 0
        self.run_cost = 0.0
        self.run_irreversible = 0
        refused = self._over("max_runs_per_day", self.daily["runs"] + 1)
        if refused is None:
            self.daily["runs"] += 1
            self._note_warnings()
        return refused

    def before_model_call(self) -> BudgetViolation | None:
        refused = self._over("max_model_calls_per_run", self.run_model_calls + 1)
        if refused is None:
            self.run_model_calls += 1
        return refused

    def before_tool_call(self, tool: str) -> BudgetViolation | None:
        """Count the call if it fits every limit; otherwise refuse it and count nothing."""
        self._roll_day()
        cost = self.config.tool_costs.get(tool, ToolCostAnnotation())
        checks = [("max_tool_calls_per_run", self.run_tool_calls + 1),
                  ("max_tool_calls_per_day", self.daily["tool_calls"] + 1),
                  ("max_cost_per_run", self.run_cost + cost.cost_weight),
                  ("max_cost_per_day", self.daily["cost"] + cost.cost_weight)]
        if cost.irreversible:
            checks.append(("max_irreversible_per_run", self.run_irreversible + 1))
            checks.append(("max_irreversible_per_day", self.daily["irreversible"] + 1))
        for name, would_be in checks:
            refused = self._over(name, would_be, tool)
            if refused is not None:
                return refused
        self.run_tool_calls += 1
        self.run_cost += cost.cost_weight
        self.daily["tool_calls"] += 1
        self.daily["cost"] += cost.cost_weight
        if cost.irreversible:
            self.run_irreversible += 1
            self.daily["irreversible"] += 1
        self._note_warnings()
        return None

    def _note_warnings(self) -> None:
        for name, (limit, current) in self._limits().items():
            if limit is None or name in self._warned or "per_run" in name:
                continue
            if current >= self.config.warning_threshold * limit:
                self._warned.add(name)
                self.pending_warnings.append(BudgetWarning(name, float(limit), current))

    def take(self) -> tuple[list[BudgetViolation], list[BudgetWarning]]:
        """Violations and warnings since the last call, each returned once."""
        violations, warnings = self.violations, self.pending_warnings
        self.violations, self.pending_warnings = [], []
        return violations, warnings

    # -- views and persistence -----------------------------------------------------------------
    def remaining(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for name, (limit, current) in self._limits().items():
            out[name.removeprefix("max_")] = None if limit is None else limit - current
        return out

    def prompt_line(self) -> str:
        parts = [f"{k}={v:g}" for k, v in self.remaining().items() if v is not None]
        return "[Budget Remaining] " + (", ".join(parts) if parts else "unlimited")

    def to_dict(self) -> dict[str, Any]:
        return {"day": self.day, "daily": dict(self.daily), "warned": sorted(self._warned)}

    def restore(self, data: dict[str, Any]) -> None:
        if data.get("day") == self._day_key():  # yesterday's counters do not carry over
            self.day = str(data["day"])
            self.daily = {k: float(v) for k, v in dict(data.get("daily") or {}).items()
                          if k in _DAILY and math.isfinite(float(v))}
            for key in _DAILY:
                self.daily.setdefault(key, 0.0)
            self._warned = set(data.get("warned") or [])
