"""The journal's retention setting: how long the entries of finished runs are kept.

``journal: {retention: {max_age: "7d", keep_runs: 1000}}`` in a manifest. Without it (the
default) the journal keeps everything. What retention may remove, and what it never removes,
is in ``runtime_core.journal.sqlite.retention``.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from runtime_core.strict import StrictModel

#: Seconds per duration unit.
UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
DURATION_HELP = ("seconds (3600) or a number with s, m, h, d or w ('90s', '30m', '12h', '7d', "
                 "'2w')")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
#: How often the background pass runs unless ``every`` says otherwise (seconds).
DEFAULT_EVERY = 60.0


def parse_duration(value: Any, what: str) -> Any:
    """``value`` in seconds: a number of seconds, or text like '90s', '30m', '12h', '7d';
    a ValueError naming ``what`` and the forms it takes otherwise (None passes)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a duration, not {value!r}: use {DURATION_HELP}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match.group(1)) * UNITS[match.group(2) or "s"]
    else:
        raise ValueError(f"{what} {value!r} is not a duration: use {DURATION_HELP}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{what} must be longer than 0 seconds, not {value!r}")
    return seconds


class RetentionConfig(StrictModel):
    """How long a process's journal keeps the entries of its finished runs.

    ``max_age``: runs that finished longer ago than this go (a duration: ``"7d"``, ``"12h"``,
    ``"30m"`` or seconds). ``keep_runs``: only the newest this many finished runs are kept.
    With both, a run goes once it is past either limit. ``every``: how often the background
    pass runs (default one minute). Nothing recovery, open or waiting runs, queued events,
    dead letters, incidents or the delivery index need is ever removed, and a restart gives
    back the same conversation (the runs it reads are kept whatever the limits)."""

    max_age: Annotated[float, Field(gt=0)] | None = Field(default=None, description=(
        "Runs that finished longer ago than this go: seconds, or '90s', '30m', '12h', '7d', "
        "'2w'."))
    keep_runs: Annotated[int, Field(ge=1)] | None = Field(default=None, description=(
        "Only the newest this many finished runs are kept."))
    every: Annotated[float, Field(gt=0, description=(
        "How often the background pass runs: seconds, or a duration like '5m'."))
                     ] = DEFAULT_EVERY

    @field_validator("max_age", "every", mode="before")
    @classmethod
    def _duration(cls, value: Any, info: Any) -> Any:
        return parse_duration(value, str(info.field_name))

    @field_validator("keep_runs", mode="before")
    @classmethod
    def _count(cls, value: Any) -> Any:
        if isinstance(value, bool) or (value is not None and not isinstance(value, int)):
            raise ValueError(f"keep_runs must be a whole number of runs (e.g. 1000), not "
                             f"{value!r}")
        return value

    @model_validator(mode="after")
    def _says_something(self) -> RetentionConfig:
        if self.max_age is None and self.keep_runs is None:
            raise ValueError("retention needs max_age (e.g. '7d'), keep_runs (e.g. 1000) or "
                             "both; to keep everything, leave retention out")
        return self
