"""``cron`` triggers: fire on a cron schedule in an IANA time zone (UTC by default).

Expressions have 5 fields (``minute hour day month weekday``) or 6 with a trailing seconds
field (``"* * * * * */10"`` = every 10 s); croniter does the calendar work, including DST.
Each wait computes the next fire time from *now*, so fire times missed while the process was
busy or suspended are skipped, never replayed in a burst.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from runtime_core.clock import Clock, SystemClock
from runtime_core.triggers.base import TriggerEvent

DEFAULT_TIMEZONE = "UTC"
_FIELDS_HELP = "expected 5 fields 'minute hour day month weekday' or 6 with trailing seconds"

#: Longest single sleep. Sleeping in slices re-reads the wall clock, so a machine suspend or a
#: wall-clock change (which a monotonic sleep does not see) delays a fire by at most this.
MAX_SLEEP_SLICE = 60.0


def load_timezone(timezone: str | None) -> ZoneInfo:
    """The zone named ``timezone`` (UTC for None); ValueError with a hint otherwise."""
    name = DEFAULT_TIMEZONE if timezone is None else timezone
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # ZoneInfo raises KeyError subclasses, ValueError (bad path) or OSError (a directory).
        raise ValueError(
            f"unknown time zone {name!r}: use an IANA name such as Europe/Paris"
        ) from None


def validate_cron(expression: str, timezone: str | None = None) -> None:
    """Raise ValueError with a clear message if the expression or the zone is invalid."""
    fields = expression.split()
    if len(fields) not in (5, 6):
        raise ValueError(f"invalid cron expression {expression!r}: {_FIELDS_HELP}")
    zone = load_timezone(timezone)
    # croniter (and dateutil) load with the first cron expression, not with every config.
    from croniter import CroniterError, croniter

    try:
        # Computing one fire time also catches schedules that never match (e.g. 30 February).
        croniter(expression, datetime(2026, 1, 1, tzinfo=zone)).get_next(datetime)
    except (CroniterError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"invalid cron expression {expression!r}: {exc}; {_FIELDS_HELP}"
        ) from None


class CronTrigger:
    """Fires on a cron schedule. The runtime builds it from a TriggerConfig as
    ``CronTrigger(trigger_id, expression, timezone, clock)``. Code written for the reference
    runtime builds it its way: ``CronTrigger("*/5 * * * *", trigger_id=None, timezone=None)``
    or ``CronTrigger(cron_expression="*/5 * * * *")``; without an id it gets
    ``cron-<8 hex digits>``, and the system clock."""

    trigger_type = "cron"

    def __init__(self, first: str | None = None, expression_: str | None = None,
                 timezone_: str | None = None, clock_: Clock | None = None, /, *,
                 cron_expression: str | None = None, trigger_id: str | None = None,
                 timezone: str | None = None, clock: Clock | None = None) -> None:
        if expression_ is not None:  # ours: (trigger_id, expression, timezone, clock)
            if first is None or cron_expression is not None or trigger_id is not None:
                raise TypeError("CronTrigger takes (trigger_id, expression, timezone, clock) or "
                                "the reference's (cron_expression, *, trigger_id=, "
                                "timezone=), not a mix")
            trigger_id, expression = first, expression_
        else:
            if first is not None and cron_expression is not None:
                raise TypeError("CronTrigger got the cron expression twice (positionally and "
                                "as cron_expression=)")
            found = cron_expression if cron_expression is not None else first
            if found is None:
                raise TypeError("CronTrigger needs a cron expression: "
                                "CronTrigger(cron_expression='*/5 * * * *')")
            expression = found
            trigger_id = trigger_id or f"cron-{uuid.uuid4().hex[:8]}"
        timezone = timezone if timezone is not None else timezone_
        validate_cron(expression, timezone)
        self.trigger_id = trigger_id
        self.expression = expression
        self.timezone = DEFAULT_TIMEZONE if timezone is None else timezone
        self._zone = load_timezone(timezone)
        self._clock: Clock = clock or clock_ or SystemClock()
        # The last fire time handed out: an early wake-up must not fire the same slot twice.
        self._last_fire: float | None = None

    @property
    def cron_expression(self) -> str:
        """The expression (the reference's name for ``expression``)."""
        return self.expression

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def next_fire_time(self, after: float) -> datetime:
        """The first fire time strictly after the epoch time ``after``, in the trigger's zone."""
        from croniter import croniter

        start = datetime.fromtimestamp(after, self._zone)
        result: datetime = croniter(self.expression, start).get_next(datetime)
        return result

    async def wait_for_next(self) -> TriggerEvent:
        now = self._clock.time()
        after = now if self._last_fire is None else max(now, self._last_fire)
        fire = self.next_fire_time(after)
        target = fire.timestamp()
        while (remaining := target - self._clock.time()) > 0:
            await self._clock.sleep(min(remaining, MAX_SLEEP_SLICE))
        self._last_fire = target
        return TriggerEvent(self.trigger_id, "cron", {
            "scheduled_time": fire.isoformat(),
            "cron_expression": self.expression,
            "timezone": self.timezone,
        })
