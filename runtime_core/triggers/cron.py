"""``cron`` triggers: fire on a cron schedule in an IANA time zone (UTC by default).

Expressions have 5 fields (``minute hour day month weekday``) or 6 with a trailing seconds
field (``"* * * * * */10"`` = every 10 s); croniter does the calendar work, including DST.
Each wait computes the next fire time from *now*, so fire times missed while the process was
busy or suspended are skipped, never replayed in a burst.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from runtime_core.clock import Clock
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
    try:
        # Computing one fire time also catches schedules that never match (e.g. 30 February).
        croniter(expression, datetime(2026, 1, 1, tzinfo=zone)).get_next(datetime)
    except (CroniterError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"invalid cron expression {expression!r}: {exc}; {_FIELDS_HELP}"
        ) from None


class CronTrigger:
    trigger_type = "cron"

    def __init__(self, trigger_id: str, expression: str, timezone: str | None,
                 clock: Clock) -> None:
        validate_cron(expression, timezone)
        self.trigger_id = trigger_id
        self.expression = expression
        self.timezone = DEFAULT_TIMEZONE if timezone is None else timezone
        self._zone = load_timezone(timezone)
        self._clock = clock
        # The last fire time handed out: an early wake-up must not fire the same slot twice.
        self._last_fire: float | None = None

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def next_fire_time(self, after: float) -> datetime:
        """The first fire time strictly after the epoch time ``after``, in the trigger's zone."""
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
